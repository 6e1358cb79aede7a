"""Open documents as line lists, kept in sync by incremental edits, with position-encoding math.

We keep our own store instead of pygls' workspace because (a) the engine wants a list of lines
(`completer.text.context_slice`) and (b) pygls re-splits the whole text on every keystroke and
splits on Unicode line separators (U+2028, form feed, ...) that LSP does not count as line ends,
which would shift every position below such a character.

Columns inside the server are Unicode code points; clients speak UTF-16 code units unless
they negotiated UTF-8 or UTF-32 (`general.positionEncodings`). Half of an astral character, which a
UTF-16 client's text can hold (an edit put it in, or fell between the two halves), is a code point of
its own here, a lone surrogate, so that our text stays the client's unit for unit.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Collection
from urllib.parse import unquote, urlsplit

from completer.syntax import language_of_path
from completer.text import OTHER_FILE_CHARS, split_lines_and_breaks, text_below

log = logging.getLogger(__name__)

UTF8, UTF16, UTF32 = "utf-8", "utf-16", "utf-32"
ENCODING_PREFERENCE = (UTF32, UTF8, UTF16)
"""UTF-32 columns are code points (no conversion), UTF-8 is next cheapest; UTF-16 is the LSP default."""


def _encoding_rank(kind: Any) -> int:
    value = getattr(kind, "value", kind)
    return ENCODING_PREFERENCE.index(value) if value in ENCODING_PREFERENCE else len(ENCODING_PREFERENCE)


def prefer_encodings(offered: list[Any]) -> list[Any]:
    """The client's offered encodings, ours-first (pygls then picks the first one it supports)."""
    return sorted(offered, key=_encoding_rank)


def choose_position_encoding(capabilities: Any) -> str:
    """UTF-32, then UTF-8, when the client offers them; UTF-16 otherwise."""
    general = getattr(capabilities, "general", None)
    offered = getattr(general, "position_encodings", None) or []
    ranked = [getattr(k, "value", k) for k in prefer_encodings(list(offered))]
    return ranked[0] if ranked and ranked[0] in ENCODING_PREFERENCE else UTF16


LANGUAGE_IDS = frozenset((
    "abap", "bat", "bibtex", "clojure", "coffeescript", "c", "cpp", "csharp", "css", "cuda-cpp", "d", "dart",
    "delphi", "diff", "dockerfile", "elixir", "erlang", "fsharp", "git-commit", "git-rebase", "go", "groovy",
    "handlebars", "haskell", "html", "ini", "jade", "java", "javascript", "javascriptreact", "json", "jsonc",
    "julia", "kotlin", "latex", "less", "lua", "makefile", "markdown", "objective-c", "objective-cpp", "pascal",
    "perl", "perl6", "php", "plaintext", "powershell", "pug", "python", "r", "razor", "ruby", "rust", "sass",
    "scala", "scss", "shaderlab", "shellscript", "sql", "swift", "tex", "toml", "typescript", "typescriptreact",
    "vb", "xml", "xsl", "yaml",
))
"""The language ids LSP lists (and VS Code sends): a document opened with one of these is taken at its word."""
FILETYPES = {"sh": "shellscript", "bash": "shellscript", "zsh": "shellscript", "cs": "csharp",
             "objc": "objective-c", "objcpp": "objective-cpp", "cuda": "cuda-cpp"}
"""Neovim's filetypes whose LSP id differs, by that id: a script with no extension (`configure`, `.bashrc`)
is no less a shell script, and gets the shell's rules (completer/syntax.py)."""


def document_language(uri: str, language_id: str) -> str:
    """`language_id` when LSP defines it, or its LSP id when it is a Neovim filetype that names the language
    otherwise (FILETYPES); otherwise the language of the file's extension, if we know one (Neovim sends its
    filetype, or with filetype detection off an empty string)."""
    if language_id in LANGUAGE_IDS:
        return language_id
    if language_id in FILETYPES:
        return FILETYPES[language_id]
    try:
        path = urlsplit(uri).path
    except ValueError:  # an unclosed "[" in its host: the name still ends in its extension
        path = uri
    return language_of_path(unquote(path), language_id)


