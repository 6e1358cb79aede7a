"""The repository-level head of a prompt: the workspace's snippets laid out as files, the way code models trained
on whole repositories read them (Qwen2.5-Coder's `<|repo_name|>` and `<|file_sep|>`, StarCoder2's `<repo_name>`
and `<file_sep>`). The remote backend sends
it as text (completer/remote.py); the engine places it as token ids before a converted model's FIM prompt
(completer/prompt.py). The workspace index picks the snippets (completer/workspace.py, lsp/workspace.py).
"""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .fim import FIM_TEMPLATES
from .text import clean

SNIPPET_CHARS = 2000
"""Repository snippets sent at most, in all (the prompt's head, commented out or laid out as files)."""
MIN_SNIPPET_LINES = 3
"""A snippet cut to fewer lines than this (to fit the budget) says too little to be sent."""
LINE_BREAKS = re.compile("[\r\n\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
"""Every character some editor or JSON reader takes for a line break: a suggestion ends at the first."""


@dataclass(frozen=True)
class RepositoryFormat:
    """How a family's models were trained to read a repository: `<name marker>folder`, then each file as
    `<file marker>path\ncode`, then the file being completed. Qwen2.5-Coder puts a newline after the folder's name
    and the completed file's path before its FIM prompt (`<|file_sep|>path\n<|fim_prefix|>code...`); StarCoder2
    puts no newline there, and the path inside the FIM prefix (`<file_sep><fim_prefix>path\ncode...`)."""

    name_marker: str
    file_marker: str
    after_name: str
    path_in_fim_prefix: bool

    @property
    def markers(self) -> tuple[str, str]:
        return self.name_marker, self.file_marker


REPOSITORY_FORMATS: dict[str, RepositoryFormat] = {
    "qwen": RepositoryFormat("<|repo_name|>", "<|file_sep|>", after_name="\n", path_in_fim_prefix=False),
    "starcoder2": RepositoryFormat("<repo_name>", "<file_sep>", after_name="", path_in_fim_prefix=True),
}
"""The FIM templates whose models were trained on whole repositories laid out as files: the snippets go in so."""
CHARS_PER_TOKEN = 4
"""A first guess at the characters a token of code holds, for a head measured in tokens (then cut to fit)."""


@dataclass(frozen=True)
class RepositoryContext:
    """Where the cursor's document lies in the workspace, and the snippets of its other files, by their paths."""

    name: str  # the workspace folder's name
    path: str  # the document's path in it
    files: tuple[tuple[str, str], ...] = ()  # (a path in the workspace, a window of that file), best first

    def to_message(self) -> dict[str, Any]:
        """What the worker is sent: the places alone; the snippets' texts travel as the request's `snippets`."""
        return {"name": self.name, "path": self.path, "paths": [path for path, _ in self.files]}

    @staticmethod
    def from_message(message: Any, snippets: Sequence[str]) -> RepositoryContext | None:
        """The context `to_message` sent, with the request's snippets as its files' texts; None when there is
        none, or it is not what `to_message` sends (a path for each snippet)."""
        if not isinstance(message, dict):
            return None
        name, path, paths = message.get("name"), message.get("path"), message.get("paths")
        if not (isinstance(name, str) and isinstance(path, str) and isinstance(paths, list)
                and len(paths) == len(snippets) and all(isinstance(p, str) for p in paths)):
            return None
        return RepositoryContext(name, path, tuple(zip(paths, snippets)))


def fitted(head: str, text: str, room: int, prefix: str = "") -> str | None:
    """`head`, then the first lines of `text` (cleaned, each after `prefix`) that fit in `room` characters in
    all; None for a blank text, or when fewer than MIN_SNIPPET_LINES of them fit (or not all of a shorter text):
    a window's first lines stand for it, as a 60-line window is often longer than the whole budget."""
    if not clean(text).strip():
        return None  # it says nothing, and would lay out a file of blank lines
    lines = clean(text).rstrip("\n").split("\n")
    block, kept = head, 0
    for line in lines:
        if len(block) + len(prefix) + len(line) + 1 > room:
            break
        block += f"{prefix}{line}\n"
        kept += 1
    return block if kept and kept >= min(MIN_SNIPPET_LINES, len(lines)) else None


def repository_head(template: str, repository: RepositoryContext, limit: int = SNIPPET_CHARS) -> str:
    """The repository-level head of a prompt for a template in REPOSITORY_FORMATS: the folder's name, each
    snippet under its file's path (cut to the lines that fit in `limit` characters in all), then the document's
    file marker and, where the format puts it there, its path; the FIM prompt follows as that file's text, opened
    by `document_opening`. A snippet or path that holds one of the template's markers, or a path with a line
    break, would lay out other files than there are: it is left out."""
    layout = REPOSITORY_FORMATS[template]
    name_marker, file_marker = layout.markers
    markers = _all_markers(template)
    parts = [f"{name_marker}{_plain(repository.name, markers)}{layout.after_name}"]
    size = 0
    for path, text in repository.files:
        if any(marker in text or marker in path for marker in markers) or LINE_BREAKS.search(path):
            continue
        block = fitted(f"{file_marker}{path}\n", text, limit - size)
        if block is not None:
            parts.append(block)
            size += len(block)
    parts.append(file_marker if layout.path_in_fim_prefix else f"{file_marker}{_plain(repository.path, markers)}\n")
    return "".join(parts)


def document_opening(template: str, repository: RepositoryContext) -> str:
    """What the FIM prefix starts with before the document's text, after `repository_head`: its path, in a format
    that puts the path inside the FIM prefix; else nothing."""
    layout = REPOSITORY_FORMATS[template]
    if not layout.path_in_fim_prefix:
        return ""
    return f"{_plain(repository.path, _all_markers(template))}\n"


def repository_head_ids(template: str, repository: RepositoryContext, budget: int,
                        encode: Callable[[str], list[int]], marker_ids: tuple[int, int]) -> list[int]:
    """`repository_head` as the model's token ids, in at most `budget` tokens: its text encoded between the
    markers, each marker its own id (the tokenizer reads markers in text as text). The snippets' characters
    shrink, in proportion to how far over they are, until the head fits; with room for no snippet, it is the
    folder's name and the document's path alone; [] when not even those fit."""
    markers = REPOSITORY_FORMATS[template].markers
    by_marker = dict(zip(markers, marker_ids))
    split = re.compile("(" + "|".join(map(re.escape, markers)) + ")")

    def ids_of(text: str) -> list[int]:
        ids: list[int] = []
        for piece in split.split(text):
            if piece in by_marker:
                ids.append(by_marker[piece])
            elif piece:
                ids += encode(piece)
        return ids

    bare = ids_of(repository_head(template, RepositoryContext(repository.name, repository.path)))
    if len(bare) > budget:
        return []
    chars = (budget - len(bare)) * CHARS_PER_TOKEN
    while chars > 0:
        ids = ids_of(repository_head(template, repository, chars))
        if len(ids) <= budget:
            return ids
        chars = min(chars - 1, chars * (budget - len(bare)) * 9 // (10 * (len(ids) - len(bare))))
    return bare


def _all_markers(template: str) -> tuple[str, ...]:
    """Every marker of a template with a repository format: no text it lays out may hold one."""
    return (*REPOSITORY_FORMATS[template].markers, *FIM_TEMPLATES[template])


def _plain(name: str, markers: Sequence[str]) -> str:
    """A folder's name or a path with no marker and no line break in it."""
    while any(marker in name for marker in markers):  # removing one may join the text around it into another
        for marker in markers:
            name = name.replace(marker, "")
    return LINE_BREAKS.sub(" ", name)
