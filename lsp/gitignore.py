""".gitignore patterns matched as git matches them (git's dir.c and wildmatch.c), byte for byte: the files a user's
git ignores are never read by the workspace index, and `excludeFiles` takes the same patterns.

Each pattern becomes one regular expression over the path's bytes, and only the patterns naming a path itself
decide for it (its folders are asked on the way down). git's own reading, not a library's near one: POSIX classes
(`[[:digit:]]`), a backslash in a bracket (`[\\]]`), `?` and brackets matching one byte (`é` is two: `!?` takes it
not back from `*`), core.ignoreCase folding ASCII only (and not a bracket's upper-case letter, as git does not):
each form read otherwise is a file git ignores that is read, or one it keeps that is taken back.
"""
from __future__ import annotations

import os
import re
import sys
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import lru_cache

_ASCII_GRAPH = frozenset(range(0x21, 0x7F))
_DIGITS = frozenset(range(0x30, 0x3A))
_UPPER = frozenset(range(0x41, 0x5B))
_LOWER = frozenset(range(0x61, 0x7B))
POSIX_CLASSES: dict[bytes, frozenset[int]] = {
    b"alnum": _DIGITS | _UPPER | _LOWER, b"alpha": _UPPER | _LOWER, b"blank": frozenset(b" \t"),
    b"cntrl": frozenset(range(1, 0x20)) | {0x7F}, b"digit": _DIGITS, b"graph": _ASCII_GRAPH, b"lower": _LOWER,
    b"print": _ASCII_GRAPH | {0x20}, b"punct": _ASCII_GRAPH - _DIGITS - _UPPER - _LOWER,
    b"space": frozenset(b" \t\n\r"), b"upper": _UPPER, b"xdigit": _DIGITS | frozenset(b"abcdefABCDEF")}
"""The classes wildmatch knows, by git's own ASCII-only ctype (its `space` holds no \\v or \\f); any other name makes
the pattern match nothing."""
_WILDCARDS = b"*?[\\"
PRECOMPOSED = sys.platform == "darwin"
"""Whether paths are matched in Unicode's composed form (NFC), as git on macOS reads names (core.precomposeUnicode,
which git init sets there): HFS+ gives `é` decomposed, two code points, which a `café.py` pattern typed composed
would not match, and git ignores the file."""
_SLASH = ord("/")


class _NeverMatches(Exception):
    """A pattern git's wildmatch aborts on wherever it gets there: an unclosed bracket, an unknown class, a trailing
    backslash."""


@dataclass(frozen=True)
class GitPattern:
    """One line of a .gitignore: `line` as written, whether it takes back (`negated`), whether it names folders only
    (a trailing `/`), and `regex`, over a path's bytes relative to the .gitignore's folder (its last name only where
    the pattern holds no `/`); None where it matches nothing."""
    line: str
    negated: bool
    folders_only: bool
    basename: bool
    regex: re.Pattern[bytes] | None
    malformed: bool = False  # a typo: nothing matched (`obj\\`, `!`, `[a-`, `[[:digits:]]`), or less (`[z-a]`)
    index: int = 0  # its place among the lines given to `GitPatterns`

    def matches(self, relative: bytes, name: bytes, is_dir: bool) -> bool:
        """Whether the pattern names the path `relative` (its last name `name`) itself."""
        if self.regex is None or (self.folders_only and not is_dir):
            return False
        return self.regex.fullmatch(name if self.basename else relative) is not None


class GitPatterns:
    """The patterns of one .gitignore (or info/exclude, excludes file, excludeFiles setting), in their order."""

    def __init__(self, lines: Iterable[str], ignore_case: bool = False) -> None:
        self.ignore_case = ignore_case
        self.patterns = [replace(pattern, index=index) for index, pattern in
                         enumerate(parse(line, ignore_case) for line in lines) if pattern is not None]

    def deciding(self, relative: str, is_dir: bool) -> GitPattern | None:
        """The pattern that decides for the path `relative` (POSIX, inside the patterns' folder): the last that names
        it; None where none does (a folder above, or another file of patterns, decides)."""
        if PRECOMPOSED and not relative.isascii():
            relative = unicodedata.normalize("NFC", relative)
        path = os.fsencode(relative)
        name = path[path.rfind(b"/") + 1:]
        for pattern in reversed(self.patterns):
            if pattern.matches(path, name, is_dir):
                return pattern
        return None


