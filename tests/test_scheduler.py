"""The engine's scheduler: many requests advancing together, one batched call per iteration, with the same answers
as when each runs alone (exact in fp32; within quantization noise in INT8), priorities, chunked prefills and
cancellation."""
from __future__ import annotations

import json
import random
import time
from pathlib import Path

import numpy as np
import pytest

from completer import scheduler as scheduler_module
from completer.calls import ModelCall
from completer.engine import Engine
from completer.scheduler import Priority, Scheduler, Task
from bench_batch import recorded_calls
from completer.types import Cancelled, EngineSettings
from lsp_support import SAMPLE_TEXT

LINES = SAMPLE_TEXT.split("\n")
CURSORS = [(i, len(line) - len(line.lstrip())) for i, line in enumerate(LINES) if line.strip()][:14]


def cursor_text(line: int, column: int) -> str:
    return "\n".join(LINES[:line] + [LINES[line][:column]])


def solo_answers(path: Path, cursors: list[tuple[int, int]]) -> list[list[tuple[str, float]]]:
    """Each cursor completed alone, one call after another, in a fresh document."""
    engine = Engine(EngineSettings(model_path=str(path)))
    return [[(s.line, s.score) for s in engine.complete_text(f"file:///solo{k}.py", cursor_text(*c), "").suggestions]
            for k, c in enumerate(cursors)]


def interleaved_answers(path: Path, cursors: list[tuple[int, int]], seed: int, owners: int = 0
                        ) -> tuple[list, list[int]]:
    """The same cursors as tasks of one scheduler, submitted at random iterations, so they join and leave the
    batch at different steps; also the sizes of the batched calls it ran. With `owners`, the tasks are asked by
    that many owners in turn, whose share of the model's time holds some of them back at some iterations."""
    engine = Engine(EngineSettings(model_path=str(path)))
    scheduler = Scheduler()
    rng = random.Random(seed)
    pending = list(enumerate(cursors))
    rng.shuffle(pending)
    tasks: dict[int, Task] = {}
    with recorded_calls(engine.runtime) as calls:
        while pending or scheduler.busy:
            for _ in range(rng.choice((0, 0, 1, 2, 3))):
                if pending:
                    k, cursor = pending.pop()
                    steps = engine.complete_steps(f"file:///mixed{k}.py", cursor_text(*cursor), "")
                    tasks[k] = scheduler.submit(Task(steps, Priority.LIVE, f"mixed{k}", engine.runtime,
                                                     owner=k % owners if owners else None))
            scheduler.iterate()
    answers = []
    for k in range(len(cursors)):
        assert tasks[k].done and tasks[k].error is None, tasks[k].error
        answers.append([(s.line, s.score) for s in tasks[k].result.suggestions])
    return answers, [call.searches for call in calls]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_interleaved_searches_answer_exactly_as_alone_in_fp32(fp32_bundle_dir: Path, seed: int):
    alone = solo_answers(fp32_bundle_dir, CURSORS)
    together, sizes = interleaved_answers(fp32_bundle_dir, CURSORS, seed)
    assert max(sizes) >= 3, "searches shared batched calls"
    for mine, theirs in zip(together, alone):
        assert [line for line, _ in mine] == [line for line, _ in theirs]
        assert [score for _, score in mine] == pytest.approx([score for _, score in theirs], abs=1e-3)


def test_searches_held_back_by_their_owners_share_answer_exactly_as_alone_in_fp32(fp32_bundle_dir: Path):
    alone = solo_answers(fp32_bundle_dir, CURSORS)
    together, _ = interleaved_answers(fp32_bundle_dir, CURSORS, 4, owners=3)
    for mine, theirs in zip(together, alone):
        assert [line for line, _ in mine] == [line for line, _ in theirs]
        assert [score for _, score in mine] == pytest.approx([score for _, score in theirs], abs=1e-3)


def agreement(a: list[list[tuple[str, float]]], b: list[list[tuple[str, float]]]) -> tuple[int, int]:
    """How many cursors get the same first suggestion, and the same set of suggestions, in both."""
    first = sum(bool(x and y and x[0][0] == y[0][0]) for x, y in zip(a, b))
    same = sum({line for line, _ in x} == {line for line, _ in y} for x, y in zip(a, b))
    return first, same