LONE_SURROGATE = re.compile("[\ud800-\udfff]")
"""Half an astral character: a UTF-16 client's text (a JavaScript string) can hold one, put in by an edit."""
ASTRAL = re.compile("[\U00010000-\U0010ffff]")
"""A character of two UTF-16 units."""
SURROGATE_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")
"""The two halves of an astral character, side by side again."""


def rejoined(line: str) -> str:
    """`line` with each high surrogate followed by a low one made the astral character they are (an edit put the
    halves an earlier edit split back together): the same units to the client, and a character the model reads."""
    if not LONE_SURROGATE.search(line):
        return line
    return SURROGATE_PAIR.sub(lambda pair: pair.group().encode("utf-16-le", "surrogatepass").decode("utf-16-le"),
                              line)


def _utf16_column(line: str, units: int) -> tuple[int, bool]:
    """The code-point column of UTF-16 column `units` in `line`, and whether `units` fell inside an astral character
    (the column is then that character's start)."""
    if LONE_SURROGATE.search(line):  # one unit and one code point each, as U+FFFD: decoded, a lone high surrogate
        line = LONE_SURROGATE.sub("\ufffd", line)  # and a lone low one after it would pair up into one code point
    encoded = line.encode("utf-16-le", "surrogatepass")
    if 2 * units >= len(encoded):
        return len(line), False
    prefix = encoded[: 2 * units]
    inside = bool(prefix) and 0xD8 <= prefix[-1] <= 0xDB  # a high surrogate: its low one is past the column
    return len((prefix[:-2] if inside else prefix).decode("utf-16-le", "surrogatepass")), inside


LONG_LINE_CHARS = 4096
"""A line longer than this (a minified file's, of a megabyte) has what `PositionCodec` knows of it kept
(`_LongLine`), so that a keystroke's positions are converted by reading the characters between them and the last
keystroke's, and its edit is put in by reading the edit: converted by reading the line up to the column, five
times a keystroke, a keystroke in a megabyte line took 40 ms."""
KEPT_LONG_LINES = 8
"""Long lines `PositionCodec` keeps what it knows of, the most recently used: it holds the lines."""


@dataclass
class _LongLine:
    """A long line's length in client units, its lone surrogates, and a position in it (the last one converted,
    or the end of the last edit's text), from which others are counted."""

    line: str  # held, so that no other string takes its id while this is kept
    units: int  # its length in client units
    surrogates: int  # halves of astral characters in it, apart (while there are none, no edit has any to rejoin)
    column: int = 0  # a code-point column,
    column_units: int = 0  # and where it lies in client units


def _surrogates(text: str) -> int:
    return 0 if text.isascii() else len(LONE_SURROGATE.findall(text))


