"""Engine benchmarks, each comparison measured in one run with A and B alternating per keystroke.

    python scripts/bench_engine.py --out docs/bench_engine.json --svg docs/bench_engine.svg

1. Per-keystroke latency, KV reuse vs full recompute, at 128 and 512 tokens of context and at the full
   window (1,024 positions minus max_tokens + 1: 999 tokens). Each row reports the context it really ran at.
2. At the full window, no search budget vs `--search-budget-ms` (40): latency, searches cut short, and
   keystrokes whose top line changes; the default beam width vs `--beams` (8): latency and ONNX calls;
   and plain beam search, where a line that ends takes its beam's place, vs the beams kept full.
   The model alone vs the document's repeats mixed in, with the whole module above each typed line
   and the rest below it (more than the engine keeps: the repeats search all the clipped text).
   In the same long document, the first keystroke on a new line (after Enter) against the last
   keystroke of the line before it; and the repeats without vs with four other open files (the heads
   of four other long stdlib modules) searched too.
   Also at the full window: each document's KV prefilled in one model run vs in two, INT8 and fp32
   (how much the suggestions depend on the way the text before the cursor arrived).
3. Typing through the last suggestion (no model call).
4. The in-graph beam step vs the same search with the beam step in numpy outside the graph (argpartition).
5. INT8 vs fp32.
6. The engine vs PyTorch eager running the same weights and the same beam search (if torch is installed).
7. One beam step through session.run vs through IO binding with the prefix KV bound as OrtValues.

With `--table FILE` it runs nothing and prints the markdown tables of a result written by `--out`
(docs/benchmarks.md pastes them from docs/bench_engine.json).
With `--only document_repeats`, `--only after_enter` or `--only open_files` it runs that long-document
comparison alone. `--only consensus` runs one more in the same document: the likeliest line first vs
the line the beams agree on most; `--only lines_wanted` a search that waits for as many lines as
there are beams vs one that stops at the lines it will show.
With `--candidate BUNDLE` it only times that bundle against `--bundle` at the full window, typing
the lines `--rounds` times: what a keystroke and one model run cost with another shape. Compare the
time per model run: scripts/grow.py makes a shape that computes what the shipped model does, but
INT8 noise still moves a few searches by a step or two.
With `--against TREE` it only times another checkout of this repository (code and bundle; e.g.
`git worktree add /tmp/old HEAD~1`) against this tree in the long document, typing its lines
`--rounds` times, both versions of the engine in this one process: what a change of code costs or saves.

Keystrokes replay the typing of real lines of a stdlib module: at each keystroke the text before the
cursor grows by one character and the engine is asked for suggestions. Typing through is disabled
except in (2), so every keystroke times the model path. Quote medians: the machine is shared.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.util
import json
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from eval import fp32_bundle  # noqa: E402
from completer.graph import quantize  # noqa: E402
from completer.graph import own_decoder  # noqa: E402
from paths import REPO_ROOT, cache_dir  # noqa: E402

from completer import beam  # noqa: E402
from completer.bundle import DEFAULT_BEAMS, load_bundle  # noqa: E402
from completer.repeats import RepeatMix  # noqa: E402
from completer.engine import MAX_CONTEXT_CHARS, Engine  # noqa: E402
from completer.runtime import Runtime, StepOutput  # noqa: E402
from completer.text import text_below  # noqa: E402
from completer.types import CompletionResult, EngineSettings, ModelError  # noqa: E402

SOURCE = Path(argparse.__file__)  # a long, real, permissively licensed module (PSF)
OPEN_BESIDE = ("optparse", "gettext", "shutil", "tarfile")  # stdlib modules open beside it (open_files)
TYPED_LINES = 3  # lines typed per context size
ENTER_LINES = 60  # lines ended with Enter in the long document


def runs_summary(runs: list[int]) -> dict[str, float]:
    """Model runs per keystroke: median, 95th percentile and most."""
    return {"p50": percentile(runs, 50), "p95": percentile(runs, 95), "max": max(runs)}


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def window_limit(engine: Engine) -> int:
    """Context tokens the engine keeps before its window slides (its max_tokens stay free)."""
    return engine.bundle.context_length - engine.settings.max_tokens - 1


def keystroke_script(engine: Engine, text: str, context_tokens: int) -> list[tuple[str, str]]:
    """(before, typed line) pairs: the cursor at a line start, with `before` sized so that it plus the
    whole typed line hold at most `context_tokens` tokens. Typing never slides the window, so every
    keystroke of the line really runs at that context."""
    context_tokens = min(context_tokens, window_limit(engine))
    lines = text.split("\n")
    script = []
    for index in range(1, len(lines)):
        before = "\n".join(lines[:index]) + "\n"
        if len(engine.tokens.encode(before)) >= context_tokens and len(lines[index].strip()) > 10:
            start = index
            while len(script) < TYPED_LINES and start < len(lines):
                if len(lines[start].strip()) > 10:
                    script.append(("\n".join(lines[:start]) + "\n", lines[start]))
                start += 1
            # half-typed words can take a few more tokens than the finished line: keep a margin
            return [(b[-_chars_for(engine, b, context_tokens - len(engine.tokens.encode(line)) - 8):], line)
                    for b, line in script]
    raise SystemExit(f"{SOURCE} is shorter than {context_tokens} tokens")


def document_script(text: str, typed_lines: int = TYPED_LINES) -> list[tuple[str, str, str]]:
    """(before, typed line, below) with all of the module above each line before the cursor, at least
    MAX_CONTEXT_CHARS of it, and the lines after it below: the engine clips the text above, slides its
    window to the end, and the document's repeats search the whole clipped text and the lines below
    (as much again), about twenty times the window."""
    lines = text.split("\n")
    first = next(index for index in range(len(lines)) if len("\n".join(lines[:index])) >= MAX_CONTEXT_CHARS)
    typed = [index for index in range(first, len(lines)) if len(lines[index].strip()) > 10][:typed_lines]
    return [("\n".join(lines[:index]) + "\n", lines[index], text_below(lines, index, MAX_CONTEXT_CHARS))
            for index in typed]


def _chars_for(engine: Engine, before: str, tokens: int) -> int:
    """Characters (from a line start) at the end of `before` holding as many whole lines as fit in `tokens`."""
    lines = before.split("\n")
    best = 0
    for start in range(len(lines) - 1, -1, -1):
        tail = "\n".join(lines[start:])
        if len(engine.tokens.encode(tail)) > tokens:
            return best
        best = len(tail)
    return len(before)


CONTEXT_SEEN: list[int] = []
"""Context tokens (cached + newly run) of every timed keystroke, to report what was really measured."""
RESULTS_SEEN: dict[str, list[CompletionResult]] = {}
"""Every timed keystroke's result by engine: its ONNX calls (a keystroke's latency is mostly its beam
steps), whether the search budget cut it short, and its top suggestion."""


def replay(engines: dict[str, Engine], script: list[tuple[str, ...]], prepare: dict[str, Callable[[Engine], None]],
           documents: str = "bench", others: list[str] | None = None) -> dict[str, list[float]]:
    """Type each line one character at a time; engines alternate on every keystroke. Each replay that
    should start from fresh caches names its own `documents`: the scripts all begin at the top of the
    same module, so a document reused from another replay would keep its KV for their common prefix,
    computed in other runs (see prefill_chunks). `others`: the texts of other open files, given to every
    engine (one whose open_files is 0 ignores them)."""
    others = others or []
    times: dict[str, list[float]] = {name: [] for name in engines}
    CONTEXT_SEEN.clear()
    RESULTS_SEEN.clear()
    RESULTS_SEEN.update({name: [] for name in engines})
    for n, (before, line, *below) in enumerate(script):  # a third item: the text below the typed line
        uri = f"file:///{documents}-{n}.py"
        under = below[0] if below else ""
        for engine in engines.values():
            engine.complete_text(uri, before, "", below=under, others=others)  # open and warm before typing
        for end in range(1, len(line) + 1):
            for name, engine in engines.items():
                prepare.get(name, lambda e: None)(engine)
                result = engine.complete_text(uri, before + line[:end], "", below=under, others=others)
                times[name].append(result.latency_ms)
                CONTEXT_SEEN.append(result.cached_tokens + result.new_tokens)
                RESULTS_SEEN[name].append(result)
    return times


def compare_settings(engines: dict[str, Engine], script: list[tuple[str, ...]],
                     prepare: dict[str, Callable[[Engine], None]] | None = None, documents: str = "bench",
                     others: list[str] | None = None) -> dict:
    """Two engines alternating per keystroke: latency, ONNX calls, and how many keystrokes get another
    top line (or none) from the second."""
    for e in engines.values():
        e.typing_through = False
    times = replay(engines, script, prepare or {}, documents, others)
    out: dict = {k: summary(v) for k, v in times.items()}
    out["context_tokens"] = context_range()
    a, b = engines
    for name in (a, b):
        runs = [r.model_runs for r in RESULTS_SEEN[name]]
        out[name]["model_runs"] = runs_summary(runs)
        out[name]["ms_per_model_run_p50"] = round(percentile(
            [r.latency_ms / r.model_runs for r in RESULTS_SEEN[name] if r.model_runs], 50), 3)
    top = {name: [r.suggestions[0].line if r.suggestions else None for r in RESULTS_SEEN[name]] for name in (a, b)}
    out["top_line_changed"] = sum(x != y for x, y in zip(top[a], top[b]))
    out["top_line_lost"] = sum(x is not None and y is None for x, y in zip(top[a], top[b]))
    return out


def search_budget(settings: Callable[..., EngineSettings], script: list[tuple[str, str]], budget_ms: int
                  ) -> dict:
    """No budget vs `budget_ms`: the latency tail it removes, how many searches it cuts short, and how
    many keystrokes then get another top line (or none)."""
    budgeted = f"budget_{budget_ms}ms"
    out = compare_settings({"no_budget": Engine(settings()), budgeted: Engine(settings(search_budget_ms=budget_ms))},
                           script)
    out["cut_short"] = sum(r.out_of_time for r in RESULTS_SEEN[budgeted])
    return out


def beam_width(settings: Callable[..., EngineSettings], script: list[tuple[str, str]], beams: int) -> dict:
    """The default beam width vs `beams`: what a wider search costs per keystroke (eval.py measures what
    it buys)."""
    base = Engine(settings())
    return compare_settings({f"beams_{base.beams}": base, f"beams_{beams}": Engine(settings(beams=beams))}, script)


def document_repeats(settings: Callable[..., EngineSettings], script: list[tuple[str, ...]]) -> dict:
    """The model alone vs the document's repeats mixed into each beam step, in a document longer than the
    engine keeps (document_script): what searching the clipped text and mixing cost per keystroke, and how
    many keystrokes get another top line (eval.py measures what it buys)."""
    return compare_settings({"model_alone": Engine(settings(document_repeats=False)),
                             "with_repeats": Engine(settings())}, script, documents="long-document")


def other_open_files(settings: Callable[..., EngineSettings], script: list[tuple[str, ...]]) -> dict:
    """The document's repeats alone vs searching four other open files too (the heads of OPEN_BESIDE), in
    the long document: what the larger search costs per keystroke. The stdlib modules share little with
    argparse, so this times the search, not a gain (eval.py --open-files measures what it buys)."""
    others = [Path(importlib.import_module(name).__file__).read_text() for name in OPEN_BESIDE]
    return compare_settings({"this_file": Engine(settings(open_files=0)),
                             "four_open_files": Engine(settings(open_files=len(others)))}, script,
                            documents="open-files", others=others)


def consensus(settings: Callable[..., EngineSettings], script: list[tuple[str, ...]]) -> dict:
    """The likeliest line first vs the line the beams agree on most (completer/consensus.py), in the long
    document: what choosing it costs per keystroke, and how often it changes the top line (eval.py
    --first-by-score measures what it buys)."""
    return compare_settings({"first_by_score": Engine(settings(first_by_consensus=False)),
                             "first_by_consensus": Engine(settings())}, script)


def lines_wanted(settings: Callable[..., EngineSettings], script: list[tuple[str, ...]]) -> dict:
    """As many suggestions as beams (as every search once waited for that many lines) vs the default
    `max_suggestions`, fewer, at which the search now stops: what waiting for the lines nobody is shown cost."""
    base = Engine(settings())
    every, shown = base.beams, base.settings.max_suggestions
    return compare_settings({f"wait_for_{every}_lines": Engine(settings(max_suggestions=every)),
                             f"wait_for_{shown}_lines": base}, script)


def memory_arena(settings: Callable[..., EngineSettings], script: list[tuple[str, ...]]) -> dict:
    """onnxruntime's CPU memory arena on (its default) vs off (ours) in the long document: the latency per
    keystroke, which allocating each call's buffers afresh could raise."""
    arena, no_arena = Engine(settings()), Engine(settings())
    arena.runtime = Runtime(arena.bundle, device="cpu", threads=arena.runtime.threads, memory_arena=True)
    no_arena.runtime = Runtime(no_arena.bundle, device="cpu", threads=no_arena.runtime.threads, memory_arena=False)
    return compare_settings({"arena": arena, "no_arena": no_arena}, script)