def test_interleaved_searches_stay_within_quantization_noise_in_int8(model_dir: Path, fp32_bundle_dir: Path):
    """INT8 quantizes each call's activations with one scale, so a search's scores move a little with the rows
    beside it. Its suggestions change no more than quantization itself changes them: batched INT8 agrees with
    INT8 alone at least as often as INT8 alone agrees with fp32, within two cursors."""
    alone = solo_answers(model_dir, CURSORS)
    together, sizes = interleaved_answers(model_dir, CURSORS, seed=7)
    assert max(sizes) >= 3
    batched_first, batched_same = agreement(together, alone)
    quantized_first, quantized_same = agreement(alone, solo_answers(fp32_bundle_dir, CURSORS))
    assert batched_first >= quantized_first - 2 and batched_same >= quantized_same - 2, (
        batched_first, batched_same, quantized_first, quantized_same)


def test_batched_calls_equal_single_calls_in_fp32(fp32_bundle_dir: Path):
    """Runtime.run_batch over several searches of different prefix lengths, suffix lengths and beam counts
    gives each the candidates and suffix KV it gets alone."""
    engine = Engine(EngineSettings(model_path=str(fp32_bundle_dir)))
    runtime = engine.runtime
    assert runtime.batch_slots > 1
    rng = np.random.default_rng(0)
    calls = []
    for k, (prefix_len, rows, suffix_len) in enumerate([(40, 1, 0), (90, 4, 3), (0, 2, 1), (17, 4, 6), (60, 3, 2)]):
        ids = rng.integers(1, 8000, prefix_len + 1).tolist()
        state = engine.cache.get(f"b{k}")
        from completer.cache import extend_prefix

        extend_prefix(state, runtime, ids[:-1])
        past = [(rng.standard_normal((rows, runtime.n_kv_head, suffix_len, runtime.head_dim)).astype(np.float32),
                 rng.standard_normal((rows, runtime.n_kv_head, suffix_len, runtime.head_dim)).astype(np.float32))
                for _ in range(runtime.n_layer)]
        calls.append(ModelCall(rng.integers(1, 8000, (rows, 1)), prefix_len + suffix_len, state.prefix(), past,
                               scores=-rng.random(rows).astype(np.float32), num_beams=2 * rows + k % 2))
    together = runtime.run_batch(calls)
    for call, got in zip(calls, together):
        alone = runtime.run_call(call)
        np.testing.assert_array_equal(got.tokens, alone.tokens)
        np.testing.assert_array_equal(got.parents, alone.parents)
        np.testing.assert_allclose(got.scores, alone.scores, atol=1e-4)
        chosen = np.arange(len(alone.tokens))
        for (k1, v1), (k2, v2) in zip(got.carried(chosen), alone.carried(chosen)):
            np.testing.assert_allclose(k1, k2, atol=1e-4)
            np.testing.assert_allclose(v1, v2, atol=1e-4)


@pytest.fixture(scope="module")
def fp32_engine(fp32_bundle_dir: Path) -> Engine:
    return Engine(EngineSettings(model_path=str(fp32_bundle_dir)))


def test_cancelling_one_search_leaves_the_others_running(fp32_engine: Engine):
    engine = fp32_engine
    scheduler = Scheduler()
    cursors = CURSORS[:4]
    cancelled = {"flag": False}
    tasks = [scheduler.submit(Task(engine.complete_steps(f"file:///c{k}.py", cursor_text(*c), ""), Priority.LIVE,
                                   f"c{k}", engine.runtime,
                                   is_cancelled=(lambda: cancelled["flag"]) if k == 1 else None))
             for k, c in enumerate(cursors)]
    scheduler.iterate()
    scheduler.iterate()
    cancelled["flag"] = True
    while scheduler.busy:
        scheduler.iterate()
    assert isinstance(tasks[1].error, Cancelled) and tasks[1].result is None
    alone = solo_answers(engine.bundle.path, cursors)
    for k in (0, 2, 3):
        assert tasks[k].error is None and tasks[k].result.suggestions
        assert [s.line for s in tasks[k].result.suggestions] == [line for line, _ in alone[k]]


