"""Differential fuzz of the engine's per-document state (KV cache, token and line memos, window sliding, typing
through, searches ahead): after any seeded edit sequence (tests/cache_fuzz.py), a long-lived engine that saw every
edit answers a cursor as an engine that sees only the final text does. In fp32, where KV reuse is exact (INT8
quantizes activations per call, so a prefill run in pieces differs by noise: test_engine.py). Answers the engine
gives from earlier work by design are checked by their own rules: a typed-through answer is the last answer's
lines trimmed at this cursor; an answer searched ahead is the fresh engine's."""
from __future__ import annotations

import os
import random
from dataclasses import replace
from pathlib import Path

import pytest

from cache_fuzz import Step, sequence
from completer.ahead import answering
from completer.engine import Engine
from completer.text import context_slice, split_lines, text_below
from completer.types import CompletionResult, EngineSettings


def lines_at(result: CompletionResult) -> list[tuple[str, int, int]]:
    return [(s.line, s.start, s.end) for s in result.suggestions]


def check_step(live: Engine, fresh: Engine, step: Step, others: list[str], rng: random.Random,
               answered_with: dict[str, object]) -> str | None:
    """Ask both engines for the step's cursor; a description of the difference, or None. `answered_with` holds,
    per document, the settings its last answer from the model was searched with (the only ones typing through may
    trim it under). Sometimes searches the line after Enter ahead on the live engine afterwards, as the worker does
    at the end of a line."""
    lines = split_lines(step.text)
    before, after = context_slice(lines, step.line, step.column)
    below = text_below(lines, step.line)
    from_ahead = live.answers_from_ahead(step.uri, before, after, below, others)
    state = live.cache.get_quietly(step.uri)
    last = state.last_answer
    got = live.complete(step.uri, step.line, step.column, others=others)
    fresh.close(step.uri)
    fresh.open(step.uri, step.text)
    want = fresh.complete(step.uri, step.line, step.column, others=others)
    if got.model_runs == 0 and not from_ahead and not got.skipped:  # typed through the last answer
        typed_line = lines[step.line][:step.column]
        earlier = {s.line for s in getattr(last, "suggestions", [])}
        wrong = [s for s in got.suggestions if s.line not in earlier or s.line != typed_line + s.text
                 or (s.start, s.end) != (step.column, step.column + len(after))]
        problem = f"typed through to {lines_at(got)}" if wrong else None
        if answered_with.get(step.uri) != answering(live.settings):
            problem = f"typed through an answer of other settings to {lines_at(got)}"
    elif lines_at(got) != lines_at(want) or \
            [s.score for s in got.suggestions] != pytest.approx([s.score for s in want.suggestions], abs=1e-3):
        problem = f"{'ahead' if from_ahead else 'model'}: {lines_at(got)} != fresh {lines_at(want)}"
    else:
        problem = None
    if got.model_runs or from_ahead:
        answered_with[step.uri] = answering(live.settings)
    if not after.strip() and not got.skipped and rng.random() < 0.7:
        live.search_next_line(step.uri, before, below, others)
    return problem


FAST_SETTINGS = [{"context_tokens": 128, "max_tokens": 24}, {"context_tokens": 200, "max_tokens": 16},
                 {"context_tokens": 96, "max_tokens": 8}, {"context_tokens": 160, "memory_budget_mb": 1}]
"""Small windows, each crossed often by the edits, keep a fresh engine's prefill (the fuzz's cost) short."""


def fuzz(bundle: Path, seed: int, length: int, context_tokens: int = 160, settings_list: list[dict] | None = None
         ) -> list[str]:
    """The differences between a long-lived engine and fresh ones over one seeded edit sequence."""
    rng = random.Random(seed)
    settings = EngineSettings(model_path=str(bundle), context_tokens=context_tokens)
    live, fresh = Engine(settings), Engine(settings)
    fresh.typing_through = False
    texts: dict[str, str] = {}
    answered_with: dict[str, object] = {}
    problems = []
    for index, step in enumerate(sequence(seed, length, settings=settings_list or FAST_SETTINGS)):
        if step.kind == "settings":
            live.configure(replace(live.settings, **step.settings))
            fresh.configure(replace(fresh.settings, **step.settings))
            continue
        if step.kind in ("open", "replace") and rng.random() < 0.5:
            live.prefill(step.uri, step.text)  # as the worker does for a document just opened
        elif step.uri in texts and rng.random() < 0.1:
            live.prefill(step.uri, texts[step.uri])  # a background prefill of the text before the last edit
        texts[step.uri] = step.text
        live.update(step.uri, step.text)
        others = [text for uri, text in texts.items() if uri != step.uri]
        problem = check_step(live, fresh, step, others, rng, answered_with)
        if problem:
            problems.append(f"seed {seed} step {index} ({step.kind}, {step.line}:{step.column}): {problem}")
    return problems


SEEDS = int(os.environ.get("CACHE_FUZZ_SEEDS", "1"))
"""How many seeded sequences the fuzz runs: one by default (a few seconds); CACHE_FUZZ_SEEDS=50 for a long run."""


@pytest.mark.parametrize("seed", range(1, SEEDS + 1))
def test_a_long_lived_engine_answers_as_a_fresh_one(fp32_bundle_dir: Path, seed: int):
    assert fuzz(fp32_bundle_dir, seed, 20) == []