class PositionCodec:
    """Converts between client columns (code units of the negotiated encoding) and code points."""

    def __init__(self, encoding: str = UTF16) -> None:
        if encoding not in (UTF8, UTF16, UTF32):
            raise ValueError(f"unsupported position encoding {encoding!r}")
        self.encoding = encoding
        self._long_lines: dict[int, _LongLine] = {}  # by the line's id, the most recently used last

    def _identity(self, line: str) -> bool:
        if self.encoding == UTF32 or line.isascii():
            return True
        return self.encoding == UTF16 and not ASTRAL.search(line)

    def _units_of(self, text: str) -> int:
        """`text`'s length in client units."""
        if self.encoding == UTF32 or text.isascii():
            return len(text)
        if self.encoding == UTF16:
            return len(text.encode("utf-16-le", "surrogatepass")) // 2
        return len(text.encode("utf-8", "surrogatepass"))

    def _long(self, line: str) -> _LongLine | None:
        """What is known of `line` when it is long (counted once, by reading it, the first time it is asked for)."""
        if len(line) <= LONG_LINE_CHARS:
            return None
        known = self._long_lines.pop(id(line), None)
        if known is None or known.line is not line:
            known = _LongLine(line, self._units_of(line), _surrogates(line))
        self._keep(known)
        return known

    def _keep(self, known: _LongLine) -> None:
        self._long_lines[id(known.line)] = known
        while len(self._long_lines) > KEPT_LONG_LINES:
            del self._long_lines[next(iter(self._long_lines))]

    def _column(self, line: str, units: int) -> tuple[int, bool]:
        """The code-point column of client column `units` (>= 0) in `line`, read from its start, and whether it fell
        inside an astral character (UTF-16) or a UTF-8 sequence (the column is then that character's start)."""
        if self._identity(line):
            return min(units, len(line)), False
        if self.encoding == UTF16:
            return _utf16_column(line, units)
        encoded = line.encode("utf-8", "surrogatepass")
        if units >= len(encoded):
            return len(line), False
        end = units
        while end > 0 and (encoded[end] & 0xC0) == 0x80:  # back up to a character boundary
            end -= 1
        return len(encoded[:end].decode("utf-8", "surrogatepass")), end != units

    def _column_near(self, known: _LongLine, units: int) -> tuple[int, bool]:
        """`_column` in a long line, read from its kept position, which moves there."""
        line = known.line
        if units >= known.units:
            return len(line), False
        if known.units == len(line):  # a unit per character
            return units, False
        if units >= known.column_units:  # a character is at least a unit: the column is within the next `units` ones
            start, start_units = known.column, known.column_units
            piece = line[start:start + units - start_units]
        else:
            start = max(0, known.column - (known.column_units - units))
            piece = line[start:known.column]
            start_units = known.column_units - self._units_of(piece)
        column, inside = self._column(piece, units - start_units)
        known.column, known.column_units = start + column, start_units + self._units_of(piece[:column])
        return known.column, inside

    def _units_near(self, known: _LongLine, column: int) -> int:
        """`to_units` in a long line, read from its kept position, which moves there."""
        line = known.line
        if column == len(line):
            return known.units
        if known.units == len(line):
            return column
        if column >= known.column:
            units = known.column_units + self._units_of(line[known.column:column])
        else:
            units = known.column_units - self._units_of(line[column:known.column])
        known.column, known.column_units = column, units
        return units

    def to_code_points(self, line: str, units: int) -> int:
        """Client column -> code-point column, clamped to the line (as LSP asks for long columns).

        A column inside a multi-unit character rounds down to that character's start."""
        units = max(0, units)
        known = self._long(line) if self.encoding != UTF32 else None
        return (self._column(line, units) if known is None else self._column_near(known, units))[0]

    def split_at(self, line: str, units: int) -> str:
        """`line`, with the astral character that UTF-16 column `units` falls inside as its two surrogates: an edit
        there leaves the client's text holding them apart, and so must ours. In other encodings, `line`."""
        if self.encoding != UTF16:
            return line
        known = self._long(line)
        if known is None and self._identity(line):
            return line
        units = max(0, units)
        column, inside = _utf16_column(line, units) if known is None else self._column_near(known, units)
        if not inside:
            return line
        high, low = divmod(ord(line[column]) - 0x10000, 0x400)
        return line[:column] + chr(0xD800 + high) + chr(0xDC00 + low) + line[column + 1:]

    def to_units(self, line: str, column: int) -> int:
        """Code-point column -> client column."""
        column = max(0, min(column, len(line)))
        known = self._long(line) if self.encoding != UTF32 else None
        if known is not None:
            return self._units_near(known, column)
        if self._identity(line):
            return column
        if self.encoding == UTF16:
            return len(line[:column].encode("utf-16-le", "surrogatepass")) // 2
        return len(line[:column].encode("utf-8", "surrogatepass"))

    def replace(self, line: str, start: int, end: int, text: str) -> str:
        """`line` with code points `start` to `end` replaced by `text` (which holds no line break), halves of an
        astral character side by side made one (`rejoined`). A long line's length and surrogates are counted
        for the new line from the old one's and the edit, and its kept position is the end of `text`."""
        new = line[:start] + text + line[end:]
        known = self._long(line) if len(new) > LONG_LINE_CHARS else None
        if known is None:
            return rejoined(new)
        removed = line[start:end]
        surrogates = known.surrogates - _surrogates(removed) + _surrogates(text)
        if surrogates:  # there may be halves to rejoin: the new line is counted anew when it is asked for
            return rejoined(new)
        start_units, text_units = self._units_near(known, start), self._units_of(text)
        del self._long_lines[id(line)]  # the document holds it no more
        self._keep(_LongLine(new, known.units - self._units_of(removed) + text_units, 0, start + len(text),
                             start_units + text_units))
        return new


