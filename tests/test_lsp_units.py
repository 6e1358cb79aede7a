"""Unit tests of the language server's pure parts: position encodings, incremental edits,
settings validation, result conversion and the worker's frame format."""
from __future__ import annotations

import array
import contextlib
import asyncio
import io
import random
import re
import time

import pytest
from lsprotocol import types

from completer.text import OTHER_FILE_CHARS, head_of_file, split_lines_and_breaks
from lsp import framing
from lsp.completions import completion_list, inline_list, suggested_lines
from lsp.documents import (LONG_LINE_CHARS, SURROGATE_PAIR, UTF8, UTF16, UTF32, DocumentStore, PositionCodec,
                           choose_position_encoding)
from lsp.settings import ServerSettings, apply_changes, extract_section, likely_meant, shape_problem

LINE = "a = 'é😀x𝄞' + b"  # ASCII, a 2-byte char, astral chars (2 UTF-16 units, 4 UTF-8 bytes)


def _units(text: str, encoding: str) -> int:
    if encoding == UTF8:
        return len(text.encode("utf-8", "surrogatepass"))
    if encoding == UTF16:
        return len(text.encode("utf-16-le", "surrogatepass")) // 2
    return len(text)


@pytest.mark.parametrize("encoding", [UTF8, UTF16, UTF32])
def test_codec_round_trips_every_column(encoding):
    codec = PositionCodec(encoding)
    for line in (LINE, "plain ascii", "", "日本語", "\ud800lone", "a\ud83d\ude00b😀\ude00"):  # lone halves, apart
        for column in range(len(line) + 1):
            units = codec.to_units(line, column)
            assert units == _units(line[:column], encoding)
            assert codec.to_code_points(line, units) == column


@pytest.mark.parametrize("encoding", [UTF8, UTF16])
def test_codec_rounds_down_inside_a_character_and_clamps(encoding):
    codec = PositionCodec(encoding)
    emoji = LINE.index("😀")
    start = _units(LINE[:emoji], encoding)
    assert codec.to_code_points(LINE, start + 1) == emoji  # inside the emoji
    assert codec.to_code_points(LINE, 10_000) == len(LINE)
    assert codec.to_code_points(LINE, -3) == 0
    assert codec.to_units(LINE, 10_000) == _units(LINE, encoding)


@pytest.mark.parametrize("offered, chosen", [
    (None, UTF16), ([], UTF16), (["utf-16"], UTF16), (["utf-8"], UTF8), (["utf-16", "utf-8"], UTF8),
    (["utf-8", "utf-32"], UTF32), (["utf-7"], UTF16),
])
def test_position_encoding_choice(offered, chosen):
    caps = types.ClientCapabilities(general=types.GeneralClientCapabilities(position_encodings=offered))
    assert choose_position_encoding(caps) == chosen


def _edit(store: DocumentStore, text: str, start: tuple[int, int], end: tuple[int, int], new: str) -> str:
    """Apply an edit both to the store and to a plain string; return the expected text."""
    codec = store.codec
    lines = text.split("\n")
    sl, sc = start
    el, ec = end
    a = sum(len(text_line) + 1 for text_line in lines[:sl]) + codec.to_code_points(lines[sl], sc)
    b = sum(len(text_line) + 1 for text_line in lines[:el]) + codec.to_code_points(lines[el], ec)
    store.change("u", 0, [((sl, sc, el, ec), new)])
    return text[:a] + new + text[b:]


@pytest.mark.parametrize("encoding", [UTF8, UTF16, UTF32])
def test_random_incremental_edits_match_string_edits(encoding):
    rng = random.Random(7)
    store = DocumentStore(codec=PositionCodec(encoding))
    text = "def f():\n    return 'é😀'\n\nx = 1\n"
    store.open("u", "python", 1, text)
    pieces = ["a", "\n", "é", "😀", "  ", "x\ny\n", "", "𝄞z"]
    for _ in range(300):
        lines = text.split("\n")
        sl = rng.randrange(len(lines))
        el = rng.randrange(sl, len(lines))
        sc_cp = rng.randrange(len(lines[sl]) + 1)
        ec_cp = rng.randrange(len(lines[el]) + 1) if el > sl else rng.randrange(sc_cp, len(lines[el]) + 1)
        codec = store.codec
        start = (sl, codec.to_units(lines[sl], sc_cp))
        end = (el, codec.to_units(lines[el], ec_cp))
        text = _edit(store, text, start, end, rng.choice(pieces))
        assert store.get("u").text() == text


def _position(units: bytes, offset: int) -> tuple[int, int]:
    """The (line, character) of code unit `offset` in UTF-16LE `units`, lines ended by "\n"."""
    codes = [int.from_bytes(units[i:i + 2], "little") for i in range(0, 2 * offset, 2)]
    newlines = [i for i, code in enumerate(codes) if code == 0x0A]
    return len(newlines), len(codes) - (newlines[-1] + 1 if newlines else 0)


def test_random_utf16_edits_at_any_code_unit_keep_the_clients_text():
    """A UTF-16 client's edits count code units: one may fall between the two halves of an astral character, or put
    in half of one (a JavaScript string holds either). The store's text must stay the client's, unit for unit."""
    rng = random.Random(5)
    store = DocumentStore(codec=PositionCodec(UTF16))
    text = "x = '😀𝄞'\nd😀\n"
    store.open("u", "python", 1, text)
    client = text.encode("utf-16-le")
    pieces = ["a", "😀", "\ud83d", "\ude00", "\n", "é", "", "𝄞\nb"]
    for _ in range(400):
        size = len(client) // 2
        start = rng.randrange(size + 1)
        end = min(size, start + rng.choice([0, 0, 1, 2, 3]))
        new = rng.choice(pieces)
        store.change("u", 0, [((*_position(client, start), *_position(client, end)), new)])
        client = client[:2 * start] + new.encode("utf-16-le", "surrogatepass") + client[2 * end:]
        assert store.get("u").text().encode("utf-16-le", "surrogatepass") == client
        assert not SURROGATE_PAIR.search(store.get("u").text())  # halves side by side again are one character


def _code_units(text: str) -> str:
    """`text` as a UTF-16 client holds it, one character per code unit: an astral character as its two halves."""
    return "".join(map(chr, array.array("H", text.encode("utf-16-le", "surrogatepass"))))


def _whole(store: DocumentStore) -> str:
    return "".join(line + end for line, end in zip(store.get("u").lines, store.get("u").breaks))