def test_an_answer_searched_ahead_replaces_the_blanks_after_the_cursor(engine: Engine):
    """After Enter, blanks an editor left after the cursor are replaced as a fresh search would, and the next
    keystroke types through the answer."""
    uri = "file:///ahead-blanks.py"
    head = "import os\n\n\ndef main():\n    path = os.getcwd()"
    engine.open(uri, head)
    engine.complete(uri, 4, len("    path = os.getcwd()"))
    engine.search_next_line(uri, head)
    engine.update(uri, head + "\n    " + "  ")
    assert engine.answers_from_ahead(uri, head + "\n    ", "  ")
    result = engine.complete(uri, 5, 4)
    assert result.model_runs == 0 and result.suggestions
    assert [(s.start, s.end) for s in result.suggestions] == [(4, 6)] * len(result.suggestions)
    first = result.suggestions[0]
    engine.update(uri, head + "\n    " + first.text[0] + "  ")
    again = engine.complete(uri, 5, 5)
    assert again.model_runs == 0, "the next keystroke types through the answer searched ahead"
    assert again.suggestions[0].line == first.line and again.suggestions[0].end == 7


def test_typing_through_trims_only_answers_of_the_settings_in_force():
    """A keystroke after maxSuggestions went down gets that many lines, not the trimmed lines of before."""
    engine = Engine()
    uri = "file:///settings-through.py"
    text = "import os\n\n\ndef main():\n    return "
    engine.open(uri, text)
    first = engine.complete(uri, 4, len("    return "))
    starts = [s.text[:1] for s in first.suggestions]
    shared = next((c for c in starts if starts.count(c) > 1), None)
    assert shared, f"the test needs two lines that start alike: {first.suggestions}"
    engine.update(uri, text + shared)
    assert engine.complete(uri, 4, len("    return ") + 1).model_runs == 0  # typing through, settings as they were
    engine.update(uri, text)
    engine.complete(uri, 4, len("    return "))
    engine.configure(replace(engine.settings, max_suggestions=1))
    engine.update(uri, text + shared)
    again = engine.complete(uri, 4, len("    return ") + 1)
    assert len(again.suggestions) <= 1 and again.model_runs > 0


def utf16(text: str) -> int:
    """The length of `text` in UTF-16 code units, as LSP positions count."""
    return len(text.encode("utf-16-le")) // 2


def position(text: str, offset: int) -> tuple[int, int]:
    """The LSP position (line, UTF-16 character) of code-point `offset` in `text`."""
    line = text.count("\n", 0, offset)
    return line, utf16(text[text.rfind("\n", 0, offset) + 1:offset])


def incremental_change(old: str, new: str) -> tuple[tuple[int, int], tuple[int, int], str]:
    """The one range of `old` (LSP positions) and its replacement that turn it into `new`, as an editor sends."""
    start = 0
    while start < min(len(old), len(new)) and old[start] == new[start]:
        start += 1
    end = 0
    while end < min(len(old), len(new)) - start and old[-1 - end] == new[-1 - end]:
        end += 1
    return position(old, start), position(old, len(old) - end), new[start:len(new) - end]


def server_lines(client, uri: str, text: str, line: int, column: int) -> list[str]:
    """The lines the server offers at a code-point cursor of `text`, each checked to fit the cursor's line."""
    current = split_lines(text)[line]
    items = client.completion(uri, line, utf16(current[:column]), timeout=60)["result"]["items"]
    for item in items:
        edit = item["textEdit"]
        assert edit["newText"].startswith(current[:column]), (edit, current[:column])
        assert (edit["range"]["start"], edit["range"]["end"]) == ({"line": line, "character": 0},
                                                                  {"line": line, "character": utf16(current)}), edit
    return [item["textEdit"]["newText"] for item in items]


@pytest.mark.parametrize("seed", range(7, 7 + SEEDS))
def test_the_server_answers_incrementally_edited_documents_as_fresh_ones(fp32_bundle_dir: Path, seed: int):
    """Through the real server, with each edit sent as an incremental range in UTF-16 positions: the answer at
    the cursor is that of the final text opened fresh (or the last answer typed through), and every line fits
    the cursor's line as the client has it."""
    from lsp.rawclient import RawClient
    from lsp_support import SERVER_CMD, server_env

    client = RawClient(SERVER_CMD, env=server_env())
    try:
        client.initialize({"completer": {"modelPath": str(fp32_bundle_dir), "searchAhead": False, "openFiles": 0,
                                         "contextTokens": 160}})
        texts: dict[str, str] = {}
        versions: dict[str, int] = {}
        last: dict[str, list[str]] = {}
        steps = [step for step in sequence(seed, 16, lines=120) if step.kind != "settings"]
        for index, step in enumerate(steps):
            if step.uri not in texts:
                client.open(step.uri, step.text)
                versions[step.uri] = 1
            else:
                versions[step.uri] += 1
                start, end, inserted = incremental_change(texts[step.uri], step.text)
                client.change(step.uri, versions[step.uri], start, end, inserted)
            texts[step.uri] = step.text
            got = server_lines(client, step.uri, step.text, step.line, step.column)
            fresh = f"file:///fresh-{index}.py"
            client.open(fresh, step.text)
            want = server_lines(client, fresh, step.text, step.line, step.column)
            client.notify("textDocument/didClose", {"textDocument": {"uri": fresh}})
            typed_through = set(got) <= set(last.get(step.uri, []))
            assert got == want or typed_through, f"seed {seed} step {index} ({step.kind})"
            last[step.uri] = got
    finally:
        client.close()