def after_enter(settings: Callable[..., EngineSettings], script: list[tuple[str, str, str]]) -> dict:
    """In a long document (document_script), the first keystroke on a new line against the last keystroke of
    the line before it, alternating line by line: the line's last character typed (with the rest of the
    line already typed and cached), then Enter, which puts the cursor on a new line at the next line's
    indentation, so the typed line becomes context and the search starts a whole line. A second engine
    does the same, but between the two keystrokes searches the next line ahead, untimed, as the server's
    worker does while it waits (Engine.search_next_line, at the indentation it guesses): its Enter is
    answered from that search when the guess was right."""
    plain, ahead = Engine(settings()), Engine(settings())
    kinds = ("last_character", "after_enter", "after_enter_searched_ahead")
    times: dict[str, list[float]] = {kind: [] for kind in kinds}
    runs: dict[str, list[int]] = {kind: [] for kind in kinds}
    ahead_ms: list[float] = []
    for engine in (plain, ahead):
        engine.typing_through = False
    for n, (before, line, below) in enumerate(script):
        uri = f"file:///enter-{n}.py"
        following = below.split("\n", 1)[0]
        indent = following[:len(following) - len(following.lstrip())]
        for engine in (plain, ahead):
            engine.complete_text(uri, before + line[:-1], "", below=below)  # open, warm, the line all but typed
            result = engine.complete_text(uri, before + line, "", below=below)
            if engine is plain:
                times["last_character"].append(result.latency_ms)
                runs["last_character"].append(result.model_runs)
            else:
                started = time.perf_counter()
                engine.search_next_line(uri, before + line, below)
                ahead_ms.append((time.perf_counter() - started) * 1000)
            kind = "after_enter" if engine is plain else "after_enter_searched_ahead"
            result = engine.complete_text(uri, before + line + "\n" + indent, "", below=below)
            times[kind].append(result.latency_ms)
            runs[kind].append(result.model_runs)
    out: dict = {kind: summary(values) for kind, values in times.items()}
    for kind in kinds:
        out[kind]["model_runs"] = runs_summary(runs[kind])
    out["answered_from_the_search_ahead"] = sum(r == 0 for r in runs["after_enter_searched_ahead"])
    out["search_ahead"] = summary(ahead_ms)
    return out


