"""Background prefills in chunks sized by time (completer/prefill_chunks.py): a keystroke in another document
waits for one chunk at most, so a chunk should take about as long on any model."""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from completer.cache import DocumentState, prefix_steps
from completer.calls import drive
from completer.engine import PREFILL_CHUNK_TOKENS, Engine
from completer.prefill_chunks import FEWEST_TOKENS, PrefillChunks
from completer.types import EngineSettings

TEXT = Path(argparse.__file__).read_text()[:6000]


def test_the_first_chunk_is_short_and_later_ones_are_steered_by_the_last_ones_time():
    chunks = PrefillChunks(most=128, budget_ms=20.0)
    assert chunks.next_size() == FEWEST_TOKENS  # nothing measured yet: no model's first chunk is long
    chunks.record(16, 0.002)  # 2 ms: eight times as many would still fit, in steps of 16
    assert chunks.next_size() == 128
    chunks.record(128, 0.030)  # over the budget: shorter in proportion
    assert chunks.next_size() == 80
    chunks.record(80, 0.018)  # near the budget: kept
    assert chunks.next_size() == 80
    chunks.record(5, 0.0001)  # a prefill's short tail says nothing of a whole chunk's time
    assert chunks.next_size() == 80
    large = PrefillChunks(most=128, budget_ms=20.0)
    large.record(16, 0.014)  # a large model: most of a call is the weights read once, so one step more
    assert large.next_size() == 32
    large.record(32, 0.022)  # just over: back to the shortest, never below it
    assert large.next_size() == FEWEST_TOKENS
    large.record(16, 0.5)
    assert large.next_size() == FEWEST_TOKENS
    large.record(0, 1.0)  # nothing ran: nothing learnt
    assert large.next_size() == FEWEST_TOKENS
    assert PrefillChunks(most=8).next_size() == 8  # never longer than the engine's own chunk


def test_a_model_whose_calls_are_mostly_a_fixed_part_settles_under_the_budget_without_flipping():
    """Time = 8 ms + 0.45 ms a token, a little more as the prefix grows: after the first two lengths the line
    through them picks the longest chunk that fits, and keeps to it, instead of going over and back."""
    chunks = PrefillChunks(most=128, budget_ms=25.0)
    sizes, over = [], 0
    for index in range(40):
        size = chunks.next_size()
        took_ms = 8.0 + 0.45 * size + 0.02 * index
        over += took_ms > 25.0 and index >= 2
        sizes.append(size)
        chunks.record(size, took_ms / 1000)
    assert sizes[:2] == [16, 32] and set(sizes[2:]) == {32}, sizes
    assert over == 0


def test_a_chunk_holds_at_least_one_token():
    import pytest

    with pytest.raises(ValueError):
        PrefillChunks(most=0)


def _background_chunks(engine: Engine, uri: str, budget_ms: float) -> list[int]:
    """The token count of each call a background prefill of TEXT makes under `budget_ms`."""
    sizes: list[int] = []
    run_batch = engine.runtime.run_batch
    saved = engine.background_chunks
    engine.background_chunks = PrefillChunks(PREFILL_CHUNK_TOKENS, budget_ms=budget_ms)

    def recording(calls, **options):
        sizes.extend(int(call.input_ids.shape[1]) for call in calls)
        outputs = run_batch(calls, **options)
        assert all(out.seconds > 0 for out in outputs)  # the runtime times each call
        return outputs

    engine.runtime.run_batch = recording
    try:
        engine.open(uri, TEXT)
        engine.prefill(uri, TEXT)
    finally:
        del engine.runtime.run_batch
        engine.background_chunks = saved
    return sizes


def test_a_background_prefill_sizes_its_chunks_by_their_time_and_caches_the_same_kv(fp32_bundle_dir: Path):
    """A fast model (a budget it always fits) runs the engine's whole chunks after the first; a slow one (a
    budget nothing fits) the shortest. Either way the cache ends as one prefill would leave it (fp32, where
    the chunks' lengths change no activation's quantization)."""
    engine = Engine(EngineSettings(model_path=str(fp32_bundle_dir)))
    fast = _background_chunks(engine, "file:///fast.py", budget_ms=1e9)
    slow = _background_chunks(engine, "file:///slow.py", budget_ms=1e-9)
    assert fast[0] == FEWEST_TOKENS and set(fast[1:-1]) == {PREFILL_CHUNK_TOKENS}, fast
    assert set(slow[:-1]) == {FEWEST_TOKENS} and slow[-1] <= FEWEST_TOKENS, slow
    assert sum(fast) == sum(slow) > 10 * FEWEST_TOKENS
    fast_state, slow_state = engine.cache.get("file:///fast.py"), engine.cache.get("file:///slow.py")
    whole = DocumentState()
    drive(prefix_steps(whole, engine.runtime.empty_prefix(), slow_state.ids), engine.runtime)
    assert fast_state.ids == slow_state.ids == whole.ids
    for state in (fast_state, slow_state):
        for mine, theirs in zip(state.keys + state.values, whole.keys + whole.values):
            np.testing.assert_allclose(mine, theirs, atol=1e-4)
