"""What the filters and the search ahead know of a document's language: its comments and strings, and whether
Python's statement rules apply.

The embedded models write Python, and every rule in filters.py and indentation.py was made for it. A converted
model (completer convert) writes most languages, so a document's language decides which rules hold: Python's
own; for the languages below, only the lexical ones (brackets that close what they open, strings that end, a
line that leaves a bracket open ending the way a construct that goes on does), read past their comments and
strings; for any other language none, since a rule read from the wrong language drops good lines.
"""
from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field

PYTHON_NAME = "python"


@dataclass(frozen=True)
class Syntax:
    """A language's lexical rules, as far as the filters read them."""

    name: str
    lexical: bool = True  # brackets and strings are checked; False: no rule of the language is known here
    statements: bool = False  # Python's statement rules (filters.statement_can_start/end, indentation.py)
    line_comments: tuple[str, ...] = ()
    block_comment: tuple[str, str] | None = None
    quotes: str = "\"'"  # strings that end on their own line
    long_quotes: tuple[str, ...] = ()  # the delimiters of strings that may go on over lines
    special: re.Pattern[str] = field(init=False, repr=False, compare=False)  # where scanning must look

    def __post_init__(self) -> None:
        starts = {"\n", "(", ")", "[", "]", "{", "}", *self.quotes}
        if self.statements:
            starts.add(":")  # Python's block colon (Scan.top_colon)
        starts.update(marker[0] for marker in (*self.line_comments, *self.long_quotes))
        if self.block_comment:
            starts.add(self.block_comment[0][0])
        object.__setattr__(self, "special", re.compile("[" + "".join(map(re.escape, sorted(starts))) + "]"))


PYTHON = Syntax(PYTHON_NAME, statements=True, line_comments=("#",), long_quotes=('"""', "'''"))
NEUTRAL = Syntax("", lexical=False)

_C = {"line_comments": ("//",), "block_comment": ("/*", "*/")}
_BY_LANGUAGE = {
    **{name: Syntax(name, **_C, long_quotes=("`",))
       for name in ("javascript", "javascriptreact", "typescript", "typescriptreact", "go")},
    **{name: Syntax(name, **_C, long_quotes=('"""',))
       for name in ("java", "kotlin", "scala", "swift", "csharp", "dart", "groovy")},
    **{name: Syntax(name, **_C) for name in ("c", "cpp", "cuda-cpp", "objective-c", "objective-cpp", "d")},
    "php": Syntax("php", line_comments=("//", "#"), block_comment=("/*", "*/")),
    "rust": Syntax("rust", **_C, quotes='"'),  # a quote also marks a lifetime
    **{name: Syntax(name, line_comments=("#",)) for name in ("ruby", "r", "julia", "elixir", "perl")},
    **{name: Syntax(name, line_comments=("--",)) for name in ("lua", "sql", "haskell", "elm")},
}
"""Languages whose comments and strings are read here; the shell's `case` patterns, markup and data formats
are not among them, and get no rule."""


def syntax_for(language: str | None) -> Syntax:
    """The rules for an LSP language id; None (a caller that does not know it) is Python, the engine's own."""
    if language is None or language == PYTHON_NAME:
        return PYTHON
    return _BY_LANGUAGE.get(language, NEUTRAL)


EXTENSION_LANGUAGES = {
    ".py": "python", ".pyi": "python", ".pyw": "python", ".js": "javascript", ".mjs": "javascript",
    ".cjs": "javascript", ".jsx": "javascriptreact", ".ts": "typescript", ".tsx": "typescriptreact",
    ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".hpp": "cpp", ".cs": "csharp",
    ".go": "go", ".rs": "rust", ".java": "java", ".kt": "kotlin", ".rb": "ruby", ".php": "php", ".lua": "lua",
    ".sh": "shellscript", ".bash": "shellscript", ".zsh": "shellscript", ".json": "json", ".toml": "toml",
    ".yaml": "yaml", ".yml": "yaml", ".md": "markdown", ".html": "html", ".css": "css", ".sql": "sql",
    ".swift": "swift", ".scala": "scala", ".r": "r", ".jl": "julia", ".txt": "plaintext",
}
"""LSP's language id of a file, by its extension: for a client that sends none of LSP's ids, and the CLI."""


def language_of_path(path: str, default: str = "") -> str:
    return EXTENSION_LANGUAGES.get(posixpath.splitext(path)[1].lower(), default)