def full_beams(settings: Callable[..., EngineSettings], script: list[tuple[str, str]]) -> dict:
    """Plain beam search, where a line that ends takes its beam's place (one candidate per beam each
    step), vs the engine's search, which keeps the beams full (twice as many candidates): what keeping
    them full costs per keystroke (eval.py --paired-with measures what it buys)."""
    def candidates(per_beam: int) -> Callable[[Engine], None]:
        return lambda engine: setattr(beam, "CANDIDATES_PER_BEAM", per_beam)

    kept = beam.CANDIDATES_PER_BEAM
    try:
        return compare_settings({"plain_beams": Engine(settings()), "full_beams": Engine(settings())}, script,
                                {"plain_beams": candidates(1), "full_beams": candidates(kept)})
    finally:
        beam.CANDIDATES_PER_BEAM = kept


def prefill_chunks(model_path: str, threads: int, script: list[tuple[str, str]]) -> dict:
    """The same keystrokes with each document's KV prefilled in one model run vs in two (its first half
    when opened, the rest when extended, as when a file grows or the cache kept an earlier version's
    prefix). Dynamic INT8 quantizes a run's activations with one scale per tensor, so a token's KV
    depends on which tokens shared its run; an fp32 graph gives the same KV either way."""
    settings = EngineSettings(model_path=model_path, threads=threads)
    one, two = Engine(settings), Engine(settings)
    second_runs = []
    for n, (before, _) in enumerate(script):
        cut = before.rfind("\n", 0, len(before) // 2) + 1  # a line start near the middle
        two.complete_text(f"file:///chunks-{n}.py", before[:cut], "")
        opened = two.complete_text(f"file:///chunks-{n}.py", before, "")
        second_runs.append({"reused": opened.cached_tokens, "new": opened.new_tokens})
    out = compare_settings({"one_run": one, "two_runs": two}, script, documents="chunks")
    out["two_runs"]["prefill_second_run"] = second_runs
    out["model_runs_changed"] = sum(a.model_runs != b.model_runs
                                    for a, b in zip(RESULTS_SEEN["one_run"], RESULTS_SEEN["two_runs"]))
    return out


def candidate(settings: Callable[..., EngineSettings], bundle: Path, text: str, rounds: int) -> dict:
    """The shipped bundle vs another (a grown shape, say) on the full-window lines typed `rounds` times:
    latency, and the time per model run, which does not depend on how many steps each search took."""
    base = Engine(settings())
    other = Engine(replace(settings(), model_path=str(bundle)))
    out = compare_settings({"bundle": base, "candidate": other},
                           keystroke_script(base, text, window_limit(base)) * rounds)
    out["ratio_per_model_run_p50"] = round(out["candidate"]["ms_per_model_run_p50"]
                                           / out["bundle"]["ms_per_model_run_p50"], 3)
    out["bundle_path"], out["candidate_path"] = settings().model_path, str(bundle)
    return out


def engine_of_tree(tree: Path, threads: int) -> Engine:
    """An engine built by another checkout's own `completer` package (a `git worktree` of an earlier
    commit, say) over that checkout's bundle, imported beside this tree's under another name: the package
    imports itself relatively, so both versions of the code run in this one process."""
    name = "completer_of_" + hashlib.sha256(str(tree.resolve()).encode()).hexdigest()[:12]
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, tree / "completer" / "__init__.py",
                                                      submodule_search_locations=[str(tree / "completer")])
        if spec is None or spec.loader is None:
            raise SystemExit(f"{tree} holds no completer package")
        sys.modules[name] = module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as exc:  # another checkout's code: whatever it raises, name it in one line
            del sys.modules[name]
            raise SystemExit(f"{tree}: its completer package does not import ({type(exc).__name__}: {exc})")
    try:
        settings = importlib.import_module(f"{name}.types").EngineSettings
        engine_class = importlib.import_module(f"{name}.engine").Engine
        return engine_class(settings(model_path=str(tree / "models" / "python-small"), threads=threads))
    except (ImportError, AttributeError, TypeError) as exc:
        raise SystemExit(f"{tree}: its engine is not built as this benchmark builds one, "
                         f"Engine(EngineSettings(model_path=..., threads=...)) ({type(exc).__name__}: {exc})")


