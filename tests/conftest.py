"""Shared fixtures: the scripts/ directory on sys.path, and the committed model bundle."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

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
