"""Files the user wants left alone (`excludeFiles`): no suggestions in them, and nothing of them read as context
for another file, by the local model or an endpoint (a `.env` file's keys, a private key).

Patterns are .gitignore lines (pathspec's git semantics), matched against a file's path inside the innermost
workspace folder that holds it, or, outside every folder, against its whole path: so `.env` and `secrets/` match at
any depth everywhere, and `/config/prod.py` only at the top of a workspace folder.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Sequence

import pathspec

DEFAULT_EXCLUDED = (".env", ".env.*", ".envrc", "*.pem", "*.key", "*.p12", "*.pfx", "id_rsa*", "id_ecdsa*",
                    "id_ed25519*", ".netrc", ".pypirc", ".npmrc", ".git-credentials")
"""Files that hold secrets by convention: dotenv files, private keys and certificates, credential stores."""
MAX_PATTERNS = 1000
MAX_PATTERN_CHARS = 1000


def check_patterns(value: Any) -> tuple[str, ...]:
    """The setting's value as patterns; ValueError says what is wrong (never with the value: it may be long)."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(item, str) for item in value):
        raise ValueError("excludeFiles must be a list of .gitignore patterns, such as [\".env\", \"secrets/\"]")
    if len(value) > MAX_PATTERNS or any(len(item) > MAX_PATTERN_CHARS or "\0" in item for item in value):
        raise ValueError(f"excludeFiles takes at most {MAX_PATTERNS} patterns of at most {MAX_PATTERN_CHARS} "
                         "characters, without NUL")
    patterns = tuple(item for item in value if item.strip() and not item.startswith("#"))
    for pattern in patterns:
        try:
            pathspec.GitIgnoreSpec.from_lines([pattern])
        except (ValueError, TypeError):  # GitIgnorePatternError is a ValueError: `!` alone, a trailing backslash
            raise ValueError(f"excludeFiles: {pattern[:80]!r} is not a .gitignore pattern") from None
    return patterns


class Exclusions:
    """The compiled patterns; `excludes` answers for a file, given the workspace folders."""

    def __init__(self, patterns: Iterable[str]) -> None:
        self.patterns = tuple(patterns)
        self._lines = tuple(line for line in self.patterns if line.strip() and not line.startswith("#"))
        self._spec = pathspec.GitIgnoreSpec.from_lines(self._lines)

    def excludes(self, path: Path | None, roots: Sequence[Path] = ()) -> bool:
        """Whether `path` (None: a document with no file, never excluded) is left alone."""
        return self.pattern_for(path, roots) is not None

    def pattern_for(self, path: Path | None, roots: Sequence[Path] = ()) -> str | None:
        """The pattern that decides that `path` is left alone (the one a user would change), or None: git's last
        pattern to match it, which a later `!folder/` does not overrule for the files inside the folder."""
        if path is None or not self._lines:
            return None
        found = self._spec.check_file(relative_name(path, roots))
        return self._lines[found.index] if found.include and found.index is not None else None


def relative_name(path: Path, roots: Sequence[Path]) -> str:
    """`path` inside the innermost of `roots` holding it, else its whole path without the anchor, with slashes."""
    inside = [root for root in roots if path.is_relative_to(root)]
    if inside:
        return path.relative_to(max(inside, key=lambda root: len(root.parts))).as_posix()
    return path.relative_to(path.anchor).as_posix() if path.is_absolute() else path.as_posix()