def against_tree(settings: Callable[..., EngineSettings], tree: Path, script: list[tuple[str, ...]]) -> dict:
    """Another checkout's code and bundle vs this tree's, alternating per keystroke (in the long document,
    document_script, typed `--rounds` times): what a change of code costs or saves, measured in one run.
    Also how many keystrokes ran the model another number of times, or got another top line."""
    other, this = engine_of_tree(tree, settings().threads), Engine(settings())
    try:
        out = compare_settings({"other_tree": other, "this_tree": this}, script, documents="against")
    except (AttributeError, TypeError) as exc:
        raise SystemExit(f"{tree}: its engine cannot be driven as this tree's is; the two checkouts' engine APIs "
                         f"differ ({type(exc).__name__}: {exc})")
    runs = {name: [r.model_runs for r in RESULTS_SEEN[name]] for name in ("other_tree", "this_tree")}
    out["model_runs_changed"] = sum(a != b for a, b in zip(runs["other_tree"], runs["this_tree"]))
    for stat in ("p50_ms", "p95_ms", "mean_ms"):
        out[f"ratio_{stat.removesuffix('_ms')}"] = round(out["this_tree"][stat] / out["other_tree"][stat], 3)
    out["other_tree_path"] = str(tree)
    return out


def write_results(results: dict, out: Path | None) -> None:
    """The results with the command that produced them, as JSON in `out` (if given)."""
    results["command"] = "python scripts/bench_engine.py " + " ".join(sys.argv[1:])
    if out:
        out.write_text(json.dumps(results, indent=1) + "\n")


def _runs(entry: dict) -> str:
    """Model runs per keystroke as `p50 / p95 / max`."""
    runs = entry.get("model_runs")
    return f"{runs['p50']:g} / {runs['p95']:.1f} / {runs['max']}" if runs else ""


def _pair(entry: dict, rows: dict[str, str], extra=None, unit: str = "keystrokes") -> list[str]:
    """Two alternating variants as rows of p50, p95, mean (and model runs per keystroke, where recorded),
    and their ratios."""
    runs = all("model_runs" in entry[key] for key in rows)
    lines = ["| | p50 | p95 | mean |" + (" model runs per keystroke p50 / p95 / max |" if runs else ""),
             "|---|---:|---:|---:|" + ("---|" if runs else "")]
    for key, label in rows.items():
        e = entry[key]
        lines.append(f"| {label} | {e['p50_ms']:.2f} ms | {e['p95_ms']:.2f} ms | {e['mean_ms']:.2f} ms |"
                     + (f" {_runs(e)} |" if runs else ""))
    a, b = (entry[k] for k in rows)
    lines.append(f"\n{list(rows.values())[1]} / {list(rows.values())[0]}: p50 {b['p50_ms'] / a['p50_ms']:.2f}×, "
                 f"p95 {b['p95_ms'] / a['p95_ms']:.2f}× ({a['n']} {unit} each"
                 + (f", context {entry['context_tokens']['min']}–{entry['context_tokens']['max']} tokens"
                    if "context_tokens" in entry else "") + ")" + (extra or "") + ".")
    return lines