def test_a_long_prefill_runs_in_chunks_between_the_steps_of_a_live_search(engine: Engine):
    """A document's background prefill waits while a live search runs; a live request's own long prefill runs
    one chunk per iteration, beside the other searches' steps, so no request waits for a whole prefill."""
    from completer.engine import PREFILL_CHUNK_TOKENS

    long_text = SAMPLE_TEXT * 6
    scheduler = Scheduler()
    log: list[list[str]] = []
    run_batch = engine.runtime.run_batch

    def recording(calls, **options):
        log.append(["prefill" if c.input_ids.shape[1] > 1 else "step" for c in calls])
        return run_batch(calls, **options)

    engine.runtime.run_batch = recording  # what each call held, not only how many
    try:
        background = scheduler.submit(Task(engine.prefill_steps("file:///opened.py", long_text), Priority.PREFETCH,
                                           "opened", engine.runtime))
        live = scheduler.submit(Task(engine.complete_steps("file:///typed.py", cursor_text(*CURSORS[3]), ""),
                                     Priority.LIVE, "typed", engine.runtime))
        big = scheduler.submit(Task(engine.complete_steps("file:///pasted.py", long_text[:9000], ""),
                                    Priority.LIVE, "pasted", engine.runtime))
        while not (live.done and big.done):
            before = len(log)
            scheduler.iterate()
            assert [kind for call in log[before:] for kind in call].count("prefill") <= 1
        assert background.call is not None and not background.done, "the prefetch waited for the live searches"
        assert big.result.new_tokens > 2 * PREFILL_CHUNK_TOKENS and live.result.suggestions
        chunks_while_live = [i for i, call in enumerate(log) if "prefill" in call and len(call) == 1]
        assert len(chunks_while_live) >= 3
        while scheduler.busy:
            scheduler.iterate()
        assert background.error is None and background.result > 0
    finally:
        del engine.runtime.run_batch


def test_a_search_ahead_shares_the_batch_with_a_live_search(engine: Engine):
    """A search run ahead in one document keeps its place while a keystroke in another is searched: their steps
    share batched calls, and the live one comes first."""
    scheduler = Scheduler()
    with recorded_calls(engine.runtime) as calls:
        ahead_text = cursor_text(*CURSORS[5]) + LINES[CURSORS[5][0]][CURSORS[5][1]:]
        ahead = scheduler.submit(Task(engine.search_next_line_steps("file:///ahead.py", ahead_text), Priority.AHEAD,
                                      "ahead", engine.runtime))
        scheduler.iterate()
        live = scheduler.submit(Task(engine.complete_steps("file:///live.py", cursor_text(*CURSORS[8]), ""),
                                     Priority.LIVE, "live", engine.runtime))
        while not live.done:
            scheduler.iterate()
        assert live.result.suggestions and max(call.searches for call in calls) >= 2
        while scheduler.busy:
            scheduler.iterate()
        assert ahead.error is None and ahead.result >= 1


def test_tasks_of_one_document_run_in_order(engine: Engine):
    scheduler = Scheduler()
    first = scheduler.submit(Task(engine.complete_steps("file:///same.py", cursor_text(*CURSORS[4]), ""),
                                  Priority.LIVE, "same", engine.runtime))
    second = scheduler.submit(Task(engine.complete_steps("file:///same.py", cursor_text(*CURSORS[6]), ""),
                                   Priority.LIVE, "same", engine.runtime))
    assert first.started and not second.started
    while not first.done:
        assert not second.started
        scheduler.iterate()
    scheduler.run_until_done(second)
    assert first.result.suggestions and second.result.suggestions