def test_random_utf16_edits_in_long_lines_keep_the_clients_text_and_columns():
    """Lines longer than LONG_LINE_CHARS (a minified file's) have their positions converted from the last one's
    and single-line edits put in without splitting the line anew: typing near the last edit, jumps, edits at a
    line's end and past it, between the halves of an astral character, lone halves, CR, LF and CRLF breaks put in
    and taken out. The store's text stays the client's unit for unit, and every column converts as the line reads
    from its start."""
    rng = random.Random(13)
    store = DocumentStore(codec=PositionCodec(UTF16))
    long_line = "".join(rng.choice(["a", "😀", "é", "𝄞", " = ", "b"]) for _ in range(LONG_LINE_CHARS + 500))
    text = f"x = 1\r\n{long_line}\ry\n{long_line[::-1]}\r\n"
    store.open("u", "javascript", 1, text)
    client = _code_units(text)
    pieces = ["a", "😀", "\ud83d", "\ude00", "é", "", "", "xy", "\r\n", "\n", "\r"]
    half = _code_units(long_line).index("\ud83d") + 1  # between the two halves of an emoji of line 1
    scripted = [(1, half, 1, half, "x"), (1, half, 1, half + 1, ""),  # split apart, then side by side again
                (1, 0, 1, 0, "\ude00"), (1, 0, 1, 0, "\ud83d"),  # an emoji put in as its halves, the low one first
                (1, 2, 1, 3, "\ude00"), (1, 2, 1, 2, "é"), (1, 3, 1, 4, "")]  # a half replaced, split, joined
    line, at = 1, 100
    for step in range(600):
        lines, breaks = split_lines_and_breaks(client)
        if rng.random() < 0.05:  # a jump
            line = rng.randrange(len(lines))
            at = rng.randrange(len(lines[line]) + 1)
        line = min(line, len(lines) - 1)
        at = max(0, min(at + rng.choice([-2, -1, 0, 1, 1, 2, 3]), len(lines[line])))
        if rng.random() < 0.05:
            at = len(lines[line]) + rng.choice([0, 0, 5])  # at the line's end, or past it (clamped there)
        end_line = line if rng.random() < 0.9 else min(line + 1, len(lines) - 1)
        end = at + rng.choice([0, 0, 0, 1, 2]) if end_line == line else rng.randrange(len(lines[end_line]) + 1)
        new = rng.choice(pieces)
        if step < len(scripted):
            line, at, end_line, end, new = scripted[step]
        store.change("u", step, [((line, at, end_line, end), new)])
        offsets = [0]
        for text_line, text_end in zip(lines, breaks):
            offsets.append(offsets[-1] + len(text_line) + len(text_end))
        a = offsets[line] + min(at, len(lines[line]))
        b = max(a, offsets[end_line] + min(end, len(lines[end_line])))
        client = client[:a] + _code_units(new) + client[b:]
        assert _code_units(_whole(store)) == client, step
        assert not SURROGATE_PAIR.search(_whole(store))  # halves side by side again are one character
        at += len(_code_units(new))
        doc_line = store.get("u").lines[min(line, len(store.get("u").lines) - 1)]
        codec = store.codec
        for column in (rng.randrange(len(doc_line) + 1), len(doc_line), 0):
            units = _units(doc_line[:column], UTF16)
            assert codec.to_units(doc_line, column) == units
            assert codec.to_code_points(doc_line, units) == column
            if column < len(doc_line) and ord(doc_line[column]) > 0xFFFF:  # inside it: its start
                assert codec.to_code_points(doc_line, units + 1) == column
        assert codec.to_units(doc_line, len(doc_line)) == _units(doc_line, UTF16)
        assert codec.to_code_points(doc_line, 10 ** 9) == len(doc_line)


@pytest.mark.parametrize("encoding", [UTF8, UTF16, UTF32])
def test_long_lines_convert_every_column_from_wherever_the_last_one_was(encoding):
    """A long line's kept position moves with each conversion: forward, backward, by one, by thousands."""
    rng = random.Random(encoding)
    line = "".join(rng.choice(["a", "😀", "é", "日", "\ud800", "b"]) for _ in range(2 * LONG_LINE_CHARS))
    codec = PositionCodec(encoding)
    for column in [*range(0, 40), *rng.sample(range(len(line) + 1), 300), *range(len(line) - 40, len(line) + 1)]:
        units = _units(line[:column], encoding)
        assert codec.to_units(line, column) == units
        assert codec.to_code_points(line, units) == column
    emoji = line.index("😀")
    assert codec.to_code_points(line, _units(line[:emoji], encoding) + 1) == emoji + (encoding == UTF32)  # inside


class _Scanned:
    """A compiled pattern that counts the characters its searches are given (the string is the last argument)."""

    def __init__(self, pattern: re.Pattern) -> None:
        self.pattern, self.chars = pattern, 0

    def __getattr__(self, name: str):
        method = getattr(self.pattern, name)

        def counted(*args):
            self.chars += len(args[-1]) if isinstance(args[-1], str) else 0
            return method(*args)
        return counted