def tables(results: dict) -> str:
    """The markdown tables of docs/benchmarks.md from a result written by --out, one section per entry."""
    out = [f"Command: `{results.get('command', '?')}`"]
    contexts = sorted((k for k in results if k.startswith("context_")), key=lambda k: int(k.split("_")[1]))
    if contexts:
        out += ["", "#### Per keystroke: KV reuse vs full recompute", "",
                "| context (tokens, min–max) | KV reuse p50 | KV reuse p95 | recompute p50 | recompute p95 | "
                "speed-up (p50) | model runs per keystroke p50 / p95 (KV reuse) |",
                "|---|---:|---:|---:|---:|---:|---|"]
        for k in contexts:
            r = results[k]
            runs = r["kv_reuse_model_runs"]
            reuse, recompute = r["kv_reuse"], r["recompute"]
            out.append(f"| {r['context_tokens']['min']}–{r['context_tokens']['max']} | {reuse['p50_ms']:.2f} ms | "
                       f"{reuse['p95_ms']:.2f} ms | {recompute['p50_ms']:.2f} ms | {recompute['p95_ms']:.2f} ms | "
                       f"{r['speedup_p50']:.2f}× | {runs['p50']:g} / {runs['p95']:.1f} |")
    if "search_budget" in results:
        r = results["search_budget"]
        budget = next(k for k in r if k.startswith("budget_"))
        out += ["", "#### A time budget for the search", ""]
        out += _pair(r, {"no_budget": "no budget (default)", budget: f"`searchBudgetMs` {budget[7:-2]}"},
                     f"; searches cut short: {r['cut_short']}, top line changed: {r['top_line_changed']}, "
                     f"left with no line: {r['top_line_lost']}")
    if "beam_width" in results:
        r = results["beam_width"]
        other = next(k for k in r if k.startswith("beams_") and k != "beams_4")
        out += ["", "#### Beam width", ""]
        out += _pair(r, {"beams_4": "4 beams (default)", other: f"{other[6:]} beams"},
                     f"; top line changed: {r['top_line_changed']}")
    if "full_beams" in results:
        r = results["full_beams"]
        out += ["", "#### Keeping the beams full", ""]
        out += _pair(r, {"plain_beams": "plain beams", "full_beams": "beams kept full (shipped)"},
                     f"; top line changed: {r['top_line_changed']}")
    if "document_repeats" in results:
        r = results["document_repeats"]
        out += ["", "#### The document's repeats (a long document)", ""]
        out += _pair(r, {"model_alone": "model alone", "with_repeats": "with the repeats (default)"},
                     f"; ms per model run p50: {r['model_alone']['ms_per_model_run_p50']:.2f} vs "
                     f"{r['with_repeats']['ms_per_model_run_p50']:.2f}; top line changed: {r['top_line_changed']}")
    if "prefill_chunks" in results:
        out += ["", "#### Prefill in one run or two", "",
                "| bundle | model runs per keystroke p50 / p95 / max, one run | the same, two runs | "
                "keystrokes whose number of model runs changed | keystrokes whose top line changed |",
                "|---|---|---|---:|---:|"]
        for name, r in results["prefill_chunks"].items():
            n = r["one_run"]["n"]
            out.append(f"| {'INT8 (shipped)' if name == 'int8' else name} | {_runs(r['one_run'])} | "
                       f"{_runs(r['two_runs'])} | {r['model_runs_changed']} of {n} | {r['top_line_changed']} of {n} |")
    if "typing_through" in results and results["typing_through"].get("n"):
        r = results["typing_through"]
        out += ["", "#### Typing through the last suggestion", "", "| | p50 | p95 | n |", "|---|---:|---:|---:|",
                f"| a keystroke that continues the previous suggestion (no model call) | {r['p50_ms']:.2f} ms | "
                f"{r['p95_ms']:.2f} ms | {r['n']} |"]
    if "beam_step" in results:
        out += ["", "#### The beam step in the graph vs in numpy outside it", ""]
        out += _pair(results["beam_step"], {"in_graph": "beam step inside the ONNX graph (shipped)",
                                            "numpy_outside": "beam step in numpy outside the graph"})
    if "precision" in results:
        out += ["", "#### INT8 vs fp32", ""]
        out += _pair(results["precision"], {"int8": "INT8 (shipped)", "fp32": "fp32"})
    if "pytorch" in results:
        out += ["", "#### The engine vs PyTorch eager", ""]
        out += _pair(results["pytorch"], {"engine": "engine (onnxruntime, INT8, beam step in the graph)",
                                          "pytorch_eager": "PyTorch eager, fp32, the same beam search"})
    if "io_binding" in results:
        out += ["", "#### IO binding (one 4-beam step)", ""]
        out += _pair(results["io_binding"], {"session_run": "`session.run` with numpy inputs",
                                             "io_binding": "IO binding, the prefix KV bound once as OrtValues"},
                     unit="rounds")
    if "against" in results:
        r = results["against"]
        out += ["", "#### This tree against another checkout", ""]
        out += _pair(r, {"other_tree": f"the other checkout (`{r.get('other_tree_path', '?')}`)",
                         "this_tree": "this tree"},
                     f"; ms per model run p50: {r['other_tree']['ms_per_model_run_p50']:.2f} vs "
                     f"{r['this_tree']['ms_per_model_run_p50']:.2f}; top line changed: {r['top_line_changed']}; "
                     f"number of model runs changed: {r['model_runs_changed']}")
    if "candidate" in results:
        r = results["candidate"]
        out += ["", "#### Another bundle at the full window (`--candidate`)", ""]
        named = {key: f"`--{key}`" + (f" (`{r[key + '_path']}`)" if key + "_path" in r else "")
                 for key in ("bundle", "candidate")}  # results written before the paths were recorded lack them
        out += _pair(r, named,
                     f"; ms per model run p50: {r['bundle']['ms_per_model_run_p50']:.2f} vs "
                     f"{r['candidate']['ms_per_model_run_p50']:.2f} ({r['ratio_per_model_run_p50']:.2f}×); "
                     f"top line changed: {r['top_line_changed']}")
    if "memory_arena" in results:
        r = results["memory_arena"]
        out += ["", "#### onnxruntime's CPU memory arena (a long document)", ""]
        out += _pair(r, {"arena": "arena on (onnxruntime's default)", "no_arena": "arena off (ours)"},
                     extra=f"; top line changed: {r['top_line_changed']}")
    return "\n".join(out)


def context_range() -> dict[str, int]:
    """min/median/max context tokens over the last replay's keystrokes."""
    return {"min": min(CONTEXT_SEEN), "median": int(statistics.median(CONTEXT_SEEN)), "max": max(CONTEXT_SEEN)}


