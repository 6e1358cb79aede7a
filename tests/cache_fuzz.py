"""Seeded random edit sequences for the differential fuzz of the engine's per-document state
(tests/test_cache_fuzz.py): a long-lived engine that saw every edit must answer a cursor as a fresh one that sees
only the final text does."""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SOURCES = sorted((REPO / "completer").glob("*.py"))

ASTRAL_LINES = ["    label = '😀 grinning 𝄞 clef'  # 🐍", "    name = 'ünïcödé 漢字'", "# 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 🎉🎉"]
TYPED = ["self.", "return ", "if x:", "for item in items:", "print(", "value = ", "😀", "é", "(a, b)", "    "]


@dataclass
class Step:
    """One request: the document's text and cursor (0-based line, code-point column), or new settings."""

    uri: str
    text: str
    line: int
    column: int
    kind: str
    settings: dict | None = None


@dataclass
class Doc:
    """One document's text as lines, the cursor, and the texts it had (for undo-like reverts)."""

    lines: list[str]
    line: int = 0
    column: int = 0
    history: list[tuple[list[str], int, int]] = field(default_factory=list)

    def text(self) -> str:
        return "\n".join(self.lines)

    def clamp(self) -> None:
        self.line = max(0, min(self.line, len(self.lines) - 1))
        self.column = max(0, min(self.column, len(self.lines[self.line])))

    def save(self) -> None:
        self.history.append((list(self.lines), self.line, self.column))
        del self.history[:-20]


def source_text(rng: random.Random, lines: int) -> list[str]:
    """A realistic Python chunk: `lines` consecutive lines of one of the engine's own modules."""
    text = rng.choice(SOURCES).read_text().split("\n")
    start = rng.randrange(max(1, len(text) - lines))
    return text[start:start + lines] or [""]


def type_chars(rng: random.Random, doc: Doc, uri: str, at_end: bool) -> list[Step]:
    """Type a snippet one character at a time, at the line's end or mid-line, with a request per keystroke."""
    doc.clamp()
    if at_end:
        doc.column = len(doc.lines[doc.line])
    else:
        doc.column = rng.randrange(len(doc.lines[doc.line]) + 1)
    steps = []
    for char in rng.choice(TYPED):
        current = doc.lines[doc.line]
        doc.lines[doc.line] = current[:doc.column] + char + current[doc.column:]
        doc.column += 1
        steps.append(Step(uri, doc.text(), doc.line, doc.column, "type"))
    return steps


def backspace(rng: random.Random, doc: Doc, uri: str) -> list[Step]:
    doc.clamp()
    steps = []
    for _ in range(rng.randint(1, 6)):
        if doc.column == 0:
            if doc.line == 0:
                break
            above = doc.lines[doc.line - 1]
            doc.lines[doc.line - 1:doc.line + 1] = [above + doc.lines[doc.line]]
            doc.line, doc.column = doc.line - 1, len(above)
        else:
            current = doc.lines[doc.line]
            doc.lines[doc.line] = current[:doc.column - 1] + current[doc.column:]
            doc.column -= 1
        steps.append(Step(uri, doc.text(), doc.line, doc.column, "backspace"))
    return steps


def enter(rng: random.Random, doc: Doc, uri: str) -> list[Step]:
    """Enter at the cursor, keeping the line's indentation; now and then blanks stay after the cursor (an editor
    that does not trim them)."""
    doc.clamp()
    current = doc.lines[doc.line]
    indent = current[:len(current) - len(current.lstrip())]
    rest = current[doc.column:].lstrip() or rng.choice(["", "", "", "  "])
    doc.lines[doc.line:doc.line + 1] = [current[:doc.column], indent + rest]
    doc.line, doc.column = doc.line + 1, len(indent)
    return [Step(uri, doc.text(), doc.line, doc.column, "enter")]


def delete_line_above(rng: random.Random, doc: Doc, uri: str) -> list[Step]:
    doc.clamp()
    if doc.line == 0:
        return []
    del doc.lines[rng.randrange(doc.line)]
    doc.line -= 1
    return [Step(uri, doc.text(), doc.line, doc.column, "delete-above")]


def paste_above(rng: random.Random, doc: Doc, uri: str) -> list[Step]:
    doc.clamp()
    at = rng.randrange(doc.line + 1)
    block = source_text(rng, rng.randint(1, 30))
    doc.lines[at:at] = block
    doc.line += len(block)
    return [Step(uri, doc.text(), doc.line, doc.column, "paste-above")]


def revert(rng: random.Random, doc: Doc, uri: str) -> list[Step]:
    if not doc.history:
        return []
    lines, line, column = rng.choice(doc.history)
    doc.lines, doc.line, doc.column = list(lines), line, column
    return [Step(uri, doc.text(), doc.line, doc.column, "revert")]


def jump(rng: random.Random, doc: Doc, uri: str) -> list[Step]:
    doc.line = rng.randrange(len(doc.lines))
    doc.column = rng.choice([len(doc.lines[doc.line]), rng.randrange(len(doc.lines[doc.line]) + 1)])
    return [Step(uri, doc.text(), doc.line, doc.column, "jump")]


