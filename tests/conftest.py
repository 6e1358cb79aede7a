"""Shared fixtures: the scripts/ directory on sys.path, and the committed model bundle."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import completer  # noqa: F401  (before any test imports onnxruntime: it turns onnxruntime's telemetry off)

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))

MODEL_DIR = REPO / "models" / "python-small"


@pytest.fixture(scope="session")
def model_dir() -> Path:
    return MODEL_DIR


@pytest.fixture(scope="session")
def engine():
    """One engine over the committed bundle for the whole session (loading it costs ~0.2 s)."""
    from completer.engine import Engine

    return Engine()


@pytest.fixture(scope="session")
def fp32_bundle_dir(tmp_path_factory) -> Path:
    """The committed weights as fp32 graphs, the single and the batched one: a search's answers must then be
    exactly the same whatever other searches share its calls."""
    import json

    import onnx
    from safetensors.numpy import load_file

    from eval import fp32_bundle
    from completer.graph import DEFAULT_SLOTS, own_decoder

    target = tmp_path_factory.mktemp("fp32-batched")
    config = json.loads((MODEL_DIR / "training" / "config.json").read_text())
    weights = load_file(str(MODEL_DIR / "training" / "model.safetensors"))
    onnx.save(own_decoder(weights, config), str(target / "single.onnx"))
    onnx.save(own_decoder(weights, config, slots=DEFAULT_SLOTS), str(target / "batched.onnx"))
    return fp32_bundle(MODEL_DIR, target / "single.onnx", target / "bundle", target / "batched.onnx")


_SKIPPED: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped:
        _SKIPPED.append(f"{report.nodeid}: {report.longrepr[-1] if isinstance(report.longrepr, tuple) else ''}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Under CI=true a skipped test is a failure: a tool the test command should have installed is missing."""
    if os.environ.get("CI") == "true" and _SKIPPED and exitstatus == pytest.ExitCode.OK:
        print(f"\nCI=true: {len(_SKIPPED)} test(s) skipped, which fails the run:", *_SKIPPED, sep="\n  ")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