def fast_numpy_beam_step(logits: np.ndarray, scores: np.ndarray, allowed: np.ndarray, k: int,
                         repeats: RepeatMix | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """reference_beam.beam_step as a tuned numpy client would write it: argpartition for each beam's
    top k instead of a full sort of the vocabulary (ties may come out in another order), and the
    document's repeats mixed in only at the tokens they name, as the graph does."""
    logits = logits.astype(np.float32, copy=False)
    shifted = logits - logits.max(axis=1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))  # [B, V]
    if repeats is not None and repeats.probs.any():
        columns = np.broadcast_to(repeats.tokens, (logp.shape[0], repeats.tokens.shape[1]))  # [B, M]
        share = repeats.model_share[:, None]  # [1 or B, 1]
        at = np.take_along_axis(logp, columns, axis=1)  # [B, M]
        with np.errstate(divide="ignore"):
            mixed = np.where(repeats.probs > 0, np.log(np.exp(at) * share + repeats.probs), at + np.log(share))
        logp = logp + np.log(share)
        np.put_along_axis(logp, columns, mixed.astype(np.float32), axis=1)
    if not allowed.all():
        logp = np.where(allowed, logp, -np.inf)
    total = logp + scores[:, None]  # [B, V]
    row_idx = np.argpartition(-total, k - 1, axis=1)[:, :k]  # [B, K], unordered
    row_vals = np.take_along_axis(total, row_idx, axis=1)
    flat_vals, flat_idx = row_vals.reshape(-1), row_idx.reshape(-1)
    best = np.argsort(-flat_vals, kind="stable")[:k]  # [K]
    return flat_idx[best].astype(np.int64), (best // k).astype(np.int64), flat_vals[best]


def summary(times: list[float]) -> dict[str, float]:
    return {"p50_ms": round(percentile(times, 50), 2), "p95_ms": round(percentile(times, 95), 2),
            "mean_ms": round(statistics.mean(times), 2), "n": len(times)}


# --- alternative runtimes driven by the very same beam search -------------------------------------
class NumpyBeamRuntime(Runtime):
    """The decoder graph without the candidates step; the beam step runs in numpy outside the graph."""

    def __init__(self, bundle, model_path: Path, threads: int) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        # before Runtime's own init, whose check of the last position runs a call through run_batch
        self.logits_session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
        super().__init__(bundle, threads=threads)

    def run_batch(self, calls, preemption=None):
        return [self._run_numpy(call) for call in calls]

    def _run_numpy(self, call):
        feed, _, _ = self.slot_feed([call], 1)
        wanted = {i.name for i in self.logits_session.get_inputs()}
        self.calls += 1
        out = self._run_feed(self.logits_session, {k: v for k, v in feed.items() if k in wanted})
        scores = call.scores if call.scores is not None else np.zeros(call.rows, np.float32)
        allowed = call.allowed if call.allowed is not None else np.ones((1, self.vocab_size), bool)
        tokens, parents, new_scores = fast_numpy_beam_step(out["logits"], scores, allowed, call.num_beams,
                                                           call.repeats)
        present = [(out[f"present_key_{i}"], out[f"present_value_{i}"]) for i in range(self.n_layer)]
        return StepOutput(present=present, tokens=tokens, parents=parents, scores=new_scores)


class TorchRuntime(Runtime):
    """The same computation in PyTorch eager: shared prefix, per-beam suffix, beam step with topk."""

    def __init__(self, bundle, weights: dict, config: dict, threads: int) -> None:
        import torch

        torch.set_num_threads(max(1, threads))
        self.torch = torch  # all before Runtime's own init, whose check of the last position runs a call
        self.w = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in weights.items()}
        self.cfg = config
        super().__init__(bundle, threads=threads)

    def run_batch(self, calls, preemption=None):
        return [self.run_torch(c.input_ids, c.position, c.prefix, c.past if c.past is not None else
                               self.empty_past(c.rows), c.scores, c.allowed, c.num_beams, c.repeats) for c in calls]

    def run_torch(self, input_ids, position, prefix, past, scores=None, allowed=None, num_beams=1, repeats=None):
        torch, w = self.torch, self.w
        F = torch.nn.functional
        H, C = self.cfg["n_head"], self.cfg["n_embd"]
        D = C // H
        with torch.inference_mode():
            ids = torch.from_numpy(input_ids.astype(np.int64))
            B, S = ids.shape
            x = w["wte.weight"][ids] + w["wpe.weight"][position:position + S]  # [B, S, C]
            T = past[0][0].shape[2]
            rows = torch.arange(S)[:, None] + T
            causal = torch.where(torch.arange(T + S)[None, :] <= rows, 0.0, float("-inf"))  # [S, T+S]
            present = []
            for layer in range(self.n_layer):
                p = f"blocks.{layer}"
                h = F.layer_norm(x, (C,), w[f"{p}.ln_1.weight"], w[f"{p}.ln_1.bias"])
                q, k, v = (h @ w[f"{p}.attn.qkv.weight"].T).split(C, dim=2)
                q, k, v = (t.view(B, S, H, D).transpose(1, 2) for t in (q, k, v))  # [B, H, S, D]
                q = q / D ** 0.5
                k_all = torch.cat([torch.from_numpy(past[layer][0]), k], dim=2)  # [B, H, T+S, D]
                v_all = torch.cat([torch.from_numpy(past[layer][1]), v], dim=2)
                pk, pv = (torch.from_numpy(a) for a in prefix[layer])  # [1, H, D, P], [1, H, P, D]
                att = torch.softmax(torch.cat([q @ pk, q @ k_all.transpose(2, 3) + causal], dim=3), dim=3)
                P = pk.shape[3]
                y = att[..., :P] @ pv + att[..., P:] @ v_all  # [B, H, S, D]
                x = x + y.transpose(1, 2).reshape(B, S, C) @ w[f"{p}.attn.proj.weight"].T
                h = F.layer_norm(x, (C,), w[f"{p}.ln_2.weight"], w[f"{p}.ln_2.bias"])
                x = x + F.gelu(h @ w[f"{p}.mlp.fc.weight"].T) @ w[f"{p}.mlp.proj.weight"].T
                present.append((k_all, v_all))
            last = F.layer_norm(x[:, -1], (C,), w["ln_f.weight"], w["ln_f.bias"])
            logp = torch.log_softmax(last @ w["wte.weight"].T, dim=-1)  # [B, V]
            if repeats is not None and repeats.probs.any():
                repeat_probs = torch.from_numpy(repeats.dense(logp.shape[1]))
                model_share = torch.from_numpy(repeats.model_share)
                mixed = torch.log(logp.exp() * model_share[:, None] + repeat_probs)
                logp = torch.where(repeat_probs > 0, mixed, logp + model_share.log()[:, None])
            if allowed is not None:
                logp = logp.masked_fill(~torch.from_numpy(allowed), float("-inf"))
            total = logp + torch.from_numpy(scores if scores is not None else np.zeros(B, np.float32))[:, None]
            row_vals, row_idx = total.topk(num_beams, dim=1)
            best_vals, best_pos = row_vals.reshape(-1).topk(num_beams)
            parents = best_pos // num_beams
            tokens = row_idx.reshape(-1)[best_pos]
            beam_kv = [(k[parents].numpy(), v[parents].numpy()) for k, v in present]
        self.calls += 1
        return StepOutput(present=[(k.numpy(), v.numpy()) for k, v in present], tokens=tokens.numpy(),
                          parents=parents.numpy(), scores=best_vals.numpy(), beam_kv=beam_kv)


