"""Files the user wants left alone (`excludeFiles`): no suggestions in them, and nothing of them read as context
for another file, by the local model or an endpoint (a `.env` file's keys, a private key).

Patterns are .gitignore lines, read as git reads them (lsp/gitignore.py), matched against a file's path inside each
workspace folder that holds it, or, outside every folder, against its whole path: so `.env` and `secrets/` match at
any depth everywhere, and `/config/prod.py` only at the top of a workspace folder. A file is left alone when any of
its names matches: the path a client gives (`..` segments taken out) and its real path, so that a symlink of another
name (`settings_local.py -> secrets/prod.py`) does not let the file it points at be read. Letters match in either
case, as git matches them on macOS and Windows, whose file systems take `.ENV` for `.env`; on Linux, where they are
two files, a `.ENV` or a `SERVER.KEY` holds secrets as surely, and leaving a file alone by mistake costs only its
suggestions.
"""
from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from lsp.gitignore import GitPatterns, malformed

DEFAULT_EXCLUDED = (".env", ".env.*", ".envrc", "*.pem", "*.key", "*.p12", "*.pfx", "id_rsa*", "id_ecdsa*",
                    "id_ed25519*", ".netrc", ".pypirc", ".npmrc", ".git-credentials")
"""Files that hold secrets by convention: dotenv files, private keys and certificates, credential stores."""
MAX_PATTERNS = 1000
MAX_PATTERN_CHARS = 1000
ANSWERS_KEPT = 4096
"""Documents whose answer `DocumentExclusions` keeps at most (all are asked anew past it)."""
FOLDERS_KEPT = 4096
"""Folders whose answer `Exclusions` keeps at most (all are asked anew past it)."""


