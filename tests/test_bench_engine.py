"""scripts/bench_engine.py --table, which makes the docs' engine tables from a result written by --out: a
`--candidate` result (another bundle against the shipped one, which python-base's model card quotes) gets its
table like every other comparison, not only its command line."""
from __future__ import annotations

import subprocess
import sys

from conftest import REPO

CANDIDATE = REPO / "docs" / "experiments" / "2026-11-25-gpu-training" / "bench-candidate-python-base.json"


def test_the_table_of_a_candidate_result_gives_both_bundles_and_the_time_per_model_run():
    printed = subprocess.run([sys.executable, "scripts/bench_engine.py", "--table", str(CANDIDATE)], cwd=REPO,
                             capture_output=True, text=True, timeout=120)
    assert printed.returncode == 0, printed.stderr[-2000:]
    lines = printed.stdout.splitlines()
    assert "| `--bundle` | 14.21 ms | 39.26 ms | 17.56 ms | 6 / 19.0 / 21 |" in lines
    assert "| `--candidate` | 38.08 ms | 109.80 ms | 46.74 ms | 6 / 20.0 / 25 |" in lines
    assert any("ms per model run p50: 2.10 vs 6.06 (2.88×)" in line for line in lines)


def test_the_beam_step_outside_the_graph_and_pytorch_eager_load_and_complete_as_the_engine(tmp_path):
    """The full run's (docs/benchmarks.md's first command) two other runtimes, the logits graph with the beam
    step in numpy and PyTorch eager, load the shipped bundle (Runtime's load checks the manifest's last position
    with a call through them) and give the engine's top line."""
    import json

    import onnx
    import pytest
    from safetensors.numpy import load_file

    pytest.importorskip("torch")
    from bench_engine import NumpyBeamRuntime, TorchRuntime
    from completer.engine import Engine
    from completer.graph import own_decoder
    from completer.types import EngineSettings

    bundle = REPO / "models" / "python-small"
    weights = load_file(str(bundle / "training" / "model.safetensors"))
    config = json.loads((bundle / "training" / "config.json").read_text())
    onnx.save(own_decoder(weights, config, logits_only=True), str(tmp_path / "logits.onnx"))
    text = "import os\n\n\ndef read_lines(path):\n    with open(path) as handle:\n        return handle."
    engines = [Engine(EngineSettings(model_path=str(bundle), threads=1)) for _ in range(3)]
    engines[1].runtime = NumpyBeamRuntime(engines[1].bundle, tmp_path / "logits.onnx", 1)
    engines[2].runtime = TorchRuntime(engines[2].bundle, weights, config, 1)
    tops = [engine.complete_text("file:///a.py", text, "").suggestions[0].line for engine in engines]
    assert tops[0].startswith("        return handle.")
    assert tops[1] == tops[0] and tops[2] == tops[0], tops
