"""The onnxruntime session over the bundle's decoder, and the shapes of the state it carries.

One `run` is one ONNX call: prefill (batch 1, several new tokens, no suffix) or one beam step
(batch = live beams, one token each). CUDA is used when onnxruntime-gpu sees a device; then the
shared prefix KV is uploaded once per search and bound as device OrtValues (IO binding), so a beam
step moves only the small per-beam tensors. On the CPU, session.run already reads numpy arrays in
place, and IO binding measured no faster (docs/benchmarks.md), so plain runs are used there.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnxruntime as ort

from .bundle import Bundle
from .repeats import NO_REPEATS, RepeatMix
from .types import ModelError


@dataclass
class StepOutput:
    present: list[tuple[np.ndarray, np.ndarray]]  # per layer (key, value) [B, H, T+S, D], before reordering
    tokens: np.ndarray  # [K] next token per candidate beam
    parents: np.ndarray  # [K] the beam each candidate extends
    scores: np.ndarray  # [K] cumulative log-probabilities
    finished: np.ndarray  # [K] bool
    beam_kv: list[tuple[np.ndarray, np.ndarray]]  # per layer (key, value) [K, H, T+S, D], reordered by parent


def choose_providers(device: str) -> list[str]:
    available = ort.get_available_providers()
    if device == "cuda" and "CUDAExecutionProvider" not in available:
        raise ModelError("device 'cuda' requested but onnxruntime has no CUDAExecutionProvider "
                         "(install onnxruntime-gpu and a CUDA driver)")
    if device in ("auto", "cuda") and "CUDAExecutionProvider" in available:
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    return ["CPUExecutionProvider"]


MEMORY_ARENA = False
"""onnxruntime's CPU memory arena keeps the largest buffers a call ever needed (a long prefill's attention)
for the life of the session: about 120 MB that a long session never gives back. Without it the worker holds
about 110 MB outside its KV caches instead of 230, with the keystroke latency within the noise
(docs/benchmarks.md, "Memory over a long session")."""


class Runtime:
    """Owns the InferenceSession; counts the ONNX calls so tests can prove a path skips the model."""

    def __init__(self, bundle: Bundle, device: str = "auto", threads: int = 0, io_binding: bool | None = None,
                 memory_arena: bool = MEMORY_ARENA) -> None:
        arch = bundle.architecture
        self.n_layer = int(arch["n_layer"])
        self.n_kv_head = int(arch.get("n_kv_head", arch["n_head"]))  # grouped-query attention caches fewer heads
        self.head_dim = int(arch.get("head_dim", int(arch["n_embd"]) // int(arch["n_head"])))
        self.vocab_size = int(arch["vocab_size"])
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        options.enable_cpu_mem_arena = memory_arena
        options.enable_mem_pattern = memory_arena  # planned for fixed shapes; ours change with every call
        try:
            self.session = ort.InferenceSession(str(bundle.model_path), options, providers=choose_providers(device))
        except ModelError:
            raise
        except Exception as exc:  # onnxruntime raises several unrelated types for a bad file
            raise ModelError(f"onnxruntime cannot load {bundle.model_path}: {exc}") from exc
        self.providers = self.session.get_providers()
        self.threads = threads
        self.output_names = [o.name for o in self.session.get_outputs()]
        self.calls = 0
        self._all_allowed = np.ones((1, self.vocab_size), dtype=bool)
        inputs = {i.name for i in self.session.get_inputs()}
        # Bundles exported before the beam step took the document's repeats lack these inputs; those of the
        # first version of these inputs take them as dense rows over the vocabulary, without `repeat_tokens`.
        self.mixes_repeats = {"repeat_probs", "model_share"} <= inputs
        self.dense_repeats = self.mixes_repeats and "repeat_tokens" not in inputs
        self.device_type = "cuda" if self.providers[0] == "CUDAExecutionProvider" else "cpu"
        self.io_binding = self.device_type == "cuda" if io_binding is None else io_binding
        self._bound_prefix: tuple[list[np.ndarray], dict[str, ort.OrtValue]] = ([], {})

    def empty_prefix(self) -> list[tuple[np.ndarray, np.ndarray]]:
        h, d = self.n_kv_head, self.head_dim
        return [(np.zeros((1, h, d, 0), np.float32), np.zeros((1, h, 0, d), np.float32)) for _ in range(self.n_layer)]

    def empty_past(self, batch: int) -> list[tuple[np.ndarray, np.ndarray]]:
        shape = (batch, self.n_kv_head, 0, self.head_dim)
        return [(np.zeros(shape, np.float32), np.zeros(shape, np.float32)) for _ in range(self.n_layer)]

    def run(self, input_ids: np.ndarray, position: int, prefix: list[tuple[np.ndarray, np.ndarray]],
            past: list[tuple[np.ndarray, np.ndarray]], scores: np.ndarray | None = None,
            finished: np.ndarray | None = None, allowed: np.ndarray | None = None, num_beams: int = 1,
            repeats: RepeatMix | None = None) -> StepOutput:
        """input_ids [B, S]; prefix per layer (key [1, H, D, P], value [1, H, P, D]); past per layer [B, H, T, D];
        repeats: the document's repeats per beam row from completer/repeats.py, or None for none."""
        batch, new = input_ids.shape
        feed = {
            "input_ids": input_ids.astype(np.int64, copy=False),
            "position_ids": np.arange(position, position + new, dtype=np.int64)[None, :],
            "beam_scores": scores if scores is not None else np.zeros(batch, np.float32),
            "beam_finished": finished if finished is not None else np.zeros(batch, bool),
            "allowed_tokens": allowed if allowed is not None else self._all_allowed,
            "num_beams": np.array([num_beams], dtype=np.int64),
        }
        if self.mixes_repeats:
            repeats = repeats if repeats is not None else NO_REPEATS
            if self.dense_repeats:
                feed["repeat_probs"] = repeats.dense(self.vocab_size)
            else:
                feed["repeat_tokens"], feed["repeat_probs"] = repeats.tokens, repeats.probs
            feed["model_share"] = repeats.model_share
        for layer in range(self.n_layer):
            feed[f"prefix_key_{layer}"], feed[f"prefix_value_{layer}"] = prefix[layer]
            feed[f"past_key_{layer}"], feed[f"past_value_{layer}"] = past[layer]
        self.calls += 1
        out = self._run_bound(feed, prefix) if self.io_binding else dict(zip(self.output_names,
                                                                             self.session.run(None, feed)))
        return StepOutput(
            present=[(out[f"present_key_{i}"], out[f"present_value_{i}"]) for i in range(self.n_layer)],
            tokens=out["next_tokens"], parents=out["parent_beams"], scores=out["next_scores"],
            finished=out["next_finished"],
            beam_kv=[(out[f"beam_key_{i}"], out[f"beam_value_{i}"]) for i in range(self.n_layer)],
        )

    def _device_prefix(self, prefix: list[tuple[np.ndarray, np.ndarray]]) -> dict[str, ort.OrtValue]:
        """The prefix KV as device OrtValues, uploaded again only when the arrays change."""
        arrays = [a for pair in prefix for a in pair]  # held, so no new array can reuse their ids
        cached = self._bound_prefix[0]
        if len(arrays) != len(cached) or any(a is not b for a, b in zip(arrays, cached)):
            values = {}
            for layer, (key, value) in enumerate(prefix):
                values[f"prefix_key_{layer}"] = ort.OrtValue.ortvalue_from_numpy(key, self.device_type, 0)
                values[f"prefix_value_{layer}"] = ort.OrtValue.ortvalue_from_numpy(value, self.device_type, 0)
            self._bound_prefix = (arrays, values)
        return self._bound_prefix[1]

    def _run_bound(self, feed: dict[str, np.ndarray], prefix: list[tuple[np.ndarray, np.ndarray]]
                   ) -> dict[str, np.ndarray]:
        binding = self.session.io_binding()
        on_device = self._device_prefix(prefix)
        for name, value in feed.items():
            if name in on_device:
                binding.bind_ortvalue_input(name, on_device[name])
            else:
                binding.bind_cpu_input(name, value)
        for name in self.output_names:
            binding.bind_output(name)  # outputs are small (suffix KV, K tokens): the engine wants them on the host
        self.session.run_with_iobinding(binding)
        return dict(zip(self.output_names, binding.copy_outputs_to_cpu()))