@dataclass
class Document:
    uri: str
    language_id: str  # as the client sent it
    version: int
    lines: list[str]
    breaks: list[str]  # what ended each line: "\n", "\r\n" or "\r" ("" after the last), for edits at a line end
    edits: int = 0  # bumped on every change; part of result-cache keys, unlike the client's version
    in_sync: bool = True  # False once a change could not be applied, until the client sends the whole text
    _head: tuple[int, str] = field(default=(-1, ""), repr=False)  # (edits, head) of the last head() call
    language: str = field(init=False)  # what the server takes it for: see document_language

    def __post_init__(self) -> None:
        self.language = document_language(self.uri, self.language_id)

    def text(self) -> str:
        return "\n".join(self.lines)

    def longer_than(self, chars: int) -> bool:
        """Whether `text()` is over `chars` characters, read only that far: a check of a large document costs
        the lines of its first `chars` characters, not a join of all of them."""
        total = -1  # no line break after the last line
        for line in self.lines:
            total += len(line) + 1
            if total > chars:
                return True
        return False

    def head(self, max_chars: int = OTHER_FILE_CHARS) -> str:
        """The whole lines at the start of the document that fit in `max_chars`: what the document's repeats
        search of it while another document is being completed. Kept until the document changes."""
        if self._head[0] != self.edits:
            self._head = (self.edits, text_below(self.lines, -1, max_chars))  # the lines below "line -1"
        return self._head[1]


@dataclass
class _Region:
    """Lines first to end - 1 of a document, and the lines and line breaks an edit puts in their place."""

    first: int
    end: int
    lines: list[str]
    breaks: list[str]


SPLICED_IN_ONE_PASS = 16
"""Edits of one didChange, each above the one before (as VS Code sends a replace-all or a multi-cursor edit),
from which they are put in place in one pass over the document's lines: put in one at a time, each that adds or
removes lines moves every line below it, and ten thousand of them in a million-line document took seconds."""


def _splice(doc: Document, regions: list[_Region]) -> None:
    """Put in place edits whose regions were found in the same document, each above the one before."""
    if len(regions) < SPLICED_IN_ONE_PASS:
        for region in regions:
            doc.lines[region.first : region.end] = region.lines
            doc.breaks[region.first : region.end] = region.breaks
        return
    lines: list[str] = []
    breaks: list[str] = []
    kept = 0  # the first line no region has reached yet
    for region in reversed(regions):
        lines += doc.lines[kept : region.first]
        lines += region.lines
        breaks += doc.breaks[kept : region.first]
        breaks += region.breaks
        kept = region.end
    lines += doc.lines[kept:]
    breaks += doc.breaks[kept:]
    doc.lines[:] = lines
    doc.breaks[:] = breaks