def check_patterns(value: Any) -> tuple[str, ...]:
    """The setting's value as patterns; ValueError says what is wrong (never with the value: it may be long).
    A line that is no pattern (`unusable_patterns`) is left out, and the defaults are added after the others
    until it is fixed: refusing the whole list for one typo would drop the user's own patterns (`secrets/`), and
    leaving it out alone might leave nothing (`["!"]`). Added last, the defaults only exclude more: they hold no
    negation, and the last pattern that matches decides."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(item, str) for item in value):
        raise ValueError("excludeFiles must be a list of .gitignore patterns, such as [\".env\", \"secrets/\"]")
    if len(value) > MAX_PATTERNS or any(len(item) > MAX_PATTERN_CHARS or "\0" in item for item in value):
        raise ValueError(f"excludeFiles takes at most {MAX_PATTERNS} patterns of at most {MAX_PATTERN_CHARS} "
                         "characters, without NUL")
    patterns = tuple(item for item in value if item.strip() and not item.startswith("#"))
    usable = tuple(pattern for pattern in patterns if _usable(pattern))
    if len(usable) == len(patterns):
        return patterns
    return usable + tuple(pattern for pattern in DEFAULT_EXCLUDED if pattern not in usable)


def unusable_patterns(value: Any) -> list[str]:
    """The lines of an excludeFiles value that are no .gitignore pattern, which `check_patterns` leaves out."""
    items = [value] if isinstance(value, str) else value if isinstance(value, (list, tuple)) else []
    return [item for item in items if isinstance(item, str) and item.strip() and not item.startswith("#")
            and len(item) <= MAX_PATTERN_CHARS and "\0" not in item and not _usable(item)]


def _usable(pattern: str) -> bool:
    """Whether a line reads as a pattern, as written and casefolded (`Exclusions` matches it casefolded: `[Z-a]`
    becomes a reversed range): no typo git reads as matching nothing or less than written (`gitignore.malformed`: `!`
    alone, a trailing backslash, an unclosed bracket, an unknown class, a reversed range such as `[z-a]`)."""
    return not malformed(pattern) and not malformed(pattern.casefold())


class Exclusions:
    """The compiled patterns; `excludes` answers for a file, given the workspace folders."""

    def __init__(self, patterns: Iterable[str], also: Sequence[Exclusions] = ()) -> None:
        self.patterns = tuple(patterns)
        self.also = tuple(also)  # the patterns of settings changes not applied yet: until then they exclude too
        self._lines = tuple(line for line in self.patterns if line.strip() and not line.startswith("#"))
        self._spec = GitPatterns((line.casefold() for line in self._lines), ignore_case=True)
        self._folders: dict[str, str | None] = {}  # per folder asked about: the line that excludes it

    def excludes(self, path: Path | None, roots: Sequence[Path] = (), resolve: bool = True) -> bool:
        """Whether `path` (None: a document with no file, never excluded) is left alone."""
        return self.pattern_for(path, roots, resolve) is not None

    def pattern_for(self, path: Path | None, roots: Sequence[Path] = (), resolve: bool = True) -> str | None:
        """The pattern that excludes `path` under one of its names (`names_of`), the one a user would change; None
        when none does. `resolve`: look its symlinks up (the walk's paths, under a resolved folder, have none
        but the file's own)."""
        if path is None:
            return None
        if self._lines:
            for name in names_of(path, roots, resolve):
                found = self._deciding_line(name.casefold())
                if found is not None:
                    return found
        return next((found for other in self.also if (found := other.pattern_for(path, roots, resolve))), None)

    def _folder_line(self, folder: str) -> str | None:
        """The line that excludes the folder `folder`, kept: the walk asks it for each file in the folder, and it is
        a pass over every pattern."""
        if folder not in self._folders:
            if len(self._folders) >= FOLDERS_KEPT:
                self._folders = {}
            self._folders[folder] = self._excluding_line(folder, is_dir=True)
        return self._folders[folder]

    def _excluding_line(self, name: str, is_dir: bool) -> str | None:
        """The line of the last pattern naming `name` itself (a folder where `is_dir`: `d/` names no file, and
        `d/*` names what is in `d`, not `d`), when it excludes; None when it takes back or none names it."""
        found = self._spec.deciding(name, is_dir)
        return self._lines[found.index] if found is not None and not found.negated else None

    def _deciding_line(self, name: str) -> str | None:
        """The line that excludes the file `name`, git's way: a file in an excluded folder stays excluded whatever
        `!` line names it (git never looks inside a folder it ignores); else the last line that matches it."""
        parts = name.split("/")
        for depth in range(1, len(parts)):
            found = self._folder_line("/".join(parts[:depth]))
            if found is not None:
                return found
        return self._excluding_line(name, is_dir=False)


def names_of(path: Path, roots: Sequence[Path], resolve: bool = True) -> list[str]:
    """The names a file is matched by: its path without `..` and its real one (a symlink's target, which it lets be
    read), each inside every workspace folder that holds it (a folder opened inside another does not take back
    what the outer one's patterns exclude), or, outside every folder, as its whole path without the anchor."""
    paths = dict.fromkeys((os.path.normpath(path), *((os.path.realpath(path),) if resolve else ())))
    folders = dict.fromkeys((*roots, *map(_real, roots))) if resolve else roots
    names: list[str] = []
    for candidate in map(Path, paths):
        inside = [candidate.relative_to(root).as_posix() for root in folders if candidate.is_relative_to(root)]
        names += inside or [candidate.relative_to(candidate.anchor).as_posix() if candidate.is_absolute()
                            else candidate.as_posix()]
    return list(dict.fromkeys(name for name in names if name != "."))


@lru_cache(maxsize=64)
def _real(root: Path) -> Path:
    """A workspace folder's real path (a folder opened through a symlink), looked up once."""
    return Path(os.path.realpath(root))


class DocumentExclusions:
    """The server's exclusions: the setting's patterns compiled with those of changes not applied yet (`pending`),
    and each document's answer. A request asks several times (the document, the other open files) and an answer
    looks the file's real path up, so it is kept until the patterns or the workspace folders change, or `forget`
    is told the document was opened or something changed on disk (a symlink made anew)."""

    def __init__(self) -> None:
        self.pending: list[tuple[str, ...]] = []  # excludeFiles of settings changes not applied yet
        self._rules = Exclusions(DEFAULT_EXCLUDED)
        self._answers: dict[str, bool] = {}
        self._answered_for: tuple[Exclusions | None, tuple[Path, ...]] = (None, ())

    def rules(self, patterns: tuple[str, ...]) -> Exclusions:
        """`patterns` compiled with the pending ones, once per value of each."""
        pending = tuple(self.pending)
        if (self._rules.patterns, tuple(other.patterns for other in self._rules.also)) != (patterns, pending):
            self._rules = Exclusions(patterns, [Exclusions(more) for more in pending])
        return self._rules

    def excluded(self, uri: str, rules: Exclusions, roots: Sequence[Path], path: Callable[[], Path | None]) -> bool:
        """Whether `rules` leave the document `uri` (whose file `path` gives) alone."""
        key = (rules, tuple(roots))
        if self._answered_for != key or len(self._answers) >= ANSWERS_KEPT:
            self._answers, self._answered_for = {}, key
        found = self._answers.get(uri)
        if found is None:
            found = self._answers[uri] = rules.excludes(path(), roots)
        return found

    def forget(self, uri: str | None = None) -> None:
        """Ask anew for `uri`, or for every document."""
        if uri is None:
            self._answers = {}
        else:
            self._answers.pop(uri, None)

    @property
    def answers(self) -> int:
        """How many documents' answers are kept."""
        return len(self._answers)