@pytest.mark.parametrize("encoding", [UTF8, UTF16, UTF32])
def test_a_keystroke_in_a_megabyte_line_reads_the_edit_not_the_line(encoding, monkeypatch):
    """A keystroke in a minified file's megabyte line, from a client counting UTF-16 units, took 40 ms of the
    server's loop: its two positions were converted five times by reading the line up to them, the line was split
    anew and searched for halves of astral characters to rejoin. A long line's positions are now converted from
    the last keystroke's, and an edit within it is put in without reading the rest of the line: after the first
    keystroke at a place, a keystroke (didChange and the completion request's conversions) reads tens of
    characters, where it read millions."""
    from lsp import documents

    line = ('var a\u00e9=function(b){return b+"\U0001F600"+1},c={"k\u00e9y":[1,2,3]};' * 20_000)[:1_000_000]
    store = DocumentStore(codec=PositionCodec(encoding))
    store.open("u", "javascript", 1, f"{line}\n")
    scans = {name: _Scanned(getattr(documents, name)) for name in ("LONE_SURROGATE", "ASTRAL")}
    for name, scanned in scans.items():
        monkeypatch.setattr(documents, name, scanned)
    read = 0
    units_of = PositionCodec._units_of if hasattr(PositionCodec, "_units_of") else None

    def counted_units_of(self, text):
        nonlocal read
        read += len(text)
        return units_of(self, text)

    if units_of is not None:
        monkeypatch.setattr(PositionCodec, "_units_of", counted_units_of)
    codec, version = store.codec, 1
    keys = [*"x = 😀 é;" * 8, *["backspace"] * 20]
    for where in (len(line), len(line) // 2):  # typing at the end of the line, then in its middle
        column, typed = codec.to_units(store.get("u").lines[0], where), ""
        for keystroke, key in enumerate(keys):
            if keystroke == 1:  # the first keystroke at a place may read up to it
                read = 0
                for scanned in scans.values():
                    scanned.chars = 0
            version += 1
            if key == "backspace":  # as an editor sends it: the last character's units
                size, typed = _units(typed[-1], encoding), typed[:-1]
                store.change("u", version, [((0, column - size, 0, column), "")])
                column -= size
            else:
                store.change("u", version, [((0, column, 0, column), key)])
                column += _units(key, encoding)
                typed += key
            current = store.get("u").lines[0]
            assert codec.to_units(current, codec.to_code_points(current, column)) == column  # a request's locate
            assert codec.to_units(current, len(current)) == _units(current, encoding)
        assert read + sum(scanned.chars for scanned in scans.values()) < 50 * (len(keys) - 1)
        line = line[:where] + typed + line[where:]
        assert store.get("u").lines == [line, ""]


def test_random_edits_at_mixed_line_ends_keep_the_editors_lines():
    """An editor's text with CR, LF and CRLF mixed: inserting "\n" after a lone "\r", or deleting what stood
    between them, makes one CRLF break there. The store must count lines as the editor does."""
    rng = random.Random(11)
    store = DocumentStore()
    text = "import os\ros.pa\r\nx = 1\ny\r"
    store.open("u", "python", 1, text)
    pieces = ["\n", "\r", "\r\n", "a", "", "b\rc", "\n\r"]
    for _ in range(400):
        lines, breaks = split_lines_and_breaks(text)
        offsets = [0]
        for line, end in zip(lines, breaks):
            offsets.append(offsets[-1] + len(line) + len(end))
        sl = rng.randrange(len(lines))
        el = rng.randrange(sl, len(lines))
        sc = rng.randrange(len(lines[sl]) + 1)
        ec = rng.randrange(len(lines[el]) + 1) if el > sl else rng.randrange(sc, len(lines[el]) + 1)
        new = rng.choice(pieces)
        store.change("u", 2, [((sl, sc, el, ec), new)])
        text = text[:offsets[sl] + sc] + new + text[offsets[el] + ec:]
        assert store.get("u").lines == split_lines_and_breaks(text)[0], repr(text)
        assert store.get("u").breaks == split_lines_and_breaks(text)[1], repr(text)


@pytest.mark.parametrize("seed", range(6))
def test_many_edits_in_one_change_each_above_the_last_or_anywhere_match_string_edits(seed):
    """One didChange holding runs of edits each above the one before (put in place in one pass once there are
    SPLICED_IN_ONE_PASS of them), edits elsewhere that break a run, edits touching the line the last began on,
    and mixed line ends: the same lines as the editor's text after each edit in turn."""
    rng = random.Random(seed)
    store = DocumentStore()
    text = "".join(f"line {i}" + rng.choice(["\n", "\r\n", "\r"]) for i in range(300))
    store.open("u", "python", 1, text)
    lines = split_lines_and_breaks(text)[0]  # a replace-all, as VS Code sends it: from the last match up
    store.change("u", 2, [((i, 0, i, 4), "row\r\n") for i in reversed(range(0, len(lines) - 1, 2))])
    text = "".join(("row\r\n" + line[4:] if i % 2 == 0 and i < len(lines) - 1 else line) + end
                   for i, (line, end) in enumerate(zip(*split_lines_and_breaks(text))))
    assert (store.get("u").lines, store.get("u").breaks) == split_lines_and_breaks(text)
    pieces = ["", "a", "\n", "\r", "\r\n", "x\ny", "b\rc\r\n", "long line\n" * 3]
    for version in range(3, 9):
        changes, below = [], len(text)  # `below`: where the last edit began; above it nothing has moved
        for _ in range(rng.randrange(10, 80)):
            lines, breaks = split_lines_and_breaks(text)
            offsets = [0]
            for line, end in zip(lines, breaks):
                offsets.append(offsets[-1] + len(line) + len(end))
            if rng.random() < 0.9:  # a little above the last
                b = max(0, below - rng.randrange(2, 90))
                a = max(0, b - rng.randrange(12))
            else:
                a, b = sorted(rng.randrange(len(text) + 1) for _ in range(2))
            sl = max(i for i in range(len(lines)) if offsets[i] <= a)
            el = max(i for i in range(len(lines)) if offsets[i] <= b)
            a, b = min(a, offsets[sl] + len(lines[sl])), min(b, offsets[el] + len(lines[el]))  # not inside a break
            if b < a:
                b = a
                el = sl
            new = rng.choice(pieces)
            changes.append(((sl, a - offsets[sl], el, b - offsets[el]), new))
            text = text[:a] + new + text[b:]
            below = a
        store.change("u", version, changes)
        assert (store.get("u").lines, store.get("u").breaks) == split_lines_and_breaks(text)


@pytest.mark.parametrize("encoding", [UTF8, UTF16, UTF32])
def test_a_change_put_in_place_in_runs_equals_its_edits_one_at_a_time(encoding):
    """Odd positions too (past a line's end or the document's, negative, inside a surrogate pair or a UTF-8
    sequence, a start after its end) and full texts between edits: a didChange gives the lines and breaks its
    edits give sent one didChange each, as they were put in place before runs were."""
    rng = random.Random(encoding)
    pieces = ["", "a", "\n", "\r", "\r\n", "😀", "é", "\u2028", "x\ny"]
    text = "".join(rng.choice(pieces) for _ in range(600))
    runs, alone = DocumentStore(codec=PositionCodec(encoding)), DocumentStore(codec=PositionCodec(encoding))
    runs.open("u", "python", 1, text)
    alone.open("u", "python", 1, text)
    for version in range(2, 40):
        changes: list = []
        line = len(runs.get("u").lines) + rng.randrange(3)
        for _ in range(rng.choice([1, 5, 40])):
            if rng.random() < 0.01:
                changes.append((None, "".join(rng.choice(pieces) for _ in range(300))))
                continue
            line = max(-2, line - rng.randrange(2, 4)) if rng.random() < 0.97 else rng.randrange(-2, line + 4)
            start, end = (line, rng.randrange(-1, 7)), (line + rng.choice([0, 0, 1]), rng.randrange(-1, 7))
            if rng.random() < 0.1:
                start, end = end, start
            changes.append(((*start, *end), "".join(rng.choice(pieces) for _ in range(rng.randrange(4)))))
        runs.change("u", version, changes)
        for change in changes:
            alone.change("u", version, [change])
        assert (runs.get("u").lines, runs.get("u").breaks) == (alone.get("u").lines, alone.get("u").breaks)


@pytest.mark.parametrize("encoding", [UTF8, UTF16, UTF32])
def test_edits_each_below_the_one_before_are_put_in_place_in_one_pass_as_one_at_a_time(encoding):
    """A didChange of edits each below the one before (a replace-all sent in the order it was made, top to
    bottom): put in one at a time, each that added or removed lines moved every line below it, and five thousand
    of them in a million-line document took 1.2 s. They are put in place in one pass, with the lines and breaks
    they give one didChange each: edits at a line's start (which read the line before), on the line the last one
    ended on, past the document's end, before its start, a little above the last, anywhere. An edit that broke a
    run of edits each above the one before split an astral character on a line it did not touch, in UTF-16."""
    rng = random.Random(encoding)
    pieces = ["", "a", "\n", "\r", "\r\n", "😀", "é", "x\ny", "long line\n" * 3]
    text = "".join(rng.choice(["line", "😀é", ""]) + rng.choice(["\n", "\r\n", "\r"]) for _ in range(400))
    runs, alone = DocumentStore(codec=PositionCodec(encoding)), DocumentStore(codec=PositionCodec(encoding))
    runs.open("u", "python", 1, text)
    alone.open("u", "python", 1, text)
    for version in range(2, 40):
        changes: list = []
        line = rng.randrange(-1, 4)
        for _ in range(rng.choice([2, 20, 80])):
            roll = rng.random()
            if roll < 0.01:
                changes.append((None, "".join(rng.choice(pieces) for _ in range(200))))
                continue
            if roll < 0.85:
                line += rng.choice([0, 0, 1, 1, 2, 3])
            elif roll < 0.95:
                line = max(-2, line - rng.randrange(1, 20))
            else:
                line = rng.randrange(-2, len(alone.get("u").lines) + 3)
            start, end = (line, rng.randrange(-1, 7)), (line + rng.choice([0, 0, 0, 1, 2]), rng.randrange(-1, 7))
            if rng.random() < 0.1:
                start, end = end, start
            changes.append(((*start, *end), "".join(rng.choice(pieces) for _ in range(rng.randrange(4)))))
            line = max(start[0], end[0])
        runs.change("u", version, changes)
        for change in changes:
            alone.change("u", version, [change])
        assert (runs.get("u").lines, runs.get("u").breaks) == (alone.get("u").lines, alone.get("u").breaks)
    for seed in range(1_500):  # short documents, where the edits reach their start and end
        rng = random.Random(seed)
        text = "".join(rng.choice(["li", "😀é", ""]) + rng.choice(["\n", "\r\n", "\r"])
                       for _ in range(rng.randrange(12)))
        changes, line = [], rng.randrange(-1, 3)
        for _ in range(rng.choice([2, 3, 5, 8, 20])):
            line += rng.choice([0, 0, 1, 1, 2, -1, -3]) if rng.random() < 0.9 else rng.randrange(-5, 5)
            start, end = (line, rng.randrange(-1, 5)), (line + rng.choice([0, 0, 1, 2]), rng.randrange(-1, 5))
            if rng.random() < 0.15:
                start, end = end, start
            changes.append(((*start, *end), "".join(rng.choice(pieces[:8]) for _ in range(rng.randrange(3)))))
            line = max(start[0], end[0])
        runs.open("u", "python", 1, text)
        alone.open("u", "python", 1, text)
        runs.change("u", 2, changes)
        for change in changes:
            alone.change("u", 2, [change])
        assert (runs.get("u").lines, runs.get("u").breaks) == (alone.get("u").lines, alone.get("u").breaks), seed
    store = DocumentStore(codec=PositionCodec(encoding))
    store.open("u", "python", 1, "x = 1\n" * 1_000_000)
    timings = []
    for changes in ([((k * 101, 0, k * 101, 0), "y\n") for k in range(5_000)],  # each below the one before
                    [((k * 100, 0, k * 100, 0), "y\n") for k in reversed(range(5_000))]):  # each above
        started = time.perf_counter()
        store.change("u", 2, changes)
        timings.append(time.perf_counter() - started)
    assert timings[0] < 5 * timings[1]


def test_edits_out_of_range_are_clamped_and_line_ends_follow_lsp():
    store = DocumentStore()
    store.open("u", "python", 1, "a\r\nb\rc\u2028d\x0ce\n")
    assert store.get("u").lines == ["a", "b", "c\u2028d\x0ce", ""]  # only CR, LF, CRLF end lines
    store.change("u", 2, [((99, 0, 120, 5), "END")])  # past the end: appended
    assert store.get("u").lines[-1] == "END"
    store.change("u", 3, [((0, 50, 0, 50), "!")])  # past the line end: at the line end
    assert store.get("u").lines[0] == "a!"
    store.change("u", 4, [(None, "whole\nnew")])  # a full-text change
    assert store.get("u").lines == ["whole", "new"]
    assert store.get("u").edits == 3 and store.get("u").version == 4
    assert store.change("missing", 1, [(None, "x")]) is None


def test_other_open_documents_come_most_recently_edited_first_and_only_their_heads():
    store = DocumentStore()
    store.open("file:///a.py", "python", 1, "a = 1\n")
    store.open("file:///b.py", "python", 1, "b = 2\n")
    store.open("file:///notes.md", "markdown", 1, "# notes\n")
    store.open("file:///c.py", "python", 1, "\n".join(f"c_{i} = {i}" for i in range(5000)))
    assert store.others("file:///c.py", 4) == ["b = 2\n", "a = 1\n"]  # same language only, newest first
    generation = store.generation
    store.change("file:///a.py", 2, [(None, "a = 3\n")])
    assert store.generation > generation
    assert store.others("file:///c.py", 1) == ["a = 3\n"]
    assert store.others("file:///c.py", 0) == [] and store.others("file:///nowhere.py", 4) == []
    head = store.others("file:///a.py", 1)[0]
    assert head.startswith("c_0 = 0\n") and len(head) <= OTHER_FILE_CHARS < len(store.get("file:///c.py").text())
    assert head == head_of_file(store.get("file:///c.py").text()).removesuffix("\n")  # whole lines, as the engine cuts
    store.close("file:///a.py")
    assert store.others("file:///b.py", 4)[1:] == [] and store.others("file:///b.py", 4)[0].startswith("c_0")


def test_settings_apply_valid_and_report_invalid_keys():
    current = ServerSettings()
    new, warnings, unknown = apply_changes(current, {
        "beams": 8, "maxSuggestions": 2.0, "maxTokens": 0, "device": "CUDA", "threads": True,
        "memoryBudgetMb": "big", "modelPath": "", "enabledLanguages": "rust", "completionItems": False,
        "inlineCompletions": 1, "documentRepeats": False, "colour": "blue",
    })
    assert new.engine.beams == 8 and new.engine.max_suggestions == 2 and new.engine.device == "cuda"
    assert new.engine.max_tokens == 24 and new.engine.threads == 0 and new.engine.memory_budget_mb == 256
    assert new.engine.model_path is None and new.enabled_languages == ("rust",)
    assert new.completion_items is False and new.inline_completions is True
    assert new.engine.document_repeats is False
    assert apply_changes(new, {"documentRepeats": "no"})[1][0].startswith("Ignoring invalid setting "
                                                                           "completer.documentRepeats")
    invalid = ("maxTokens", "threads", "memoryBudgetMb", "inlineCompletions")
    expected = sorted(f"Ignoring invalid setting completer.{k}" for k in invalid)
    assert sorted(w.split(":")[0] for w in warnings) == expected
    assert unknown == ["colour"]
    assert current == ServerSettings()  # not mutated
    reset, warnings, _ = apply_changes(new, {"beams": None, "enabledLanguages": None})
    assert reset.engine.beams == 0 and reset.enabled_languages is None and not warnings  # the model's again


def test_settings_messages_use_the_settings_names_and_guess_misspelt_ones():
    _, warnings, _ = apply_changes(ServerSettings(), {"maxSuggestions": 40, "contextTokens": 3, "openFiles": 99})
    assert warnings == [  # the names the user wrote, not EngineSettings' fields
        "Ignoring invalid setting completer.maxSuggestions: maxSuggestions must be between 1 and 16",
        "Ignoring invalid setting completer.contextTokens: contextTokens must be 0 (the model's default window) or "
        "at least maxTokens + 64 = 88",
        "Ignoring invalid setting completer.openFiles: openFiles must be between 0 and 16"]
    assert [likely_meant(key) for key in ("maxSuggestion", "enabled_languages", "modelpath", "workspace-context",
                                          "beam", "python", "trace", "colour", "disabledLanguages", "completion")] == [
        "maxSuggestions", "enabledLanguages", "modelPath", "workspaceContext", "beams", None, None, None, None, None]


def test_every_boolean_setting_takes_true_and_false():
    """The VS Code extension sends each of them in initializationOptions; none may be refused (fillInTheMiddle was)."""
    keys = ("completionItems", "inlineCompletions", "documentRepeats", "searchAhead", "fillInTheMiddle",
            "workspaceContext")
    for value in (True, False):
        new, warnings, unknown = apply_changes(ServerSettings(), {key: value for key in keys})
        assert warnings == [] and unknown == []
        assert new.engine.fill_in_the_middle is value and new.engine.search_ahead is value
    assert apply_changes(ServerSettings(), {"fillInTheMiddle": 1})[1][0].startswith(
        "Ignoring invalid setting completer.fillInTheMiddle")


@pytest.mark.parametrize("order", [("maxTokens", "contextTokens"), ("contextTokens", "maxTokens")])
def test_settings_that_depend_on_each_other_apply_in_any_order(order):
    """A client sends every key at once; whether maxTokens 64 fits depends on the contextTokens of the same
    change, not on which key comes first."""
    current, _, _ = apply_changes(ServerSettings(), {"contextTokens": 100})
    values = {"maxTokens": 64, "contextTokens": 200}
    new, warnings, _ = apply_changes(current, {key: values[key] for key in order})
    assert (new.engine.max_tokens, new.engine.context_tokens) == (64, 200) and not warnings
    refused, warnings, _ = apply_changes(current, {key: {"maxTokens": 120, "contextTokens": 100}[key] for key in order})
    assert refused.engine.max_tokens == 24 and [w.split(":")[0] for w in warnings] == [
        "Ignoring invalid setting completer.maxTokens"]


def test_settings_sections_and_languages():
    assert extract_section({"completer": {"beams": 2}}) == {"beams": 2}
    assert extract_section({"beams": 2}) == {"beams": 2}
    assert extract_section(None) is None and extract_section([1]) is None
    assert extract_section({"completer": [1]}) is None and extract_section({"completer": None}) is None
    assert shape_problem({"completer": "beams=2"}) == ('completer must be an object of settings, such as {"beams": 2}, '
                                                      'not a string; ignored')
    assert shape_problem(None) is None and shape_problem({"completer": None}) is None and shape_problem({}) is None
    assert ServerSettings().enabled_languages is None  # unset: the model's languages (tests/test_languages.py)
    assert apply_changes(ServerSettings(), {"enabledLanguages": []})[0].enabled_languages == ()  # none, as said
    assert set(ServerSettings().to_camel()) >= {"modelPath", "beams", "maxSuggestions", "maxTokens", "device",
                                                "threads", "memoryBudgetMb", "enabledLanguages",
                                                "completionItems", "inlineCompletions", "documentRepeats"}


def test_indentation_the_engine_wrote_is_given_back_as_tabs_in_a_document_indented_with_them():
    raw = [{"text": "        return total", "score": -1.0}, {"text": "      x = 1  # two", "score": -2.0}]
    assert [s.line for s in suggested_lines("", 0, raw, 5, lambda: True)] == ["\t\treturn total", "\t  x = 1  # two"]
    assert [s.line for s in suggested_lines("", 0, raw, 5, lambda: False)] == [r["text"] for r in raw]
    asked = []
    typed = suggested_lines("\tre", 3, [{"text": "turn total", "score": -1.0}], 5, lambda: asked.append(1) or True)
    assert [s.line for s in typed] == ["\treturn total"] and not asked  # no indentation written: never asked


def test_suggested_lines_keep_the_users_prefix_and_drop_noise():
    current = "\tx = fo"  # a tab: the engine saw it expanded, our line must keep it
    raw = [
        {"text": "o(1)", "score": -1.0, "line": "    x = foo(1)"},
        {"text": "o(1)", "score": -2.0},  # duplicate line
        {"text": "   ", "score": -0.5},  # whitespace only
        {"text": "", "score": -0.1},  # no-op
        {"text": "rmat()\n", "score": -3.0},
        {"text": "obar", "score": -4.0},
    ]
    lines = suggested_lines(current, len(current), raw, limit=2)
    assert [s.line for s in lines] == ["\tx = foo(1)", "\tx = format()"]
    result = completion_list(lines, 7, 9)
    assert result.is_incomplete is True
    first = result.items[0]
    assert first.text_edit.range == types.Range(types.Position(7, 0), types.Position(7, 9))
    assert first.label == "x = foo(1)" and first.filter_text == "\tx = foo(1)"
    assert first.sort_text < result.items[1].sort_text
    assert {item.insert_text_mode for item in result.items} == {types.InsertTextMode.AsIs}  # indented as suggested
    inline = inline_list(lines, 7, 9)
    assert [i.insert_text for i in inline.items] == ["\tx = foo(1)", "\tx = format()"]


def test_a_line_from_further_up_says_so_instead_of_a_score():
    raw = [{"text": "o(1)", "score": -1.25}, {"text": "o(path, mode=2)", "score": None, "source": "earlier line"}]
    lines = suggested_lines("x = fo", 6, raw, limit=5)
    assert [s.score for s in lines] == [-1.25, None]
    assert [item.detail for item in completion_list(lines, 0, 6).items] == [
        "completer · score -1.25", "completer · a line further up the file"]
    lines = suggested_lines("x = fo", 6, [{"text": "o(path)", "score": None, "source": "workspace line"}], limit=5)
    assert [item.detail for item in completion_list(lines, 0, 6).items] == [
        "completer · a line of another file in the workspace"]


def test_the_start_of_a_longer_line_says_so_beside_its_score():
    raw = [{"text": "o(alpha, beta,", "score": -2.5, "source": "partial line"}]
    lines = suggested_lines("x = fo", 6, raw, limit=5)
    assert lines[0].partial and lines[0].line == "x = foo(alpha, beta,"
    assert completion_list(lines, 0, 6).items[0].detail == "completer · the start of a longer line · score -2.50"


def test_frames_round_trip_and_reject_garbage():
    messages = [{"id": 1, "op": "complete", "uri": "file:///é", "before": "x\x00\ud800", "after": ""},
                {"id": 2, "ok": {"score": 1.5, "nested": [1, None, True]}}]
    stream = io.BytesIO(b"".join(framing.encode(m) for m in messages))
    assert framing.read_frame(stream) == messages[0]
    assert framing.read_frame(stream) == messages[1]
    assert framing.read_frame(stream) is None
    with pytest.raises(framing.FrameError):
        framing.read_frame(io.BytesIO(framing.HEADER.pack(10) + b"\xc1" * 10))
    with pytest.raises(framing.FrameError):
        framing.read_frame(io.BytesIO(framing.HEADER.pack(framing.MAX_FRAME_BYTES + 1)))
    with pytest.raises(framing.FrameError):
        framing.read_frame(io.BytesIO(framing.encode({"a": 1})[:-1]))

    async def read_async() -> object:
        reader = asyncio.StreamReader()
        reader.feed_data(framing.encode(messages[1]))
        reader.feed_eof()
        return await framing.read_frame_async(reader), await framing.read_frame_async(reader)

    assert asyncio.run(read_async()) == (messages[1], None)



def test_the_strict_converter_refuses_other_types_but_keeps_enums_and_lenient_booleans():
    from lsp.protocol import strict_converter

    converter = strict_converter()
    params = converter.structure({"textDocument": {"uri": "file:///a.py"}, "position": {"line": 1, "character": 2},
                                  "context": {"triggerKind": 1}}, types.CompletionParams)
    assert params.context.trigger_kind is types.CompletionTriggerKind.Invoked  # an int enum, still an enum
    init = converter.structure({"processId": None, "capabilities": {"workspace": {"applyEdit": 1}, "textDocument": {
        "completion": {"completionItem": {"documentationFormat": ["markdown"]}}}}}, types.InitializeParams)
    assert init.capabilities.workspace.apply_edit is True  # a capability sent as 1 does not fail initialize
    formats = init.capabilities.text_document.completion.completion_item.documentation_format
    assert list(formats) == [types.MarkupKind.Markdown] and isinstance(formats[0], types.MarkupKind)  # a str enum
    for bad in ({"text": None}, {"text": 5}, {"version": "1"}, {"version": 1.5}, {"uri": 12}):
        item = {"uri": "file:///a.py", "languageId": "python", "version": 1, "text": "x", **bad}
        with pytest.raises(Exception):
            converter.structure({"textDocument": item}, types.DidOpenTextDocumentParams)


def test_the_strict_converter_takes_only_integers_and_strings_as_request_ids():
    from lsp.protocol import strict_converter

    converter = strict_converter()
    for good in (1, "a"):
        assert converter.structure({"id": good}, types.CancelParams).id == good
    for bad in ({"id": 1}, [1], True, 1.5, None):
        with pytest.raises(Exception):
            converter.structure({"id": bad}, types.CancelParams)
    token = converter.structure({"textDocument": {"uri": "file:///a.py"}, "position": {"line": 0, "character": 0},
                                 "workDoneToken": None}, types.CompletionParams).work_done_token
    assert token is None  # an optional id may be null


@pytest.mark.parametrize("uri, language_id, language", [
    ("file:///a/x.py", "python", "python"), ("file:///a/x.py", "", "python"), ("file:///a/x.PYI", "py", "python"),
    ("file:///a/x%20y.py?q=1", "", "python"), ("file:///a/x.py", "plaintext", "plaintext"),
    ("file:///a/x.sh", "sh", "shellscript"), ("file:///a/Makefile", "make", "make"), ("untitled:Untitled-1", "", ""),
])
def test_a_documents_language_falls_back_to_its_extension(uri: str, language_id: str, language: str):
    store = DocumentStore()
    doc = store.open(uri, language_id, 1, "x = 1\n")
    assert (doc.language_id, doc.language) == (language_id, language)


def test_other_open_documents_of_the_same_language_by_extension():
    store = DocumentStore()
    store.open("file:///a/one.py", "", 1, "import one\n")
    store.open("file:///a/two.txt", "", 1, "two\n")
    store.open("file:///a/three.py", "python", 1, "import three\n")
    assert store.others("file:///a/three.py", 5) == ["import one\n"]


@pytest.mark.parametrize("data, length", [
    (b"Content-Length: 12\r\n\r\n", 12), (b"content-length:7\n\n", 7), (b"\r\nContent-Type: x\r\nContent-Length: 3 \r\n\r\n", 3),
    (b'{"a": "Content-Length: 9"}Content-Length: 4\r\n\r\n', 4),  # junk first; the last header in the line counts
    (b"", None),
])
def test_the_reader_finds_each_messages_length(data: bytes, length: int | None):
    from lsp.reader import next_length

    assert asyncio.run(next_length(_LineReader(data))) == length


@pytest.mark.parametrize("data, says", [
    (b"Content-Length: 9x\r\n\r\n", "not a byte count"), (b"Content-Length: 99999999999\r\n\r\n", "exceeds"),
    (b"Content-Type: x\r\n\r\n", "without a Content-Length"), (b"Content-Length: 2\r\n{oops\r\n\r\n", "not `Name: value`"),
])
def test_the_reader_refuses_a_header_block_it_cannot_use(data: bytes, says: str):
    from lsp.reader import BadFrame, next_length

    with pytest.raises(BadFrame, match=says):
        asyncio.run(next_length(_LineReader(data)))


class _LineReader:
    """The two calls lsp.reader makes of pygls' stdin reader, over bytes in memory."""

    def __init__(self, data: bytes) -> None:
        self.stream = io.BytesIO(data)

    async def readline(self) -> bytes:
        return self.stream.readline()

    async def readexactly(self, n: int) -> bytes:
        return self.stream.read(n)


def test_the_first_completion_in_a_document_ends_its_prefill(engine):
    """The text a document was opened with is stale once the user types in it: its own requests keep its cache
    from then on, and a prefill resumed later would only cut that cache back (and run for ever)."""
    import io
    import time

    from completer.scheduler import Priority
    from lsp import worker as worker_module
    from lsp.worker import Client, Worker, model_key

    worker = Worker()
    client = Client(1, io.BytesIO(), model_key=model_key(engine.settings), settings=engine.settings)
    worker.clients[client.id] = client
    worker.engines[client.model_key] = engine
    worker._take(client, {"id": 1, "op": "prefill", "uri": "file:///p.py", "text": "import os\n" * 100})
    assert list(worker._prefills) == [client.document("file:///p.py")]
    worker._quiet_since = time.monotonic() - worker_module.SEARCH_AHEAD_AFTER_S  # the user paused
    worker._start_idle_work()  # the prefill starts, and runs a chunk
    worker.scheduler.iterate()
    assert worker.scheduler.active(priority=Priority.PREFETCH)
    worker._take(client, {"id": 2, "op": "complete", "uri": "file:///p.py", "before": "import os\nim", "after": "",
                          "below": ""})
    assert not worker._prefills and not worker.scheduler.active(priority=Priority.PREFETCH)  # stopped for good
    while worker.scheduler.busy:
        worker.scheduler.iterate()
    assert b'"suggestions"' in client.out.getvalue() or client.out.getvalue()  # the completion was answered
    worker._take(client, {"id": 3, "op": "prefill", "uri": "file:///q.py", "text": "import os\n"})
    worker.engines.clear()  # no model loaded: nothing to prefill with, and no reason to keep waking for it
    worker._quiet_since = time.monotonic() - worker_module.SEARCH_AHEAD_AFTER_S
    worker._start_idle_work()
    assert not worker._prefills and not worker.scheduler.busy


def test_windows_of_a_shared_engine_take_turns_at_background_prefills(engine):
    """A window that opens many files at once (a session restored) does not hold the file another window just
    opened behind all their prefills: the next prefill is the oldest of the window that had one least recently."""
    import io
    import time

    from completer.scheduler import Priority
    from lsp import worker as worker_module
    from lsp.worker import Client, Worker, model_key

    worker = Worker()
    flood, other = (Client(n, io.BytesIO(), model_key=model_key(engine.settings), settings=engine.settings)
                    for n in (1, 2))
    for client in (flood, other):
        worker.clients[client.id] = client
    worker.engines[flood.model_key] = engine
    for n in range(4):
        worker._take(flood, {"id": n, "op": "prefill", "uri": f"file:///flood{n}.py", "text": "import os\n" * 20})
    worker._take(other, {"id": 9, "op": "prefill", "uri": "file:///mine.py", "text": "import sys\n" * 20})
    order = []
    while worker._prefills or worker.scheduler.busy:
        worker._quiet_since = time.monotonic() - worker_module.SEARCH_AHEAD_AFTER_S  # the user paused
        worker._start_idle_work()
        order += [t.document for t in worker.scheduler.active(priority=Priority.PREFETCH) if t.document not in order]
        while worker.scheduler.busy:
            worker.scheduler.iterate()
    assert order == [flood.document("file:///flood0.py"), other.document("file:///mine.py"),
                     *(flood.document(f"file:///flood{n}.py") for n in range(1, 4))]


def test_the_worker_gets_a_fixed_mmap_threshold_unless_the_user_chose_one(monkeypatch):
    from lsp.worker_client import MMAP_THRESHOLD_BYTES, worker_environment

    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    assert worker_environment()["MALLOC_MMAP_THRESHOLD_"] == str(MMAP_THRESHOLD_BYTES)
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "1048576")
    assert worker_environment()["MALLOC_MMAP_THRESHOLD_"] == "1048576"


