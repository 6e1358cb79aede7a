"""scripts/bench_background_prefill.py: both ways of chunking prefill the same file, the fixed way in whole
128-token chunks, and the table reads back from the JSON it wrote."""
from __future__ import annotations

import json
from pathlib import Path

import bench_background_prefill


def test_it_times_both_ways_in_turns_and_tables_its_own_output(tmp_path: Path, capsys):
    out = tmp_path / "prefill.json"
    assert bench_background_prefill.main(["--rounds", "2", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    sized, fixed = (result["raw"][way] for way in bench_background_prefill.WAYS)
    assert len(sized) == len(fixed) == 2
    assert {sum(r["tokens"]) for r in sized + fixed} == {sum(fixed[0]["tokens"])} and sum(fixed[0]["tokens"]) > 500
    assert set(fixed[0]["tokens"][:-1]) == {128} and sized[0]["tokens"][0] == 16  # the engine's first chunk
    assert all(ms > 0 for r in sized + fixed for ms in r["call_ms"])
    assert all(step >= call for r in sized + fixed for step, call in zip(r["step_ms"], r["call_ms"]))
    stops = result["stops"]  # each stopped call ended, or ended before its stop; a stop's wait is short
    assert stops["stops"] == 8 and stops["chunk_tokens"] >= 16 and stops["call_ms_median"] > 0
    assert stops["ended_before_their_stop"] < stops["stops"] and 0 < stops["wait_ms_median"] <= stops["wait_ms_max"]
    printed = capsys.readouterr().out
    assert "| stopped chunk, tokens |" in printed
    assert bench_background_prefill.main(["--table", str(out)]) == 0
    assert capsys.readouterr().out == printed


def test_no_rounds_is_one_line_and_exit_2(capsys):
    import pytest

    with pytest.raises(SystemExit) as stop:
        bench_background_prefill.main(["--rounds", "0"])
    assert stop.value.code == 2 and "--rounds must be at least 1" in capsys.readouterr().err