def pattern_lines(data: bytes) -> list[str]:
    """The lines of a file of patterns as git splits them: at `\\n` only, a `\\r` before it dropped, a UTF-8 byte order
    mark first skipped; each decoded as file names are (os.fsdecode), so its bytes come back whole."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    lines = data.split(b"\n")
    if lines and not lines[-1]:
        lines.pop()
    return [os.fsdecode(line[:-1] if line.endswith(b"\r") else line) for line in lines]


@lru_cache(maxsize=4096)
def parse(line: str, ignore_case: bool = False) -> GitPattern | None:
    """The pattern of a line (None for a comment or a blank line), as git's add_patterns and parse_path_pattern read
    it: up to a NUL (git's lines are C strings), trailing spaces trimmed but an escaped one, a leading `!` negates, one
    trailing `/` names folders only, and a pattern with no other `/` matches a path's last name at any depth. Kept:
    an event's check reads the .gitignore files on its way again."""
    text = os.fsencode(line)
    if text.startswith(b"#"):
        return None
    text = _trimmed(text.split(b"\0", 1)[0])
    if not text:
        return None
    negated = text.startswith(b"!")
    body = text[1:] if negated else text
    folders_only = body.endswith(b"/")
    body = body[:-1] if folders_only else body
    basename = b"/" not in body
    reversed_ranges: list[bytes] = []
    try:
        regex = _compiled(body, basename, ignore_case, reversed_ranges) if body else None
    except _NeverMatches:
        regex = None
    return GitPattern(line, negated, folders_only, basename, regex, regex is None or bool(reversed_ranges))


def malformed(line: str) -> bool:
    """Whether a line that is no comment or blank reads as a typo (`GitPattern.malformed`)."""
    pattern = parse(line)
    return pattern is not None and pattern.malformed


def _trimmed(text: bytes) -> bytes:
    """git's trim_trailing_spaces: the spaces at the end go, but one escaped by a backslash and what precedes it."""
    last_space, index = None, 0
    while index < len(text):
        char = text[index]
        if char == 0x20:
            last_space = index if last_space is None else last_space
        elif char == 0x5C:
            index += 1
            if index == len(text):
                return text
            last_space = None
        else:
            last_space = None
        index += 1
    return text if last_space is None else text[:last_space]


def _compiled(body: bytes, basename: bool, fold: bool, reversed_ranges: list[bytes]) -> re.Pattern[bytes]:
    """The regular expression of a pattern's body. A path pattern (match_pathname) drops one leading `/`, compares its
    part before the first wildcard as text, and matches the rest with WM_PATHNAME as a pattern of its own: so
    `a**/b` reads its `**/` as a folder's depth, as git does. `fold`: core.ignoreCase (`_letter`)."""
    if basename:
        return re.compile(_wildmatch(body, False, fold, reversed_ranges), re.DOTALL)
    body = body[1:] if body.startswith(b"/") else body
    prefix = next((index for index, char in enumerate(body) if char in _WILDCARDS), len(body))
    rest = _wildmatch(body[prefix:], True, fold, reversed_ranges) if prefix < len(body) else b""
    return re.compile(b"".join(_literal(char, fold) for char in body[:prefix]) + rest, re.DOTALL)


def _literal(char: int, fold: bool) -> bytes:
    """A byte matched as itself; with `fold`, an ASCII letter in either case (git folds ASCII only)."""
    if fold and chr(char).isascii() and chr(char).isalpha():
        return b"[" + bytes([char | 0x20, char & ~0x20]) + b"]"
    return re.escape(bytes([char]))


def _wildmatch(pattern: bytes, pathname: bool, fold: bool, reversed_ranges: list[bytes]) -> bytes:
    """wildmatch's pattern as a regular expression (fullmatch). With `pathname`, `*`, `?` and brackets stop at `/`,
    and `**` between slashes (or at an end) crosses folders. A range whose ends are reversed goes into
    `reversed_ranges`."""
    pieces: list[tuple[str, bytes]] = []  # ("star", a `*` that stops at `/`, or any `*` without `pathname`),
    index = 0  # ("cross", a `**` that crosses folders), ("byte", what matches one byte or a literal)
    while index < len(pattern):
        char = pattern[index]
        if char == 0x5C:  # a backslash: the next byte as itself
            if index + 1 == len(pattern):
                raise _NeverMatches
            pieces.append(("byte", _literal(pattern[index + 1], fold)))
            index += 2
        elif char == 0x3F:  # ?
            pieces.append(("byte", b"[^/]" if pathname else b"."))
            index += 1
        elif char == 0x2A:  # *
            end = index
            while end < len(pattern) and pattern[end] == 0x2A:
                end += 1
            stars = _stars(pattern, index, end, pathname)
            pieces.append(("star" if stars in (b"[^/]*", b".*") and not (pathname and stars == b".*") else "cross",
                           stars))
            index = end + 1 if stars == b"(?:.*/)?" else end
        elif char == 0x5B:  # [
            members, index = _bracket(pattern, index, fold, reversed_ranges)
            pieces.append(("byte", _byte_class(members - {_SLASH} if pathname else members)))
        else:
            pieces.append(("byte", _literal(char, fold)))
            index += 1
    return _joined(pieces)


def _joined(pieces: list[tuple[str, bytes]]) -> bytes:
    """The pieces as one expression in which a `*` followed by more of the pattern takes the first place where the
    bytes up to the next star match, and never another (an atomic group). Left to backtrack (as git's wildmatch
    does), a line such as `*a*a*a*a*a*a*a*a*b` took minutes against a long name, holding the server's interpreter
    meanwhile. The first place is the right one, so the answers are git's: the bytes after it hold those after any
    later place (no `/` among them where the star stops at one, or the bytes up to the next star hold a `/`, and
    that star could start at one place only)."""
    out: list[bytes] = []
    index = 0
    while index < len(pieces):
        kind, text = pieces[index]
        end = index + 1
        while end < len(pieces) and pieces[end][0] == "byte":
            end += 1
        if kind == "star" and end < len(pieces):  # another star follows the bytes after this one
            out.append(b"(?>" + text + b"?" + b"".join(piece for _, piece in pieces[index + 1:end]) + b")")
        else:
            out.extend(piece for _, piece in pieces[index:end])
        index = end
    return b"".join(out)


def _stars(pattern: bytes, start: int, end: int, pathname: bool) -> bytes:
    """A run of `*` from `start` to `end`: `**` after a `/` (or first) and before a `/` (or last) crosses folders, a
    `**/` matching none too; any other run is one `*`, which stops at `/` with `pathname`."""
    if not pathname:
        return b".*"
    if end - start >= 2 and (start == 0 or pattern[start - 1] == _SLASH):
        if end == len(pattern):
            return b".*"
        if pattern[end] == _SLASH:
            return b"(?:.*/)?"
        if pattern[end:end + 2] == b"\\/":
            return b".*"
    return b"[^/]*"


def _bracket(pattern: bytes, start: int, fold: bool, reversed_ranges: list[bytes]) -> tuple[set[int], int]:
    """The bytes the bracket at `start` matches, and where the pattern goes on after it, as wildmatch reads one: `!`
    or `^` first negates, a `]` first is itself, a backslash takes the next byte as itself (a range's end too),
    `[:name:]` is a class (an unknown one, or no closing `]`, and the pattern matches nothing), a reversed range
    matches nothing (but its first end, read before the `-`)."""
    index = start + 1
    negated = index < len(pattern) and pattern[index] in b"!^"
    index += negated
    singles: set[int] = set()
    ranges: list[tuple[int, int]] = []
    classes: list[bytes] = []
    previous = 0
    first = True
    while first or pattern[index:index + 1] != b"]":
        first = False
        if index >= len(pattern):
            raise _NeverMatches
        char = pattern[index]
        if char == 0x5C:
            char, index = _escaped(pattern, index)
            singles.add(char)
        elif char == 0x2D and previous and index + 1 < len(pattern) and pattern[index + 1] != 0x5D:
            index += 1
            high = pattern[index]
            if high == 0x5C:
                high, index = _escaped(pattern, index)
            ranges.append((previous, high))
            if high < previous:
                reversed_ranges.append(bytes([previous, high]))
            char = 0
        elif char == 0x5B and pattern[index + 1:index + 2] == b":":
            close = pattern.find(b"]", index + 2)
            if close < 0:
                raise _NeverMatches
            if close - (index + 2) < 1 or pattern[close - 1] != 0x3A:  # no `:]`: the `[` is itself
                singles.add(char)
            else:
                name = pattern[index + 2:close - 1]
                if name not in POSIX_CLASSES:
                    raise _NeverMatches
                classes.append(name)
                index = close
                char = 0
        else:
            singles.add(char)
        previous = char
        index += 1
    matched = {byte for byte in range(1, 256) if _in_bracket(byte, singles, ranges, classes, fold)}
    return (set(range(1, 256)) - matched if negated else matched), index + 1


def _escaped(pattern: bytes, index: int) -> tuple[int, int]:
    """The byte the backslash at `index` of a bracket takes as itself, and where it is; a backslash last in the
    pattern leaves the bracket unclosed (it matches nothing)."""
    index += 1
    if index >= len(pattern):
        raise _NeverMatches
    return pattern[index], index


def _in_bracket(byte: int, singles: set[int], ranges: list[tuple[int, int]], classes: list[bytes],
                fold: bool) -> bool:
    """Whether a bracket's members hold the path's `byte`, as wildmatch tests it: with `fold`, an upper-case letter
    is tested lowered (so `[A]` holds neither case, as in git), a range holds a lower-case letter whose upper case it
    holds, and `[:upper:]` holds every letter."""
    if fold and 0x41 <= byte <= 0x5A:
        byte |= 0x20
    lower = 0x61 <= byte <= 0x7A
    return byte in singles \
        or any(low <= byte <= high or (fold and lower and low <= byte - 0x20 <= high) for low, high in ranges) \
        or any(byte in POSIX_CLASSES[name] or (fold and lower and name == b"upper") for name in classes)


def _byte_class(members: set[int]) -> bytes:
    """A regular expression for one byte of `members` (one that matches nothing when there are none)."""
    if not members:
        return b"(?!)"
    runs: list[list[int]] = []
    for member in sorted(members):
        if runs and runs[-1][1] == member - 1:
            runs[-1][1] = member
        else:
            runs.append([member, member])
    return b"[" + b"".join(b"\\x%02x" % low if low == high else b"\\x%02x-\\x%02x" % (low, high)
                           for low, high in runs) + b"]"