class _Below:
    """Edits of one didChange each below the one before (a replace-all sent in the order it was made, top to
    bottom), put in place in one pass: the document is `lines` (down to the last edit's, as the edits left them)
    and then the document's lines from `kept` on, which no edit has reached, so that an edit's lines there are its
    own less the lines the edits before it added. Put in one at a time, each that adds or removes lines moved every
    line below it: five thousand in a million-line document took 1.2 s."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.breaks: list[str] = []
        self.kept = 0  # the document's first line no edit has reached yet

    def translated(self, doc: Document, rng: tuple[int, int, int, int]) -> tuple[int, int, int, int] | None:
        """`rng` as a range of `doc`'s lines, the lines it reads (and the line before, which an edit at a line's
        start reads too) given back to `doc` from `lines` when the last edit left them; None when it reaches
        further up than BELOW_GIVEN_BACK lines."""
        shift = len(self.lines) - self.kept
        start_line, start_char, end_line, end_char = rng
        first = min(start_line, end_line) - shift
        if min(start_line, end_line) < 0 or first < 0:
            return None
        first = min(first, len(doc.lines) - 1)  # past the end: the last line, as `_clamp` reads it
        if first == 0 and shift > 0:  # the line before it is one the edits left, which no line of `doc` can be
            return None
        given_back = self.kept - max(first - 1, 0)
        if given_back > min(BELOW_GIVEN_BACK, len(self.lines)):
            return None
        for _ in range(given_back):
            self.kept -= 1
            doc.lines[self.kept] = self.lines.pop()
            doc.breaks[self.kept] = self.breaks.pop()
        return start_line - shift, start_char, end_line - shift, end_char

    def reads_untouched(self, region: _Region) -> bool:
        """Whether `region` (of a `translated` range) reads only lines no edit has reached."""
        return region.first >= self.kept

    def add(self, doc: Document, region: _Region) -> None:
        self.lines += doc.lines[self.kept:region.first]
        self.lines += region.lines
        self.breaks += doc.breaks[self.kept:region.first]
        self.breaks += region.breaks
        self.kept = region.end

    def finish(self, doc: Document) -> None:
        doc.lines[:] = self.lines + doc.lines[self.kept:]
        doc.breaks[:] = self.breaks + doc.breaks[self.kept:]


BELOW_GIVEN_BACK = 16
"""Lines an edit below the one before may reach up into what the edits before it left (the same line, the line
before a line's start), and still be put in place in the same pass."""


@dataclass
class DocumentStore:
    """All documents the client opened, by URI, the most recently opened or edited last."""

    codec: PositionCodec = field(default_factory=PositionCodec)
    _docs: dict[str, Document] = field(default_factory=dict)
    generation: int = 0  # bumped by every open, change and close: what other open files hold moved

    def __len__(self) -> int:
        return len(self._docs)

    def uris(self) -> list[str]:
        return list(self._docs)

    def get(self, uri: str) -> Document | None:
        return self._docs.get(uri)

    def open(self, uri: str, language_id: str, version: int, text: str) -> Document:
        doc = Document(uri, language_id, version, *split_lines_and_breaks(text))
        self._docs.pop(uri, None)
        self._docs[uri] = doc
        self.generation += 1
        return doc

    def close(self, uri: str) -> Document | None:
        self.generation += 1
        return self._docs.pop(uri, None)

    def others(self, uri: str, count: int, read_already: Collection[str] = (),
               left_out: Callable[[str], bool] = lambda uri: False) -> list[str]:
        """The heads of up to `count` other open documents in `uri`'s language, most recently edited first, but
        those `read_already` (the cells of `uri`'s notebook) and those `left_out` says (excludeFiles)."""
        doc = self._docs.get(uri)
        if doc is None or count <= 0:
            return []
        read_already = frozenset(read_already)  # asked of each document: a list of a thousand cells cost 6 ms
        heads = []
        for other in reversed(self._docs.values()):
            if len(heads) >= count:
                break
            if other is not doc and other.language == doc.language and other.uri not in read_already \
                    and not left_out(other.uri):
                heads.append(other.head())
        return heads

    def change(self, uri: str, version: int,
               changes: list[tuple[tuple[int, int, int, int] | None, str]]) -> Document | None:
        """Apply content changes in order; a change with range None replaces the whole text.

        Ranges are in client units; out-of-range positions are clamped rather than rejected,
        the way editors themselves treat them."""
        doc = self._docs.get(uri)
        if doc is None:
            log.warning("didChange for a document that is not open: %s", uri)
            return None
        run: list[_Region] = []  # edits each above the one before, found where the first left the document
        below: _Below | None = None  # or edits each below the one before
        for rng, text in changes:
            if below is not None:
                translated = below.translated(doc, rng) if rng is not None else None
                region = self._region(doc, translated, text) if translated is not None else None
                if region is not None and below.reads_untouched(region):
                    below.add(doc, region)
                    continue
                below.finish(doc)
                below = None
            if rng is None:
                _splice(doc, run)
                run = []
                doc.lines, doc.breaks = split_lines_and_breaks(text)
                doc.in_sync = True
                continue
            # An edit not above the last reads the document those left: they are put in place first, before its
            # region is found (which splits an astral character its positions fall inside: in the document as it
            # stood, that split one on a line the edit did not touch, and the text was no longer the client's).
            region = self._region(doc, rng, text) if not run or max(rng[0], rng[2]) < run[-1].first else None
            if run and (region is None or region.end > run[-1].first):
                _splice(doc, run)
                run = []
                below = _Below()  # and it may begin edits each below the one before
                below.add(doc, self._region(doc, rng, text))
                continue
            run.append(region)  # type: ignore[arg-type]
        if below is not None:
            below.finish(doc)
        _splice(doc, run)
        doc.version = version
        doc.edits += 1
        self.generation += 1
        del self._docs[uri]
        self._docs[uri] = doc  # the most recently edited last
        return doc

    def unchanged_by(self, uri: str, version: int,
                     changes: list[tuple[tuple[int, int, int, int] | None, str]]) -> bool:
        """Whether `changes` send the document's whole text as it is (ALE sends the buffer whole, the same, as it
        lints): then only its version moves, and a search running for it goes on instead of being abandoned."""
        doc = self._docs.get(uri)
        if doc is None or not doc.in_sync or not changes or any(rng is not None for rng, _ in changes):
            return False
        if split_lines_and_breaks(changes[-1][1]) != (doc.lines, doc.breaks):
            return False
        doc.version = version
        return True

    def lost_change(self, uri: str) -> Document | None:
        """A change to `uri` that could not be read: the client's text and ours now differ, in a way we cannot
        know, until it sends the whole text again (a full change, or didOpen after a close)."""
        doc = self._docs.get(uri)
        if doc is not None:
            doc.in_sync = False
            doc.edits += 1
            self.generation += 1
        return doc

    def _region(self, doc: Document, rng: tuple[int, int, int, int], text: str) -> _Region:
        """The lines an edit replaces, and what replaces them."""
        lines, breaks = doc.lines, doc.breaks
        start_line, start_char, end_line, end_char = rng
        last = len(lines) - 1
        for line, char in ((start_line, start_char), (end_line, end_char)):  # both before either column is read
            if 0 <= line <= last:
                lines[line] = self.codec.split_at(lines[line], char)  # the same text to the client
        start = self._clamp(lines, start_line, start_char, last)
        end = self._clamp(lines, end_line, end_char, last)
        if end < start:
            start, end = end, start
        (sl, sc), (el, ec) = start, end
        if sl == el and "\n" not in text and "\r" not in text and (sc > 0 or sl == 0 or breaks[sl - 1] != "\r"):
            # within a line, and no line break to join with the one before (an edit that empties a line after a
            # lone "\r" makes one CRLF of its break and that one): the line's text only, not split anew
            return _Region(sl, sl + 1, [self.codec.replace(lines[sl], sc, ec, text)], [breaks[sl]])
        # Re-split from the line before the edit through the edit's last line, terminators included: a "\r"
        # left before inserted "\n" (or inserted before a "\n") becomes one CRLF, as in the editor.
        first = sl - 1 if sl > 0 and sc == 0 else sl
        head = lines[first] + breaks[first] if first < sl else ""
        region = head + lines[sl][:sc] + text + lines[el][ec:] + breaks[el]
        new_lines, new_breaks = split_lines_and_breaks(region)
        new_lines = [rejoined(line) for line in new_lines]
        if breaks[el]:  # the region ends with a terminator: the empty "line" after it is the next line's start
            new_lines.pop()
            new_breaks.pop()
        return _Region(first, el + 1, new_lines, new_breaks)

    def _clamp(self, lines: list[str], line: int, char: int, last: int) -> tuple[int, int]:
        if line > last:  # past the end: the end of the document
            return last, len(lines[last])
        line = max(0, line)
        return line, self.codec.to_code_points(lines[line], char)