def edit_far_above(rng: random.Random, doc: Doc, uri: str) -> list[Step]:
    """Change a line near the top of a long document: beyond the window, within the clipped text or beyond it."""
    doc.clamp()
    if doc.line < 2:
        return []
    at = rng.randrange(min(doc.line, 10))
    doc.lines[at] = rng.choice(["", "# edited far above", doc.lines[at] + "  # more", doc.lines[at][:-1]])
    return [Step(uri, doc.text(), doc.line, doc.column, "far-above")]


def grow_or_shrink(rng: random.Random, doc: Doc, uri: str) -> list[Step]:
    """Add or remove a long block just above the cursor: the context crosses the window's limit either way."""
    doc.clamp()
    if rng.random() < 0.5 or doc.line < 40:
        block = source_text(rng, rng.randint(40, 150))
        doc.lines[doc.line:doc.line] = block
        doc.line += len(block)
    else:
        cut = rng.randint(20, min(doc.line, 150))
        del doc.lines[doc.line - cut:doc.line]
        doc.line -= cut
    return [Step(uri, doc.text(), doc.line, doc.column, "grow-shrink")]


def huge_paste(rng: random.Random, doc: Doc, uri: str) -> list[Step]:
    """Paste whole modules above the cursor: the text before it passes MAX_CONTEXT_CHARS, so it is clipped."""
    doc.clamp()
    block = [line for path in rng.sample(SOURCES, 4) for line in path.read_text().split("\n")]
    doc.lines[doc.line:doc.line] = block
    doc.line += len(block)
    return [Step(uri, doc.text(), doc.line, doc.column, "huge-paste")]


def replace_all(rng: random.Random, doc: Doc, uri: str) -> list[Step]:
    doc.lines = source_text(rng, rng.randint(5, 200))
    doc.line = rng.randrange(len(doc.lines))
    doc.column = len(doc.lines[doc.line])
    return [Step(uri, doc.text(), doc.line, doc.column, "replace")]


def astral(rng: random.Random, doc: Doc, uri: str) -> list[Step]:
    """Put a line of multi-byte and astral characters at the cursor, then type and delete inside it."""
    doc.clamp()
    doc.lines.insert(doc.line + 1, rng.choice(ASTRAL_LINES))
    doc.line += 1
    doc.column = rng.randrange(len(doc.lines[doc.line]) + 1)
    steps = [Step(uri, doc.text(), doc.line, doc.column, "astral")]
    steps += backspace(rng, doc, uri) if rng.random() < 0.5 else type_chars(rng, doc, uri, at_end=False)
    return steps


def type_line(rng: random.Random, doc: Doc, uri: str) -> list[Step]:
    """Type at the end of a line, then press Enter, where an editor indents as the engine guesses it will: the
    request a search ahead foresees."""
    from completer.indentation import next_line_indents
    from completer.syntax import PYTHON

    steps = type_chars(rng, doc, uri, True)
    current = doc.lines[doc.line]
    indents = next_line_indents(current, "\n".join(doc.lines[:doc.line]), PYTHON) if current.strip() else [""]
    indent = rng.choice(indents)
    doc.lines.insert(doc.line + 1, indent + rng.choice(["", "", "", "  "]))
    doc.line, doc.column = doc.line + 1, len(indent)
    return steps + [Step(uri, doc.text(), doc.line, doc.column, "enter")]


OPERATIONS = [
    (lambda r, d, u: type_chars(r, d, u, True), 4), (type_line, 3), (lambda r, d, u: type_chars(r, d, u, False), 3),
    (backspace, 3), (enter, 3), (delete_line_above, 2), (paste_above, 2), (revert, 2), (jump, 2),
    (edit_far_above, 2), (grow_or_shrink, 2), (replace_all, 1), (astral, 2), (huge_paste, 1),
]
SETTINGS = [{"context_tokens": 0, "max_tokens": 24}, {"context_tokens": 128, "max_tokens": 24},
            {"context_tokens": 200, "max_tokens": 16}, {"context_tokens": 96, "max_tokens": 8},
            {"context_tokens": 300, "max_tokens": 40}, {"context_tokens": 0, "max_tokens": 24, "memory_budget_mb": 1}]
"""What the settings change to mid-way: windows the edits cross both ways, and a budget that evicts every document."""


def sequence(seed: int, length: int, documents: int = 2, lines: int = 300,
             settings: list[dict] | None = None) -> list[Step]:
    """A seeded sequence of `length` requests over `documents` interleaved documents of up to `lines` lines at
    first, with the `settings` (default SETTINGS) changing now and then."""
    rng = random.Random(seed)
    docs = {f"file:///fuzz-{seed}-{i}.py": Doc(source_text(rng, rng.randint(lines // 10, lines)))
            for i in range(documents)}
    for doc in docs.values():
        doc.line = rng.randrange(len(doc.lines))
    steps: list[Step] = [Step(uri, doc.text(), doc.line, doc.column, "open") for uri, doc in docs.items()]
    ops, weights = zip(*OPERATIONS)
    while len(steps) < length:
        if rng.random() < 0.05:
            steps.append(Step("", "", 0, 0, "settings", rng.choice(settings or SETTINGS)))
            continue
        uri = rng.choice(list(docs))
        doc = docs[uri]
        doc.save()
        steps += rng.choices(ops, weights)[0](rng, doc, uri)
    return steps[:length]
