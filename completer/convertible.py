"""Which checkpoints `completer convert` reads, known without importing the converter, which needs the convert
extra: `completer models` judges the models on a machine that does not have it yet."""
from __future__ import annotations

import shlex
import sys
from pathlib import Path

LLAMA_TYPES = ("llama", "mistral", "qwen2", "qwen3")
"""config.json model_types of the LLaMA family: RMSNorm, rotary positions, a gated MLP (Qwen3's query and key heads
each normalized too)."""
SUPPORTED_TYPES = ("gpt2", "gpt_bigcode", *LLAMA_TYPES, "starcoder2")
"""Every config.json model_type the graph builder implements (completer/graph/huggingface.py)."""


CONVERT_EXTRA_MODULES = ("onnx", "gguf", "sympy")  # pyproject.toml's `convert` extra


def convert_extra_missing() -> str | None:
    """The module of the convert extra this Python lacks, or None when `completer convert` can run."""
    import importlib.util

    for module in CONVERT_EXTRA_MODULES:
        try:
            if importlib.util.find_spec(module) is None:
                return module
        except (ImportError, ValueError):  # a module set to None in sys.modules, or one without a spec
            return module
    return None


def convert_extra_install() -> str:
    return extra_install("convert")


CHECKOUT_PLACEHOLDER = "/path/to/completer"
"""What an install command names where this package was not installed from a checkout (a wheel built from one)."""


def extra_install(extra: str) -> str:
    """The command that installs pyproject.toml's `extra` into this very interpreter (a bare `pip` may be another
    environment's): from the checkout this package is installed from, else from CHECKOUT_PLACEHOLDER, never by
    the distribution's name, since no `completer` of ours is published on PyPI and that name there is someone
    else's."""
    root = Path(__file__).resolve().parent.parent
    if not ((root / "pyproject.toml").is_file() and (root / "completer").is_dir()):
        root = Path(CHECKOUT_PLACEHOLDER)
    return f"{shlex.quote(sys.executable)} -m pip install -e {shlex.quote(f'{root}[{extra}]')}"


def is_gguf_file(path: Path) -> bool:
    """A regular file named *.gguf or beginning with GGUF's magic, as Ollama's blobs do, which have no suffix (a
    FIFO is never opened: that would block)."""
    try:
        if not path.is_file():
            return False
        if path.suffix.lower() == ".gguf":
            return True
        with open(path, "rb") as handle:
            return handle.read(4) == b"GGUF"
    except (OSError, ValueError):
        return path.suffix.lower() == ".gguf"