def test_the_server_process_never_imports_the_model_runtime_or_numpy():
    """Each editor window runs a server; what it imports it holds in memory, once per window (issue 31's
    memory target): the model's libraries belong to the worker or the shared engine alone."""
    import subprocess
    import sys

    code = ("import sys, lsp.server, lsp.workspace, completer.workspace, completer.earlier_lines\n"
            "print(sorted(m for m in ('numpy', 'onnxruntime', 'tokenizers') if m in sys.modules))")
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert found == "[]", found


def test_a_handler_step_cancelled_by_the_loops_teardown_ends_its_request_quietly():
    """An `exit` right behind `shutdown` ends the loop while the shutdown handler still stops the worker: the
    cancelled step reached pygls' generator runner, which let the CancelledError out of a callback (an ERROR with a
    traceback in the log). Now the request's future is cancelled and nothing is raised."""
    import asyncio
    from concurrent.futures import Future

    from lsp.server import CompleterServer

    protocol = CompleterServer().protocol

    def handler_steps():
        yield None, (), {}
        raise AssertionError("the generator must not go on after a cancelled step")

    async def cancelled_step() -> None:
        step = asyncio.ensure_future(asyncio.sleep(10))
        await asyncio.sleep(0)
        step.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await step
        request: Future = Future()
        gen = handler_steps()
        next(gen)
        protocol._run_generator(step, gen=gen, result_future=request)
        assert request.cancelled()

    asyncio.run(cancelled_step())