def test_the_throughput_benchmark_runs_its_searches_together(tmp_path: Path, capsys):
    """scripts/bench_batch.py on two documents for one round: its concurrent engine's searches share calls, its
    one-step comparison times every way it names, and it times the calls of the rounds by what they hold: the
    sequential engine's 4-beam steps hold one search each, the concurrent one's steps both searches."""
    import bench_batch

    out = tmp_path / "batch.json"
    assert bench_batch.main(["--documents", "2", "--rounds", "1", "--call-rounds", "1", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["documents"] == 2 and len(result["sequential_ms"]) == len(result["concurrent_ms"]) == 1
    assert result["searches_per_batched_call"]["max"] == 2 and result["median_ratio"] > 0
    assert set(result["one_step_ms"]) >= {"one_search_single_graph", "one_search_single_graph_again",
                                          "one_search_batched_graph", "all_one_after_another",
                                          "all_in_one_batched_call", "padded_prefix_copy"}
    calls = result["calls_in_rounds_ms"]
    assert calls["one_search_step_calls"] >= 2 and calls["one_search_step"] > 0
    assert calls["all_searches_step_calls"] >= 1
    assert abs(calls["all_searches_step_per_search"] - calls["all_searches_step"] / 2) <= 0.01  # each rounded apart
    capsys.readouterr()
    assert bench_batch.main(["--table", str(out)]) == 0
    table = capsys.readouterr().out
    assert f"| {calls['all_searches_step_per_search']} |" in table and "the same again, right after itself" in table


def test_the_throughput_benchmark_sorts_calls_by_what_they_hold():
    """`step_costs` keeps a sequential call only when it is one search's 4-beam step, and a concurrent call only
    when it holds every search's 4-beam step: a prefill (one row), a step with beams finished, or a call that
    some searches have left already would each make the comparison unfair."""
    from bench_batch import CallRecord, step_costs

    sequential = [CallRecord(1, 1, 50.0), CallRecord(1, 4, 2.0), CallRecord(1, 4, 4.0), CallRecord(1, 3, 9.0)]
    concurrent = [CallRecord(3, 12, 6.0), CallRecord(3, 12, 9.0), CallRecord(2, 8, 1.0), CallRecord(3, 10, 30.0)]
    costs = step_costs(sequential, concurrent, 3)
    assert costs == {"one_search_step": 3.0, "one_search_step_calls": 2, "all_searches_step": 7.5,
                     "all_searches_step_per_search": 2.5, "all_searches_step_calls": 2}
    assert step_costs([], [], 3)["one_search_step"] is None



def _recorded(scheduler: Scheduler) -> list[tuple[list, float]]:
    """Each model call the scheduler runs from now on: the owners of its tasks, and its seconds."""
    log: list[tuple[list, float]] = []
    run = scheduler._run

    def recording(runtime, tasks):
        started = time.perf_counter()
        try:
            return run(runtime, tasks)
        finally:
            log.append(([task.owner for task in tasks], time.perf_counter() - started))

    scheduler._run = recording
    return log


def _flood(engine: Engine, scheduler: Scheduler, name: str) -> Task:
    """Owner "flood"'s search at the end of a long document new to the engine, its prefill begun."""
    flood = scheduler.submit(Task(engine.complete_steps(f"file:///{name}.py", SAMPLE_TEXT * 12, ""), Priority.LIVE,
                                  name, engine.runtime, owner="flood"))
    for _ in range(3):
        scheduler.iterate()
    assert flood.call is not None and flood.call.is_prefill
    return flood


def test_an_owner_that_keeps_the_engine_busy_does_not_slow_another_owners_keystroke(engine: Engine, monkeypatch):
    """Owner "flood" has a long prefill under way; owner "typist"'s keystroke, which needs much less model time
    than NEW_OWNER_CREDIT_S, then runs alone until it is answered: its beam steps do not each wait for a chunk
    of the flood's, which goes on once the keystroke is answered."""
    monkeypatch.setattr(scheduler_module, "NEW_OWNER_CREDIT_S", 1.0)  # far more than a keystroke on any machine
    scheduler = Scheduler()
    log = _recorded(scheduler)
    flood = _flood(engine, scheduler, "flooding")
    engine.prefill("file:///keystroke.py", SAMPLE_TEXT)
    keystroke = engine.complete_steps("file:///keystroke.py", SAMPLE_TEXT + "\nimport os\nimport sy", "")
    typed = scheduler.submit(Task(keystroke, Priority.LIVE, "keystroke", engine.runtime, owner="typist"))
    before = len(log)
    while not typed.done:
        scheduler.iterate()
    assert typed.error is None and typed.result.suggestions
    beside = [owners for owners, _ in log[before:] if "flood" in owners]
    assert len(beside) <= 1, f"the flood ran {len(beside)} calls beside one keystroke"
    scheduler.run_until_done(flood)
    assert flood.result.new_tokens > 500


def test_an_owner_that_kept_the_engine_busy_waits_only_its_share_for_a_new_one(engine: Engine, monkeypatch):
    """However long owner "flood" has kept the engine busy, an owner that starts asking gets only its share
    ahead of it (here no credit, so FAIR_SHARE_S and one call): a long paste of the other owner does not hold
    the flood back until the paste is done."""
    monkeypatch.setattr(scheduler_module, "NEW_OWNER_CREDIT_S", 0.0)
    scheduler = Scheduler()
    log = _recorded(scheduler)
    flood = _flood(engine, scheduler, "flooded")
    scheduler.used["flood"] += 10.0  # as after ten seconds of model time with live searches all along
    pasted = scheduler.submit(Task(engine.complete_steps("file:///paste.py", SAMPLE_TEXT * 12, ""), Priority.LIVE,
                                   "paste", engine.runtime, owner="typist"))
    before = len(log)
    while "flood" not in [owner for owners, _ in log[before:] for owner in owners]:
        scheduler.iterate()
    assert not pasted.done, "the flood waited for all of the other owner's paste"
    ahead = sum(seconds for owners, seconds in log[before:-1])
    assert ahead <= scheduler_module.FAIR_SHARE_S + max(seconds for _, seconds in log[before:])
    while scheduler.busy:
        scheduler.iterate()
    assert flood.error is None and pasted.error is None