def io_binding_step(engine: Engine, rounds: int = 300) -> dict[str, dict[str, float]]:
    """One 4-beam step over a ~1,000-token prefix: the runtime's plain session.run path vs its IO-binding
    path (the one CUDA uses), alternating."""
    import time

    rt = engine.runtime
    h, d, p, t, b = rt.n_kv_head, rt.head_dim, engine.bundle.context_length - 32, 8, 4
    rng = np.random.default_rng(0)
    prefix = [(rng.standard_normal((1, h, d, p), np.float32), rng.standard_normal((1, h, p, d), np.float32))
              for _ in range(rt.n_layer)]
    past = [(rng.standard_normal((b, h, t, d), np.float32), rng.standard_normal((b, h, t, d), np.float32))
            for _ in range(rt.n_layer)]
    ids = np.ones((b, 1), np.int64)
    runtimes = {"session_run": Runtime(engine.bundle, device="cpu", threads=rt.threads, io_binding=False),
                "io_binding": Runtime(engine.bundle, device="cpu", threads=rt.threads, io_binding=True)}
    times: dict[str, list[float]] = {name: [] for name in runtimes}
    for _ in range(rounds):
        for name, runtime in runtimes.items():
            start = time.perf_counter()
            runtime.run(ids, p + t, prefix, past, scores=np.zeros(b, np.float32), num_beams=b)
            times[name].append((time.perf_counter() - start) * 1000)
    return {k: summary(v) for k, v in times.items()}


def no_cache(engine: Engine) -> None:
    for uri in engine.cache.uris():
        engine.cache.drop(uri)