def test_a_suggested_line_that_is_a_document_line_with_tabs_gets_its_tabs_back():
    from lsp.completions import LineSuggestion, with_document_tabs

    document = ['x = f(1,\t2)', '\tx = g(3,\t4)  ', 'y = f(5,\t6)', 'plain = 1']
    lines = [LineSuggestion('x = f(1,    2)', None), LineSuggestion('x = f(7,    8)', -1.0),
             LineSuggestion('\tx = g(3,    4)', -2.0)]
    back = with_document_tabs(lines, 'x = f(', document)
    assert [s.line for s in back] == ['x = f(1,\t2)', 'x = f(7,    8)', '\tx = g(3,    4)']  # prefix differs: kept
    assert back[0].score is None and back[1].score == -1.0
    assert with_document_tabs(lines, '', ['no tabs here']) is lines
    assert [s.line for s in with_document_tabs(lines, '\t', document)][2] == '\tx = g(3,\t4)'  # trailing space dropped


def test_only_the_same_whole_text_leaves_a_document_unchanged():
    store = DocumentStore()
    store.open("u", "python", 1, "import os\r\nx = 1\n")
    assert store.unchanged_by("u", 2, [(None, "import os\r\nx = 1\n")])
    assert store.get("u").version == 2 and store.get("u").edits == 0
    assert not store.unchanged_by("u", 3, [(None, "import os\nx = 1\n")])  # another line break is another text
    assert not store.unchanged_by("u", 3, [((0, 0, 0, 0), "")])  # a ranged edit is applied, not compared
    assert store.unchanged_by("u", 4, [(None, "x"), (None, "import os\r\nx = 1\n")])  # the text it ends with
    assert not store.unchanged_by("missing", 1, [(None, "")])


