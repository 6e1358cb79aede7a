"""The user's repository as context: which snippets of the other files look most like the code at the cursor.

An index holds each file's identifiers (names of three characters or more) in an inverted index, within a
memory budget. For a cursor, the identifiers of the lines above it score the files by how many they share,
weighted by rarity (BM25's idf, as in CrossCodeEval's retrieval baselines), and from the best files the
window of lines sharing the most identifiers is returned. The engine searches those windows with the
document's repeats (completer/repeats.py), as it searches other open files: a call or a name written out in
another file is continued the way it was written there.

The index also keeps a hash of each line, so that the lines which follow a copy of the lines above the cursor
(the line above, or a few when it is short), anywhere in the repository, are found without reading the files
that hold no copy: where one line always follows them, that line comes first (completer/earlier_lines.py,
`following_line`). The first lines' hashes say which line most files start with (a licence header, a
shebang): on a document's first line, that one (`common_first_line`). Nothing here reads the disk or leaves
the process: the caller gives the texts.
"""
from __future__ import annotations

import heapq
import math
import re
import sys
from array import array
from bisect import bisect_right
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, islice
from typing import NamedTuple

from .earlier_lines import MIN_FOLLOWED_CHARS, indentation, statement_start
from .text import OTHER_FILE_CHARS, clean, head_of_file, split_lines

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
QUERY_LINES = 40  # the lines above the cursor that say what it is about
SNIPPET_LINES = 60  # a snippet: this many lines of another file
SNIPPET_STRIDE = 10  # snippets start every this many lines
SNIPPET_CHARS = OTHER_FILE_CHARS  # and hold at most the whole lines that fit in this many characters, as much as
# the repeats search of another file: sixty lines of a generated file went whole to the worker at each keystroke
NEW_NAME_BYTES = 420  # a name no other file has: its string, its postings set and dict slot (tracemalloc)
SHARED_NAME_BYTES = 48  # a name other files have too: a slot in its postings set and in the file's tuple
FILE_BYTES = 200  # a file's path and its entries in the index's dicts
HASH_BYTES = 8  # each line's hash, packed in a bytes object per file, for `followers`
BYTES_HEADER = 33  # a bytes object's own header
FOLLOWERS = 16  # distinct lines after a line, at most: past this it says little of what comes next
SITES_PER_FOLLOWER = 4  # the places of one following line that are read
COPIES_READ = 1024  # copies of the lines above looked at, in all files: past these, what follows them is known (a
# workspace of files each one line repeated 50,000 times was looked through for seconds, holding the index's lock)
FIRST_LINE_FILES = 3  # a first line that at least this many files (and most of them) start with is the header
LINE_INDEXES_KEPT = 16  # files whose names by line are kept between requests: the files the last queries chose
DIGITS = "0123456789"
COMMON_WORDS = frozenset({"self", "def", "return", "import", "from", "class", "None", "True", "False", "for", "not",
                          "and", "with", "else", "elif", "while", "pass", "raise", "try", "except", "lambda", "yield",
                          "async", "await", "cls", "args", "kwargs"})


class Snippet(NamedTuple):
    """A window of another file, and the file it comes from (a path as the index knows it)."""

    path: str
    text: str


def identifiers(text: str) -> set[str]:
    return set(IDENTIFIER.findall(text)) - COMMON_WORDS


class FileEntry(NamedTuple):
    """What the index keeps of a file's text: its names and its lines' hashes."""

    names: tuple[str, ...]
    hashes: bytes


def file_entry(text: str) -> FileEntry:
    """A file's names (one string per name across files) and line hashes: the costly part of indexing it, tens of
    milliseconds for a large file, which reads nothing of the index and so can run outside its lock."""
    return FileEntry(tuple(sys.intern(name) for name in identifiers(text)), line_hashes(text))


