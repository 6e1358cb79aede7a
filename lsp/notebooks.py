"""Notebooks the client syncs (LSP 3.17 notebookDocument/*): the order of each notebook's cells, so that a cell is
completed with the code cells above it as the text before the cursor and those below as the lines below, as
one file of the notebook's code would read. The cells' text lives in the DocumentStore, as documents of their own.
"""
from __future__ import annotations

import dataclasses
import logging
import re
from typing import Iterable

from completer.syntax import PYTHON_NAME
from lsp.documents import Document, DocumentStore

log = logging.getLogger(__name__)

CODE = 2  # NotebookCellKind.Code; 1 is Markup
CELL_SCHEME = "vscode-notebook-cell:"


CELL_MAGIC = re.compile(r"%%(\w+)[ \t]*(\S*)")
OTHER_LANGUAGE_MAGICS = frozenset({"bash", "sh", "script", "html", "HTML", "javascript", "js", "latex", "markdown",
                                   "svg", "perl", "ruby", "sql", "R", "kql"})
"""IPython's cell magics (and common extensions') that run the cell as another language than Python."""


def runs_other_language(doc: Document) -> bool:
    """Whether IPython runs a Python cell as another language: its first line is a cell magic such as `%%bash` or
    `%%html` (`%%script python3` and `%%timeit` are still Python). VS Code keeps such a cell's language Python."""
    if doc.language != PYTHON_NAME or not doc.lines or not doc.lines[0].startswith("%%"):
        return False
    found = CELL_MAGIC.match(doc.lines[0])
    if found is None or found.group(1) not in OTHER_LANGUAGE_MAGICS:
        return False
    return not (found.group(1) == "script" and found.group(2).startswith("python"))


def cell_file_uri(uri: str) -> str | None:
    """The `file:` URI of the notebook a VS Code cell URI names, for a cell whose notebook the client does not sync
    (no notebookDocument/didOpen): VS Code gives each cell the notebook's path, the cell in the fragment
    (`vscode-notebook-cell:/home/u/book.ipynb#W0sZmlsZQ%3D%3D`). None for any other URI, and for an untitled
    notebook's cell, whose path names no file."""
    if not uri.startswith(CELL_SCHEME):
        return None
    rest = uri[len(CELL_SCHEME):].partition("#")[0]
    return "file:" + rest if rest.startswith("/") else None


@dataclasses.dataclass
class Cell:
    uri: str  # its text document's
    kind: int


@dataclasses.dataclass
class Notebook:
    uri: str
    cells: list[Cell]


@dataclasses.dataclass
class Around:
    """A cell's code as one document: the code cells above it, the cell, and those below, each apart from the
    next by an empty line."""

    lines: list[str]
    first: int  # the cell's first line among `lines`


class NotebookStore:
    """Open notebooks by URI, and the notebook each cell belongs to."""

    def __init__(self) -> None:
        self._notebooks: dict[str, Notebook] = {}
        self._notebook_of: dict[str, str] = {}  # cell URI -> notebook URI

    def __contains__(self, uri: str) -> bool:
        return uri in self._notebooks

    def uris(self) -> list[str]:
        return list(self._notebooks)

    def open(self, uri: str, cells: Iterable[Cell]) -> None:
        self.close(uri)
        notebook = Notebook(uri, list(cells))
        self._notebooks[uri] = notebook
        for cell in notebook.cells:
            self._notebook_of[cell.uri] = uri

    def close(self, uri: str) -> list[str]:
        """Forget the notebook; the URIs of its cells."""
        notebook = self._notebooks.pop(uri, None)
        if notebook is None:
            return []
        for cell in notebook.cells:
            if self._notebook_of.get(cell.uri) == uri:
                del self._notebook_of[cell.uri]
        return [cell.uri for cell in notebook.cells]

    def splice(self, uri: str, start: int, delete: int, cells: Iterable[Cell]) -> None:
        """A structure change: `delete` cells from `start` replaced by `cells` (clamped to the notebook)."""
        notebook = self._notebooks[uri]
        start = max(0, min(start, len(notebook.cells)))
        for cell in notebook.cells[start:start + max(0, delete)]:
            self._notebook_of.pop(cell.uri, None)
        new = list(cells)
        notebook.cells[start:start + max(0, delete)] = new
        for cell in new:
            self._notebook_of[cell.uri] = uri

    def set_kind(self, uri: str, cell_uri: str, kind: int) -> bool:
        """Whether the cell's kind changed (code to markdown or back), and with it the code around every cell."""
        changed = False
        for cell in self._notebooks[uri].cells:
            if cell.uri == cell_uri and cell.kind != kind:
                cell.kind, changed = kind, True
        return changed

    def cells(self, uri: str) -> list[str]:
        """The URIs of the notebook's cells (none when it is not open)."""
        notebook = self._notebooks.get(uri)
        return [cell.uri for cell in notebook.cells] if notebook is not None else []

    def notebook_of(self, cell_uri: str) -> str | None:
        return self._notebook_of.get(cell_uri)

    def cells_of(self, cell_uri: str) -> list[str]:
        """The URIs of every cell in the notebook `cell_uri` belongs to (none when it is no cell)."""
        return self.cells(self._notebook_of.get(cell_uri, ""))

    def shared_document(self, cell_uri: str, documents: DocumentStore) -> str | None:
        """The notebook's URI, for a code cell in the language of its first code cell: such cells' contexts begin
        alike (the cells above), so the engine keeps one cache for them all under that name. None for a cell of
        another kind or language, and for a document that is no cell."""
        notebook = self._notebooks.get(self._notebook_of.get(cell_uri, ""))
        if notebook is None:
            return None
        codes = [cell.uri for cell in notebook.cells if cell.kind == CODE and documents.get(cell.uri) is not None]
        if cell_uri not in codes:
            return None
        first, cell = documents.get(codes[0]), documents.get(cell_uri)
        return notebook.uri if first is not None and cell is not None and cell.language == first.language else None

    def last_code_cell(self, uri: str) -> str | None:
        notebook = self._notebooks.get(uri)
        codes = [cell.uri for cell in notebook.cells if cell.kind == CODE] if notebook is not None else []
        return codes[-1] if codes else None

    def around(self, doc: Document, documents: DocumentStore) -> Around | None:
        """`doc`'s cell among the notebook's code cells in its language, in their order; None when `doc` is no
        code cell of an open notebook, or one IPython runs as another language (`runs_other_language`)."""
        notebook = self._notebooks.get(self._notebook_of.get(doc.uri, ""))
        if notebook is None:
            return None
        lines: list[str] = []
        first = None
        for cell in notebook.cells:
            other = doc if cell.uri == doc.uri else documents.get(cell.uri)
            if cell.kind != CODE or other is None or other.language != doc.language or runs_other_language(other):
                if other is doc:
                    return None
                continue
            if lines:
                lines.append("")
            if other is doc:
                first = len(lines)
            lines += other.lines
        return Around(lines, first) if first is not None else None