class _CountedLines(list):
    """A document's lines, counting the lines read one by one."""

    reads = 0

    def __getitem__(self, index):  # type: ignore[override]
        _CountedLines.reads += 1
        return super().__getitem__(index)


def test_the_line_below_that_a_following_line_must_not_repeat_is_looked_for_near_the_cursor():
    """The line that follows copies of the lines above goes first unless it is the next line with code below the
    cursor. That line was looked for through every line below: a million blank lines cost 125 ms of the server's
    loop at every keystroke above them (and header_first, on a first line, copied them all too). It is looked for
    among the lines the engine reads below the cursor, as many as fit in MAX_CONTEXT_CHARS."""
    from lsp.completions import LineSuggestion, Target
    from lsp.line_order import following_first

    head = ["x = compute(alpha)", "y = use(x, beta)", "x = compute(alpha)"]
    model = [LineSuggestion("z = other()", -1.0)]

    def first_line(below: list[str]) -> str:
        document = _CountedLines([*head, "", *below])
        target = Target("file:///a.py", len(head), 0, "", 0)
        before = "\n".join(head) + "\n"
        return asyncio.run(following_first(None, model, target, before, document, 3))[0].line

    assert first_line(["", "w = 1"]) == "y = use(x, beta)"
    assert first_line(["", "y = use(x, beta)"]) == "z = other()"  # the line below already: not offered again
    _CountedLines.reads = 0
    assert first_line([""] * 1_000_000 + ["y = use(x, beta)"]) == "y = use(x, beta)"  # far below: not the next
    assert _CountedLines.reads < 40_000