@dataclass
class WorkspaceIndex:
    """Identifiers per file and files per identifier, within `budget_bytes`; files beyond it are not indexed."""

    budget_bytes: int
    files: dict[str, tuple[str, ...]] = field(default_factory=dict)  # a tuple: a third of a set's memory
    costs: dict[str, int] = field(default_factory=dict)  # each file's own bytes: path, entries, line hashes
    postings: dict[str, set[str]] = field(default_factory=dict)
    nbytes: int = 0
    skipped_for_budget: int = 0
    lines: OrderedDict[str, LineNames] = field(default_factory=OrderedDict)  # path -> its names by line
    line_hashes: dict[str, bytes] = field(default_factory=dict)  # path -> each line's hash (`line_hashes`)

    def add(self, path: str, text: str | FileEntry) -> bool:
        """Index (or index again) `path` from its text or its `file_entry`; False when the budget has no room for
        it (an older entry then stays). A name no other file has costs about nine times a shared one: generated
        code is counted as it weighs."""
        names, hashes = text if isinstance(text, FileEntry) else file_entry(text)
        own = FILE_BYTES + len(path) + BYTES_HEADER + len(hashes)
        cost = own + self._names_cost(names, path)
        if self.nbytes - self._cost(path) + cost > self.budget_bytes:
            self.skipped_for_budget += 1
            return False
        self.remove(path)
        self.files[path] = names
        self.line_hashes[path] = hashes
        self.costs[path] = own
        for name in names:
            self.postings.setdefault(name, set()).add(path)
        self.nbytes += cost
        return True

    def _shared(self, name: str, path: str) -> bool:
        """Whether a file other than `path` has `name` already."""
        holders = self.postings.get(name)
        return holders is not None and (len(holders) > 1 or path not in holders)

    def _names_cost(self, names: Iterable[str], path: str) -> int:
        """What `path` holding `names` weighs beside the other files: a name only it has costs its string and
        postings set, one another file has a slot. Counted against the index as it is now, never as it was when
        the file came in: the file that brought a name in may have left since, and the name's string with it."""
        return sum(SHARED_NAME_BYTES if self._shared(name, path) else NEW_NAME_BYTES for name in names)

    def _cost(self, path: str) -> int:
        """The bytes that removing `path` would free (none when it is not indexed)."""
        names = self.files.get(path)
        return 0 if names is None else self.costs[path] + self._names_cost(names, path)

    def remove(self, path: str) -> bool:
        self.lines.pop(path, None)
        self.line_hashes.pop(path, None)
        if path not in self.files:
            return False
        self.nbytes -= self._cost(path)
        del self.costs[path]
        names = self.files.pop(path)
        for name in names:
            holders = self.postings.get(name)
            if holders is not None:
                holders.discard(path)
                if not holders:
                    del self.postings[name]
        return True

    def uses(self, name: str, exclude: str | None, within: tuple[str, ...] | None = None) -> bool:
        """Whether a file other than `exclude` (and whose name ends in `within`, when given) holds `name` (names
        of three characters or more, past the commonest words of the language, are indexed)."""
        holders = self.postings.get(name)
        if holders is None:
            return False
        if within is None:
            return len(holders) > 1 or exclude not in holders
        return any(path != exclude and path.endswith(within) for path in holders)

    def best_files(self, query: Iterable[str], exclude: str | None, count: int,
                   within: tuple[str, ...] | None = None) -> list[str]:
        """The `count` files (of those whose names end in `within`, when given) sharing the most query
        identifiers, each weighted by its rarity; best first, equal scores in the order of their paths. The names
        are summed in their sorted order too: a set of strings iterates in an order that changes with each
        process's hash seed, and with it the last bits of a sum, so the same request would pick other files."""
        total = max(1, len(self.files))
        scores: Counter[str] = Counter()
        for name in sorted(set(query)):
            holders = self.postings.get(name)
            if not holders or (total >= 8 and len(holders) > total / 2):  # in most files: says nothing of which
                continue
            weight = math.log(1 + (total - len(holders) + 0.5) / (len(holders) + 0.5))
            for path in holders:
                if path != exclude and (within is None or path.endswith(within)):
                    scores[path] += weight
        return [path for path, _ in heapq.nsmallest(count, scores.items(), key=lambda item: (-item[1], item[0]))]

    def snippets(self, before: str, exclude: str | None, count: int, read: Callable[[str], str | None]
                 ) -> list[Snippet]:
        """Up to `count` windows of other files most like the lines above the cursor (`before` is the text
        before it; its last, unfinished line is left out, so a query holds while the user types on a line).
        `read` gives a file's text, or None when it cannot be read."""
        query = identifiers_above(before)
        if not query or count <= 0:
            return []
        return self.windows(self.best_files(query, exclude, count), query, read)

    def windows(self, paths: Iterable[str], query: set[str], read: Callable[[str], str | None]) -> list[Snippet]:
        """Each readable file's window sharing the most `query` identifiers. The lines that hold each name are
        kept for the last LINE_INDEXES_KEPT files (while their text stays the same: the text itself is compared,
        faster than hashing a text just read and never fooled by two texts of the same hash): the lines above the
        cursor change at every new line, and the files they choose mostly do not."""
        found = []
        for path in paths:
            text = read(path)
            if not text:
                continue
            kept = self.lines.pop(path, None)
            names = kept if kept is not None and kept.text == text else LineNames(text)
            self.lines[path] = names
            while len(self.lines) > LINE_INDEXES_KEPT:
                self.lines.popitem(last=False)
            window = names.best_window(query)
            if window:  # not a line too long to send
                found.append(Snippet(path, window))
        return found

    def followers(self, anchor: Sequence[str], exclude: str | None, read: Callable[[str], str | None]
                  ) -> list[tuple[str, str]]:
        """For each copy of the `anchor` lines (stripped: completer/earlier_lines.py, `anchor_above`) in the
        indexed files but `exclude`, its first line with code and the line after it, as the document's text would
        hold them (right-stripped; one pair per different line after it, at the same depth): `follower_sites`,
        then `lines_at`."""
        return lines_at(self.follower_sites(anchor, exclude), anchor, read)

    def follower_sites(self, anchor: Sequence[str], exclude: str | None, within: tuple[str, ...] | None = None
                       ) -> list[tuple[str, int]]:
        """Where the lines after a copy of `anchor` stand: (file, line number) pairs, up to SITES_PER_FOLLOWER
        for each different line (it may stand at other depths there, or a file may have changed since); none
        when the anchor holds no name to find its files by, or when more than FOLLOWERS different lines follow
        it; only the first COPIES_READ copies are looked at. Reads no file: the line hashes say where the copies are
        (consecutive hashes, for consecutive lines)."""
        needle = b"".join(packed_hash(line) for line in anchor)
        found: dict[bytes, list[tuple[str, int]]] = {}  # the follower's hash -> (file, line) where it follows
        looked = 0
        for path in self.files_holding(anchor, exclude, within):
            hashes = self.line_hashes[path]
            at = hashes.find(needle)
            while 0 <= at <= len(hashes) - len(needle) - HASH_BYTES:  # a copy with a line after it
                looked += 1
                if looked > COPIES_READ:
                    return [site for sites in found.values() for site in sites]
                if at % HASH_BYTES:  # the bytes of two neighbouring hashes: look on
                    at = hashes.find(needle, at + 1)
                    continue
                after = at + len(needle)
                sites = found.setdefault(hashes[after:after + HASH_BYTES], [])
                if len(sites) < SITES_PER_FOLLOWER:
                    sites.append((path, after // HASH_BYTES))
                if len(found) > FOLLOWERS:
                    return []
                at = hashes.find(needle, at + HASH_BYTES)
        return [site for sites in found.values() for site in sites]

    def common_first_line(self, exclude: str | None, read: Callable[[str], str | None]) -> str | None:
        """The first line (right-stripped, as the document's text would hold it) that more than half of the
        indexed files but `exclude`, and at least FIRST_LINE_FILES of them, start with; None where there is none,
        or where it is blank: `first_line_holders`, then `first_line_at`."""
        return first_line_at(self.first_line_holders(exclude), read)

    def first_line_holders(self, exclude: str | None, within: tuple[str, ...] | None = None
                           ) -> tuple[bytes, list[str]]:
        """The hash of the first line most files but `exclude` start with, and up to SITES_PER_FOLLOWER of those
        files (one may have changed since it was indexed); (b"", []) where no line is that common. Reads no
        file: it counts the first lines' hashes."""
        def counted(path: str) -> bool:
            return path != exclude and (within is None or path.endswith(within))

        counts: Counter[bytes] = Counter(hashes[:HASH_BYTES] for path, hashes in self.line_hashes.items()
                                         if counted(path))
        if not counts:
            return b"", []
        first, count = counts.most_common(1)[0]
        if first in (packed_hash(""), b"") or count < FIRST_LINE_FILES or 2 * count <= sum(counts.values()):
            return b"", []
        holders = (path for path, hashes in self.line_hashes.items() if counted(path) and hashes[:HASH_BYTES] == first)
        return first, list(islice(holders, SITES_PER_FOLLOWER))

    def files_holding(self, anchor: Sequence[str], exclude: str | None, within: tuple[str, ...] | None = None
                      ) -> list[str]:
        """The indexed files but `exclude` (of those whose names end in `within`, when given) that hold every name
        of the `anchor` lines (a copy has them all), in a stable order."""
        if sum(map(len, anchor)) < MIN_FOLLOWED_CHARS:
            return []
        holders = sorted((self.postings.get(name) or set() for name in identifiers("\n".join(anchor))), key=len)
        if not holders or not holders[0]:
            return []
        paths = holders[0].intersection(*holders[1:])
        paths.discard(exclude)  # type: ignore[arg-type]
        return sorted(path for path in paths if within is None or path.endswith(within))


def lines_at(sites: Iterable[tuple[str, int]], anchor: Sequence[str], read: Callable[[str], str | None]
             ) -> list[tuple[str, str]]:
    """The (copy's first line with code, line after the copy) pairs at `sites` (`follower_sites`), cleaned as the
    document's text is and right-stripped, where the lines before are still a copy of `anchor` (a file may have
    changed since it was indexed) and the line after holds code; one pair per different line after, at its depth
    relative to the copy. `read` gives a file's text, or None."""
    pairs: list[tuple[str, str]] = []
    seen: set[tuple[int, str]] = set()
    texts: dict[str, list[str] | None] = {}
    count = len(anchor)
    for path, number in sites:
        if path not in texts:
            text = read(path)
            texts[path] = split_lines(clean(text)) if text else None
        held = texts[path]
        if held is None or number >= len(held) or number < count \
                or [line.strip() for line in held[number - count:number]] != list(anchor):
            continue
        copy, line = statement_start(held[number - count:number], anchor).rstrip(), held[number].rstrip()
        shape = (indentation(line) - indentation(copy), line.strip())
        if line.strip() and shape not in seen:
            seen.add(shape)
            pairs.append((copy, line))
    return pairs


def first_line_at(holders: tuple[bytes, list[str]], read: Callable[[str], str | None]) -> str | None:
    """The first line of the first of `holders`' files (`WorkspaceIndex.first_line_holders`) that still starts
    with the line of that hash, cleaned as the document's text is and right-stripped; None when none does."""
    first, paths = holders
    for path in paths:
        text = read(path)
        line = split_lines(clean(text))[0].rstrip() if text else ""
        if line and packed_hash(line.strip()) == first:
            return line
    return None


def line_hashes(text: str) -> bytes:
    """The hash of each line of `text`, cleaned as the document's text is and stripped, packed HASH_BYTES a line:
    within this process, equal lines have equal hashes, and `bytes.find` looks for one at memory speed without
    numpy (which the server never imports)."""
    return array("q", (hash(line.strip()) for line in split_lines(clean(text)))).tobytes()


def packed_hash(line: str) -> bytes:
    """`line`'s hash as `line_hashes` packs it."""
    return array("q", [hash(line)]).tobytes()


def identifiers_above(before: str) -> set[str]:
    """The names in the QUERY_LINES whole lines above the cursor (`before` is the text before it; its last,
    unfinished line is left out, so the query holds while the user types on a line)."""
    head = before[:before.rfind("\n") + 1]
    return identifiers("\n".join(head.split("\n")[-QUERY_LINES - 1:]))


class LineNames:
    """A file's text, where each of its lines starts, and for each name a query asked about the lines that hold it
    (found by a search of the text for that name, when first asked): a query's best window then costs the lines
    its names are on. Every name of every line was indexed at first, 14 MB and 0.2 s for a megabyte of generated
    code, for each of the LINE_INDEXES_KEPT files."""

    def __init__(self, text: str) -> None:
        self.text = text  # what a file read again is compared with
        lines = text.split("\n")
        self.starts = array("q", accumulate((len(line) + 1 for line in lines[:-1]), initial=0))  # one per line
        self.holders: dict[str, list[int]] = {}  # per name asked about: the lines that hold it

    def lines_holding(self, name: str) -> list[int]:
        """The numbers of the lines whose names (IDENTIFIER's matches: a run of letters, digits and underscores
        less the digits it starts with) include `name`, in order."""
        found = self.holders.get(name)
        if found is None:
            found = self.holders[name] = self._search(name) if IDENTIFIER.fullmatch(name) else []
        return found

    def _search(self, name: str) -> list[int]:
        text, numbers = self.text, []
        for match in re.finditer(re.escape(name) + "(?![A-Za-z0-9_])", text):  # the name first: a fast search
            start = match.start()
            while start and text[start - 1] in DIGITS:
                start -= 1
            if start and (text[start - 1].isascii() and (text[start - 1].isalpha() or text[start - 1] == "_")):
                continue  # the end of a longer name
            number = bisect_right(self.starts, match.start()) - 1
            if not numbers or numbers[-1] != number:
                numbers.append(number)
        return numbers

    def best_window(self, query: set[str]) -> str:
        """The SNIPPET_LINES lines that share the most identifiers with `query` (counted per line: a window's score
        is the sum of its lines'), the earliest of equal windows; of them, the lines that fit in SNIPPET_CHARS."""
        return head_of_file(self._best_lines(query), SNIPPET_CHARS)

    def _best_lines(self, query: set[str]) -> str:
        count = len(self.starts)
        if count <= SNIPPET_LINES:
            return self.text
        shared = [0] * count
        for name in query:
            for number in self.lines_holding(name):
                shared[number] += 1
        sums = [0, *accumulate(shared)]  # sums[i]: the lines before i
        starts = range(0, count - SNIPPET_LINES // 2, SNIPPET_STRIDE)
        best_start = max(starts, key=lambda start: (sums[min(start + SNIPPET_LINES, count)] - sums[start], -start))
        end = best_start + SNIPPET_LINES
        if end < count:  # the window's lines, each with its newline
            return self.text[self.starts[best_start]:self.starts[end]]
        return self.text[self.starts[best_start]:] + "\n"


def best_window(text: str, query: set[str]) -> str:
    """The SNIPPET_LINES lines of `text` that share the most identifiers with `query` (LineNames.best_window)."""
    return LineNames(text).best_window(query)