def svg_bars(groups: dict[str, dict[str, float]], title: str) -> str:
    """A dependency-free horizontal bar chart of p50 latencies."""
    rows = [(g, name, value) for g, series in groups.items() for name, value in series.items()]
    width, bar_h, left = 720, 18, 300
    top = 40
    peak = max(v for _, _, v in rows) or 1.0
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{top + len(rows) * (bar_h + 6) + 20}"'
             ' font-family="sans-serif" font-size="12">',
             f'<text x="10" y="22" font-size="15" font-weight="bold">{title}</text>']
    for i, (group, name, value) in enumerate(rows):
        y = top + i * (bar_h + 6)
        length = (width - left - 80) * value / peak
        colour = "#4a7ebb" if i % 2 == 0 else "#e08a3c"
        parts.append(f'<text x="10" y="{y + 13}">{group}: {name}</text>')
        parts.append(f'<rect x="{left}" y="{y}" width="{length:.1f}" height="{bar_h}" fill="{colour}"/>')
        parts.append(f'<text x="{left + length + 5:.1f}" y="{y + 13}">{value:.2f} ms</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", type=Path, default=REPO_ROOT / "models" / "python-small")
    parser.add_argument("--fp32-onnx", type=Path, default=None)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--contexts", default="128,512,1024")
    parser.add_argument("--search-budget-ms", type=int, default=40,
                        help="compare no budget with this searchBudgetMs at the full window (0: skip)")
    parser.add_argument("--beams", type=int, default=8,
                        help="compare the default beam width with this one at the full window (0: skip)")
    parser.add_argument("--candidate", type=Path, default=None,
                        help="only time this other bundle (a grown shape, say) against --bundle at the full window")
    parser.add_argument("--against", type=Path, default=None,
                        help="only time another checkout's code and bundle (e.g. `git worktree add /tmp/old HEAD~1`) "
                             "against this tree's in the long document")
    parser.add_argument("--rounds", type=int, default=3,
                        help="with --candidate or --against: how many times to type the lines")
    parser.add_argument("--only", default=None,
                        choices=("document_repeats", "after_enter", "open_files", "consensus", "lines_wanted",
                                 "memory_arena"),
                        help="run only this long-document comparison")
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON")
    parser.add_argument("--svg", type=Path, default=None, help="write a bar chart of the p50s")
    parser.add_argument("--table", type=Path, default=None,
                        help="print the markdown tables of a result written before by --out, and run nothing")
    args = parser.parse_args()
    if args.table:
        try:
            print(tables(json.loads(args.table.read_text(encoding="utf-8"))))
        except (OSError, ValueError, KeyError) as error:
            parser.error(f"--table {args.table}: {error}")
        return
    if args.beams:
        try:
            EngineSettings(beams=args.beams).validate()  # the engine's own range, with its message
        except ValueError as error:
            parser.error(str(error))
        if args.beams == DEFAULT_BEAMS:
            parser.error(f"--beams must differ from the default, {DEFAULT_BEAMS} (0 skips the comparison)")
    if args.candidate and args.against:
        parser.error("--candidate and --against are two separate comparisons: give one")
    if args.against and not (args.against / "completer" / "__init__.py").is_file():
        parser.error(f"--against {args.against}: no completer package there (a checkout of this repository?)")
    if args.candidate or args.against:
        if args.svg:
            parser.error("--svg charts the full benchmark; --candidate and --against write only --out")
        if args.rounds < 1:
            parser.error("--rounds must be at least 1")
        for bundle in (args.bundle, args.candidate or args.against / "models" / "python-small"):
            try:
                load_bundle(bundle)  # a missing or corrupt bundle is refused before any timing
            except ModelError as error:
                parser.error(str(error))
    settings = lambda **kw: EngineSettings(model_path=str(args.bundle), threads=args.threads, **kw)  # noqa: E731
    text = SOURCE.read_text()
    results: dict[str, dict] = {}
    plot: dict[str, dict[str, float]] = {}

    if args.only:
        if args.svg or args.candidate or args.against:
            parser.error("--only writes only --out")
        compare = {"document_repeats": lambda: document_repeats(settings, document_script(text)),
                   "after_enter": lambda: after_enter(settings, document_script(text, ENTER_LINES)),
                   "open_files": lambda: other_open_files(settings, document_script(text)),
                   "consensus": lambda: consensus(settings, document_script(text)),
                   "lines_wanted": lambda: lines_wanted(settings, document_script(text)),
                   "memory_arena": lambda: memory_arena(settings, document_script(text))}[args.only]
        results[args.only] = compare()
        print(f"{args.only}: {json.dumps(results[args.only])}", flush=True)
        write_results(results, args.out)
        return

    if args.against:
        results["against"] = against_tree(settings, args.against, document_script(text) * args.rounds)
        print(f"against: {json.dumps(results['against'])}", flush=True)
        write_results(results, args.out)
        return

    if args.candidate:
        results["candidate"] = candidate(settings, args.candidate, text, args.rounds)
        print(f"candidate: {json.dumps(results['candidate'])}", flush=True)
        write_results(results, args.out)
        return

    reuse, recompute = Engine(settings()), Engine(settings())
    for e in (reuse, recompute):
        e.typing_through = False
    for n in [int(c) for c in args.contexts.split(",")]:
        script = keystroke_script(reuse, text, n)
        times = replay({"kv_reuse": reuse, "recompute": recompute}, script, {"recompute": no_cache},
                       documents=f"context-{n}")
        results[f"context_{n}"] = {k: summary(v) for k, v in times.items()}
        results[f"context_{n}"]["context_tokens"] = context_range()
        runs = [r.model_runs for r in RESULTS_SEEN["kv_reuse"]]
        results[f"context_{n}"]["kv_reuse_model_runs"] = runs_summary(runs)
        results[f"context_{n}"]["speedup_p50"] = round(results[f"context_{n}"]["recompute"]["p50_ms"]
                                                       / results[f"context_{n}"]["kv_reuse"]["p50_ms"], 2)
        plot[f"{results[f'context_{n}']['context_tokens']['median']} tokens"] = {
            k: results[f"context_{n}"][k]["p50_ms"] for k in ("kv_reuse", "recompute")}
        print(f"context {n}: {json.dumps(results[f'context_{n}'])}", flush=True)

    long_script = keystroke_script(reuse, text, window_limit(reuse))  # the full window
    if args.search_budget_ms:
        results["search_budget"] = search_budget(settings, long_script, args.search_budget_ms)
        print(f"search budget: {json.dumps(results['search_budget'])}", flush=True)
    if args.beams:
        results["beam_width"] = beam_width(settings, long_script, args.beams)
        print(f"beam width: {json.dumps(results['beam_width'])}", flush=True)
    results["full_beams"] = full_beams(settings, long_script)
    print(f"full beams: {json.dumps(results['full_beams'])}", flush=True)
    results["document_repeats"] = document_repeats(settings, document_script(text))
    print(f"document repeats: {json.dumps(results['document_repeats'])}", flush=True)
    results["after_enter"] = after_enter(settings, document_script(text, ENTER_LINES))
    print(f"after Enter: {json.dumps(results['after_enter'])}", flush=True)
    results["open_files"] = other_open_files(settings, document_script(text))
    print(f"open files: {json.dumps(results['open_files'])}", flush=True)
    results["prefill_chunks"] = {"int8": prefill_chunks(str(args.bundle), args.threads, long_script)}
    print(f"prefill chunks, INT8: {json.dumps(results['prefill_chunks']['int8'])}", flush=True)
    through = Engine(settings())
    times = []
    for n, (before, line) in enumerate(long_script):
        uri = f"file:///through-{n}.py"
        through.complete_text(uri, before, "")
        for end in range(1, len(line) + 1):
            result = through.complete_text(uri, before + line[:end], "")
            if result.model_runs == 0 and result.suggestions:
                times.append(result.latency_ms)
    results["typing_through"] = summary(times) if times else {"n": 0}
    print(f"typing through: {json.dumps(results['typing_through'])}", flush=True)

    fp32_path = args.fp32_onnx or cache_dir() / "export" / f"{args.bundle.name}.fp32.onnx"
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        from safetensors.numpy import load_file

        weights = load_file(str(args.bundle / "training" / "model.safetensors"))
        config = json.loads((args.bundle / "training" / "config.json").read_text())
        onnx.save(own_decoder(weights, config, logits_only=True), str(tmp / "logits_fp32.onnx"))
        quantize(tmp / "logits_fp32.onnx", tmp / "logits_int8.onnx")
        outside = Engine(settings())
        outside.runtime = NumpyBeamRuntime(reuse.bundle, tmp / "logits_int8.onnx", args.threads)
        engines = {"in_graph": Engine(settings()), "numpy_outside": outside}
        for e in engines.values():
            e.typing_through = False
        times = replay(engines, long_script, {})
        results["beam_step"] = {k: summary(v) for k, v in times.items()}
        results["beam_step"]["context_tokens"] = context_range()
        plot["beam step (full window)"] = {k: results["beam_step"][k]["p50_ms"] for k in times}
        print(f"beam step: {json.dumps(results['beam_step'])}", flush=True)

        if fp32_path.exists():
            engines = {"int8": Engine(settings()), "fp32": Engine(EngineSettings(
                model_path=str(fp32_bundle(args.bundle, fp32_path, tmp / "fp32")), threads=args.threads))}
            for e in engines.values():
                e.typing_through = False
            times = replay(engines, long_script, {})
            results["precision"] = {k: summary(v) for k, v in times.items()}
            results["precision"]["context_tokens"] = context_range()
            plot["precision (full window)"] = {k: results["precision"][k]["p50_ms"] for k in times}
            print(f"precision: {json.dumps(results['precision'])}", flush=True)
            results["prefill_chunks"]["fp32"] = prefill_chunks(str(tmp / "fp32"), args.threads, long_script)
            print(f"prefill chunks, fp32: {json.dumps(results['prefill_chunks']['fp32'])}", flush=True)
        else:  # the fp32 graph is export.py's by-product, absent on a machine that never exported
            print(f"no fp32 ONNX at {fp32_path} (scripts/export.py writes it there; or --fp32-onnx): "
                  "skipping INT8 vs fp32", flush=True)

        try:
            import torch  # noqa: F401
        except ImportError:
            print("torch not installed: skipping the PyTorch eager comparison")
        else:
            eager = Engine(settings())
            eager.runtime = TorchRuntime(reuse.bundle, weights, config, args.threads or 2)
            engines = {"engine": Engine(settings()), "pytorch_eager": eager}
            for e in engines.values():
                e.typing_through = False
            times = replay(engines, long_script, {})
            results["pytorch"] = {k: summary(v) for k, v in times.items()}
            results["pytorch"]["context_tokens"] = context_range()
            results["pytorch"]["speedup_p50"] = round(results["pytorch"]["pytorch_eager"]["p50_ms"]
                                                      / results["pytorch"]["engine"]["p50_ms"], 2)
            plot["vs PyTorch (full window)"] = {k: results["pytorch"][k]["p50_ms"] for k in ("engine", "pytorch_eager")}
            print(f"pytorch: {json.dumps(results['pytorch'])}", flush=True)

    results["io_binding"] = io_binding_step(reuse)
    print(f"io binding: {json.dumps(results['io_binding'])}", flush=True)

    write_results(results, args.out)
    if args.svg:
        args.svg.write_text(svg_bars(plot, "Per-keystroke latency, p50 (lower is better)"))


if __name__ == "__main__":
    main()