def test_a_document_of_a_million_lines_is_split_at_the_speed_of_str_split():
    """Each line of a document cost a regular expression match and two appends: 0.3 s for a megabyte of blank
    lines, at each didOpen and, from a client that sends the whole text at each keystroke (ALE), twice per
    keystroke. Text without a carriage return is now split by str.split, with the same lines and breaks."""
    import time

    text = "\n" * 1_000_000 + "x = 1"
    timings = []
    for split in (split_lines_and_breaks, str.splitlines):
        started = time.perf_counter()
        split(text)
        timings.append(time.perf_counter() - started)
    assert timings[0] < 5 * timings[1]
    assert split_lines_and_breaks("a\n\nb\n") == (["a", "", "b", ""], ["\n", "\n", "\n", ""])
    assert split_lines_and_breaks("a\r\nb\rc") == (["a", "b", "c"], ["\r\n", "\r", ""])


def test_stderr_on_a_terminal_gets_every_line_where_poll_cannot_tell_of_devices(monkeypatch):
    """StderrHandler leaves a line out only where stderr is a pipe or a socket that has no room for it. macOS's poll
    answers POLLNVAL for a device: every warning of a server run in a terminal (`completer serve --tcp`) was left
    out there. Its poll is stood in for here: POLLNVAL for a character device, as there."""
    import logging
    import os
    import pty
    import select
    import stat

    from lsp.logs import StderrHandler

    real_poll = select.poll

    class DarwinPoll:
        def __init__(self) -> None:
            self.poller, self.fds = real_poll(), []

        def register(self, fd: int, events: int) -> None:
            self.fds.append(fd)
            self.poller.register(fd, events)

        def poll(self, timeout: int) -> list[tuple[int, int]]:
            if any(stat.S_ISCHR(os.fstat(fd).st_mode) for fd in self.fds):
                return [(fd, select.POLLNVAL) for fd in self.fds]
            return self.poller.poll(timeout)

    monkeypatch.setattr(select, "poll", DarwinPoll)
    master, terminal = pty.openpty()
    try:
        with open(terminal, "w", closefd=False) as stream:
            handler = StderrHandler(stream)
            handler.setFormatter(logging.Formatter("%(message)s"))
            for number in range(3):
                handler.emit(logging.LogRecord("lsp", logging.WARNING, __file__, 1, "warning %d", (number,), None))
            said = ""
            while said.count("warning") < 3 and select.select([master], [], [], 5)[0]:  # none: every line left out
                said += os.read(master, 4096).decode()  # the terminal may pass the lines on in several reads
        assert said.split() == ["warning", "0", "warning", "1", "warning", "2"] and handler.left_out == 0
    finally:
        os.close(master)
        os.close(terminal)
