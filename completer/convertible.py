"""Which checkpoints `completer convert` reads, known without importing the converter, which needs the convert
extra: `completer models` judges the models on a machine that does not have it yet."""
from __future__ import annotations

LLAMA_TYPES = ("llama", "mistral", "qwen2")
"""config.json model_types of the LLaMA family: RMSNorm, rotary positions, a gated MLP."""
SUPPORTED_TYPES = ("gpt2", "gpt_bigcode", *LLAMA_TYPES, "starcoder2")
"""Every config.json model_type the graph builder implements (completer/graph/huggingface.py)."""


def convert_extra_missing() -> str | None:
    """The module of the convert extra this Python lacks, or None when `completer convert` can run."""
    import importlib.util

    for module in ("onnx", "gguf"):
        try:
            if importlib.util.find_spec(module) is None:
                return module
        except (ImportError, ValueError):  # a module set to None in sys.modules, or one without a spec
            return module
    return None
