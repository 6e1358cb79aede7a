"""The onnxruntime session over the bundle's decoder, and the shapes of the state it carries.

One call runs the decoder once: a prefill (one row, several new tokens, no suffix) or a beam step (one token per
live beam). Bundles of format 3 take several searches per call (`run_batch`): their graph has `slots`
searches' prefix inputs, and returns each row's best candidates, among which each search picks its own here.
Older bundles' graphs take one search per call and pick inside the graph; `run_batch` runs their calls one
after another.

CUDA is used when onnxruntime-gpu sees a device; then the prefix KV is uploaded once per search and bound as
device OrtValues (IO binding), so a beam step moves only the small per-beam tensors. On the CPU, session.run
already reads numpy arrays in place, and IO binding measured no faster (docs/benchmarks.md), so plain runs are
used there.
"""
from __future__ import annotations

import logging
import time
import weakref
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np
import onnxruntime as ort

ort.disable_telemetry_events()  # what ORT_DISABLE_TELEMETRY (completer/__init__.py) does not cover: Windows' events

from .bundle import Bundle, sha256_file
from .calls import KV, ModelCall
from .preemption import Preempted, Preemption
from .repeats import NO_REPEATS, RepeatMix
from .types import ModelError

log = logging.getLogger(__name__)


@dataclass
class StepOutput:
    present: KV  # per layer (key, value) [B, KV, T+S, D]: the call's rows with the new tokens
    tokens: np.ndarray  # [K] next token per candidate, best first
    parents: np.ndarray  # [K] the call's row each candidate extends
    scores: np.ndarray  # [K] cumulative log-probabilities
    beam_kv: KV | None = None  # older graphs: per layer [K, KV, T+S, D], `present` already reordered by parent
    seconds: float = 0.0  # how long the model call took (the whole call, when several searches shared it)

    def carried(self, candidates: np.ndarray) -> KV:
        """The suffix KV the chosen candidates (indices into `tokens`) carry to the next step: their parents'."""
        if self.beam_kv is not None:
            return [(k[candidates], v[candidates]) for k, v in self.beam_kv]
        rows = self.parents[candidates]
        return [(k[rows], v[rows]) for k, v in self.present]


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
        self._options, self._providers = options, choose_providers(device)
        self._graph_io: weakref.WeakKeyDictionary[ort.InferenceSession, tuple[list[str], bool]] = \
            weakref.WeakKeyDictionary()  # each session's output names, and whether its KV has the axis of 1
        self.session = self._session(bundle.model_path)
        self._check_graph(bundle)
        self.batched_model = bundle.batched_model  # (path, slots) of the graph batched calls run, if any
        self._checksums = {name: meta.get("sha256") for name, meta in bundle.manifest.get("files", {}).items()}
        self._batched: ort.InferenceSession | None = None  # loaded when two searches first share a call
        self.providers = self.session.get_providers()
        self.threads = threads
        self.calls = 0
        self._all_allowed = np.ones((1, self.vocab_size), dtype=bool)
        inputs = {i.name for i in self.session.get_inputs()}
        self.slotted = "prefix_key_0_0" in inputs
        """A format-3 graph: the search picks its candidates from each row's (`_run_slots`); older graphs take one
        search per call and pick inside the graph."""
        self._takes_slot_rows = "slot_rows" in inputs  # a graph of one slot built since has no need of it
        self._single_slots = next((int(i.shape[0]) for i in self.session.get_inputs() if i.name == "slot_rows"),
                                  int(self.slotted))
        # Bundles exported before the beam step took the document's repeats lack these inputs; those of the
        # first version of these inputs take them as dense rows over the vocabulary, without `repeat_tokens`.
        self.mixes_repeats = {"repeat_probs", "model_share"} <= inputs
        self.dense_repeats = self.mixes_repeats and "repeat_tokens" not in inputs
        self.device_type = "cuda" if self.providers[0] == "CUDAExecutionProvider" else "cpu"
        self.io_binding = self.device_type == "cuda" if io_binding is None else io_binding
        self._bound: dict[str, tuple[np.ndarray, ort.OrtValue]] = {}  # prefix inputs on the device, by input name
        self._no_prefix = self.empty_prefix()
        self._check_positions(bundle)

    def _check_positions(self, bundle: Bundle) -> None:
        """Refuse a manifest whose context_length is more than the graph's position tables hold (edited to read
        more context, say): every call past them would fail, an error in the log at each keystroke of a long file
        and no suggestions, unsaid. One token is run at the last position the manifest names; it is not counted
        among the model's calls."""
        last, calls = bundle.context_length - 1, self.calls
        try:
            self.run_call(ModelCall(np.zeros((1, 1), np.int64), last, self.empty_prefix()))
        except Exception as exc:  # onnxruntime raises several unrelated types
            said = (str(exc).splitlines() or [type(exc).__name__])[0].rpartition("Status Message: ")[2][:200]
            raise ModelError(f"{bundle.path / 'manifest.json'}: its context_length is {last + 1:,}, but "
                             f"{bundle.model_path.name} cannot run position {last:,} (a manifest edited, or another "
                             f"model's?): {said}") from exc
        finally:
            self.calls = calls

    def _check_graph(self, bundle: Bundle) -> None:
        """Refuse a manifest whose architecture does not describe the graph (another model's, or edited): the
        caches and masks sized by it would fail every call once the model was taken up, or fill the memory."""
        inputs = {i.name: i.shape for i in self.session.get_inputs()}
        kv = inputs.get("past_key_0") or [None, None]  # [B, KV, (1,) T, D]
        graph = {"n_layer": sum(name.startswith("past_key_") for name in inputs), "n_kv_head": kv[1],
                 "head_dim": kv[-1], "vocab_size": (inputs.get("allowed_tokens") or [None])[-1]}
        said = {"n_layer": self.n_layer, "n_kv_head": self.n_kv_head, "head_dim": self.head_dim,
                "vocab_size": self.vocab_size}
        for key, size in graph.items():
            if isinstance(size, int) and size != said[key]:
                raise ModelError(f"{bundle.path / 'manifest.json'}: its architecture says {key} {said[key]}, but "
                                 f"{bundle.model_path.name} has {size} (a manifest of another model?)")

    def _session(self, path) -> ort.InferenceSession:
        try:
            return ort.InferenceSession(str(path), self._options, providers=self._providers)
        except Exception as exc:  # onnxruntime raises several unrelated types for a bad file
            raise ModelError(f"onnxruntime cannot load {path}: {exc}") from exc

    @property
    def batch_slots(self) -> int:
        """How many searches one call can hold: the batched graph's slots, else the single graph's (1, unless a
        bundle was converted with --batch-slots)."""
        return self.batched_model[1] if self.batched_model is not None else max(1, self._single_slots)

    def empty_prefix(self) -> list[tuple[np.ndarray, np.ndarray]]:
        h, d = self.n_kv_head, self.head_dim
        return [(np.zeros((1, h, d, 0), np.float32), np.zeros((1, h, 0, d), np.float32)) for _ in range(self.n_layer)]

    def empty_past(self, batch: int) -> list[tuple[np.ndarray, np.ndarray]]:
        shape = (batch, self.n_kv_head, 0, self.head_dim)
        return [(np.zeros(shape, np.float32), np.zeros(shape, np.float32)) for _ in range(self.n_layer)]

    def run(self, input_ids: np.ndarray, position: int, prefix: KV, past: KV, scores: np.ndarray | None = None,
            allowed: np.ndarray | None = None, num_beams: int = 1, repeats: RepeatMix | None = None) -> StepOutput:
        """input_ids [B, S]; prefix per layer (key [1, KV, D, P], value [1, KV, P, D]); past per layer [B, KV, T, D];
        repeats: the document's repeats per beam row from completer/repeats.py, or None for none."""
        return self.run_call(ModelCall(input_ids, position, prefix, past, scores, allowed, num_beams, repeats))

    def run_call(self, call: ModelCall) -> StepOutput:
        """One call a search or a prefill yielded (completer/calls.py), alone."""
        return self.run_batch([call])[0]

    def run_batch(self, calls: list[ModelCall], preemption: Preemption | None = None) -> list[StepOutput]:
        """Calls with the same number of new tokens per row, one output each. With a batched graph, up to
        `batch_slots` of them run in one call; otherwise one after another. Background calls pass `preemption`:
        a request that arrives stops them (Preempted, completer/preemption.py)."""
        if not self.slotted:
            return [self._run_single(call, preemption) for call in calls]
        slots = self.batch_slots
        outputs: list[StepOutput] = []
        for start in range(0, len(calls), slots):
            group = calls[start:start + slots]
            if len(group) > 1 and self.batched_model is not None:
                try:
                    outputs += self._run_slots(self._batched_session(), slots, group, preemption)
                    continue
                except Preempted:
                    raise
                except Exception as exc:  # a batched graph that fails must not cost the searches their answers
                    log.warning("the batched graph %s failed, so searches run one at a time from now on: %s",
                                self.batched_model[0], exc)
                    self.batched_model, self._batched = None, None
            if self.batched_model is None and self._single_slots > 1:  # the one graph holds several searches
                outputs += self._run_slots(self.session, self._single_slots, group, preemption)
                continue
            for call in group:  # the single graph: no empty slots to pay for
                outputs += self._run_slots(self.session, self._single_slots, [call], preemption)
        return outputs

    def _batched_session(self) -> ort.InferenceSession:
        """The batched graph, loaded when two searches first share a call, after its checksum is checked again
        (the bundle was verified when it loaded, maybe long before)."""
        if self._batched is None:
            path = self.batched_model[0]  # type: ignore[index]
            expected = self._checksums.get(path.name)
            if expected is not None and sha256_file(path) != expected:
                raise ModelError(f"model file {path} fails its sha256 check (corrupt or modified)")
            session = self._session(path)
            held = sum(i.name.startswith("prefix_key_0_") for i in session.get_inputs())
            if held != self.batched_model[1]:  # type: ignore[index]
                # the manifest is not checksummed: a million slots would build a million slots' inputs per layer
                raise ModelError(f"{path.parent / 'manifest.json'}: batched_model says {self.batched_model[1]:,} "
                                 f"search slots, but {path.name} holds {held}")
            self._batched = session
        return self._batched

    def _run_slots(self, session: ort.InferenceSession, slots: int, calls: list[ModelCall],
                   preemption: Preemption | None = None) -> list[StepOutput]:
        """One call of a format-3 graph: each call's rows in a slot of their own, then each call's best
        candidates picked among its rows' (the graph gives each row's top num_beams)."""
        feed, rows, lengths = self.slot_feed(calls, slots)
        started = time.perf_counter()
        out = self._run_feed(session, feed, preemption)
        seconds = time.perf_counter() - started
        presents = [(out[f"present_key_{i}"], out[f"present_value_{i}"]) for i in range(self.n_layer)]
        longest = feed["past_mask"].shape[1]
        outputs, start = [], 0
        for call, n, length in zip(calls, rows, lengths):
            tokens, parents, scores = pick_candidates(out["row_scores"][start:start + n],
                                                      out["row_tokens"][start:start + n], call.num_beams)
            present = [(k[start:start + n, :, longest - length:], v[start:start + n, :, longest - length:])
                       for k, v in presents]  # views: the call's rows and its own columns
            outputs.append(StepOutput(present, tokens, parents, scores, seconds=seconds))
            start += n
        return outputs

    def slot_feed(self, calls: list[ModelCall], slots: int) -> tuple[dict[str, np.ndarray], list[int], list[int]]:
        """A format-3 graph's inputs for these calls (at most `slots`, the same new tokens per row): their rows
        one after another, each call's prefix in its own slot, the suffixes padded at their start to the
        longest. Also each call's rows and suffix length."""
        rows = [call.rows for call in calls]
        new = calls[0].input_ids.shape[1]
        if any(call.input_ids.shape[1] != new for call in calls) or len(calls) > slots:
            raise ValueError(f"a batch holds at most {slots} calls with the same number of new tokens per row")
        total = sum(rows)
        lengths = [0 if call.past is None else call.past[0][0].shape[2] for call in calls]  # T per call
        longest = max(lengths)
        feed: dict[str, np.ndarray] = {
            "input_ids": np.concatenate([call.input_ids for call in calls]).astype(np.int64, copy=False),
            "position_ids": np.concatenate([np.broadcast_to(np.arange(call.position, call.position + new), (n, new))
                                            for call, n in zip(calls, rows)]).astype(np.int64),
            "beam_scores": np.concatenate([call.scores if call.scores is not None else np.zeros(n, np.float32)
                                           for call, n in zip(calls, rows)]).astype(np.float32, copy=False),
            "num_beams": np.array([max(call.num_beams for call in calls)], dtype=np.int64),
            "allowed_tokens": self._allowed_rows(calls, rows),
        }
        feed["repeat_tokens"], feed["repeat_probs"], feed["model_share"] = _repeat_rows(calls, rows)
        if slots > 1 or self._takes_slot_rows:
            feed["slot_rows"] = np.asarray(rows + [0] * (slots - len(calls)), dtype=np.int64)
        mask = np.zeros((total, longest), np.float32)  # [B, T]: each call's suffix sits at the end of the columns
        start = 0
        for n, length in zip(rows, lengths):
            mask[start:start + n, :longest - length] = -np.inf
            start += n
        feed["past_mask"] = mask
        for layer in range(self.n_layer):
            for slot in range(slots):
                prefix = calls[slot].prefix if slot < len(calls) else self._no_prefix
                feed[f"prefix_key_{layer}_{slot}"], feed[f"prefix_value_{layer}_{slot}"] = prefix[layer]
            if len(calls) == 1:
                past = calls[0].past if calls[0].past is not None else self.empty_past(total)
                feed[f"past_key_{layer}"], feed[f"past_value_{layer}"] = past[layer]
                continue
            shape = (total, self.n_kv_head, longest, self.head_dim)
            keys, values = np.zeros(shape, np.float32), np.zeros(shape, np.float32)
            start = 0
            for call, n, length in zip(calls, rows, lengths):
                if call.past is not None and length:
                    keys[start:start + n, :, longest - length:] = call.past[layer][0]
                    values[start:start + n, :, longest - length:] = call.past[layer][1]
                start += n
            feed[f"past_key_{layer}"], feed[f"past_value_{layer}"] = keys, values
        return feed, rows, lengths

    def _allowed_rows(self, calls: list[ModelCall], rows: list[int]) -> np.ndarray:
        """The token-healing masks of all calls as one input: shared as [1, V] when every call has the same
        single row (or none), else [B, V]."""
        masks = [call.allowed if call.allowed is not None else self._all_allowed for call in calls]
        if all(m.shape[0] == 1 and (m is masks[0] or np.array_equal(m, masks[0])) for m in masks):
            return masks[0]
        return np.concatenate([np.broadcast_to(m, (n, m.shape[1])) for m, n in zip(masks, rows)])

    def _run_single(self, call: ModelCall, preemption: Preemption | None = None) -> StepOutput:
        """One call of an older graph (format 1 or 2): one search, its candidates picked inside the graph."""
        input_ids = call.input_ids
        batch, new = input_ids.shape
        past = call.past if call.past is not None else self.empty_past(batch)
        feed = {
            "input_ids": input_ids.astype(np.int64, copy=False),
            "position_ids": np.arange(call.position, call.position + new, dtype=np.int64)[None, :],
            "beam_scores": call.scores if call.scores is not None else np.zeros(batch, np.float32),
            "beam_finished": np.zeros(batch, bool),  # the engine decides line ends itself (docs/architecture.md)
            "allowed_tokens": call.allowed if call.allowed is not None else self._all_allowed,
            "num_beams": np.array([call.num_beams], dtype=np.int64),
        }
        if self.mixes_repeats:
            repeats = call.repeats if call.repeats is not None else NO_REPEATS
            if self.dense_repeats:
                feed["repeat_probs"] = repeats.dense(self.vocab_size)
            else:
                feed["repeat_tokens"], feed["repeat_probs"] = repeats.tokens, repeats.probs
            feed["model_share"] = repeats.model_share
        for layer in range(self.n_layer):
            feed[f"prefix_key_{layer}"], feed[f"prefix_value_{layer}"] = call.prefix[layer]
            feed[f"past_key_{layer}"], feed[f"past_value_{layer}"] = past[layer]
        started = time.perf_counter()
        out = self._run_feed(self.session, feed, preemption)
        return StepOutput(
            seconds=time.perf_counter() - started,
            present=[(out[f"present_key_{i}"], out[f"present_value_{i}"]) for i in range(self.n_layer)],
            tokens=out["next_tokens"], parents=out["parent_beams"], scores=out["next_scores"],
            beam_kv=[(out[f"beam_key_{i}"], out[f"beam_value_{i}"]) for i in range(self.n_layer)],
        )

    def _run_feed(self, session: ort.InferenceSession, feed: dict[str, np.ndarray],
                  preemption: Preemption | None = None) -> dict[str, np.ndarray]:
        """One call. The engine keeps every KV array without the axis of 1 that a graph of one slot built since
        format 5 takes after the KV heads (completer/graph/decoder.py); it is added and dropped here, as views."""
        io = self._graph_io.get(session)
        if io is None:
            io = self._graph_io[session] = ([o.name for o in session.get_outputs()], _keeps_group_axis(session))
        names, grouped = io
        options = ort.RunOptions() if preemption is not None else None  # its own: a stop ends this run only
        with preemption.running(options) if preemption is not None else nullcontext():
            self.calls += 1  # the calls that ran, not those a preemption refused
            if self.io_binding:
                out = self._run_bound(session, feed, names, grouped, options)
            else:
                out = dict(zip(names, session.run(None, with_group_axis(feed) if grouped else feed, options)))
        return without_group_axis(out) if grouped else out

    def _run_bound(self, session: ort.InferenceSession, feed: dict[str, np.ndarray], names: list[str], grouped: bool,
                   options: ort.RunOptions | None = None) -> dict[str, np.ndarray]:
        """The call with the prefix inputs on the device, each uploaded again only when its array changes."""
        binding = session.io_binding()
        for name, value in feed.items():
            shaped = _add_group_axis(name, value) if grouped else value
            if name.startswith("prefix_"):
                bound = self._bound.get(name)
                if bound is None or bound[0] is not value:  # the array is held, so no new one can reuse its id
                    bound = self._bound[name] = (value, ort.OrtValue.ortvalue_from_numpy(value, self.device_type, 0))
                # one upload serves both graphs: the graph of one slot reads the same buffer with its axis of 1
                binding.bind_input(name, self.device_type, 0, np.float32, list(shaped.shape), bound[1].data_ptr())
            else:
                binding.bind_cpu_input(name, shaped)
        for name in names:
            binding.bind_output(name)  # outputs are small (suffix KV, K tokens): the engine wants them on the host
        session.run_with_iobinding(binding, options)
        return dict(zip(names, binding.copy_outputs_to_cpu()))


KV_INPUTS = ("prefix_key_", "prefix_value_", "past_key_", "past_value_")
"""The names the graph's KV inputs start with."""


def _keeps_group_axis(session: ort.InferenceSession) -> bool:
    """Whether the graph's KV inputs have the axis of 1 after the KV heads (a graph of one slot, format 5)."""
    return any(i.name == "past_key_0" and len(i.shape) == 5 for i in session.get_inputs())


def _add_group_axis(name: str, value: np.ndarray) -> np.ndarray:
    return value[:, :, None] if name.startswith(KV_INPUTS) else value


def with_group_axis(feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A feed of the engine's 4-D KV for a graph that takes the axis of 1 after the KV heads (views)."""
    return {name: _add_group_axis(name, value) for name, value in feed.items()}


def without_group_axis(outputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Such a graph's outputs with its KV as the engine keeps it, [B, KV, T, D] (views)."""
    return {name: value[:, :, 0] if name.startswith("present_") else value for name, value in outputs.items()}


def pick_candidates(row_scores: np.ndarray, row_tokens: np.ndarray, wanted: int
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One search's best `wanted` candidates among its rows' (row_scores, row_tokens [B, K], each row best first):
    their tokens, the rows they extend, and their scores, best first; ties go to the earlier row."""
    scores = row_scores.reshape(-1)
    best = np.argsort(-scores, kind="stable")[:wanted]
    return row_tokens.reshape(-1)[best], best // row_scores.shape[1], scores[best]


def _repeat_rows(calls: list[ModelCall], rows: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The calls' repeats as one [B, M] input each (a row shorter than M repeats its first entry, which writes
    the same value again), or the neutral [1, 1] when no call has any."""
    mixes = [call.repeats if call.repeats is not None else NO_REPEATS for call in calls]
    if len(mixes) == 1:
        return mixes[0].tokens, mixes[0].probs, mixes[0].model_share
    if all(call.repeats is None for call in calls):
        return NO_REPEATS.tokens, NO_REPEATS.probs, NO_REPEATS.model_share
    width = max(mix.tokens.shape[1] for mix in mixes)
    tokens, probs, shares = [], [], []
    for mix, n in zip(mixes, rows):
        pad = width - mix.tokens.shape[1]
        t, p = mix.tokens, mix.probs
        if pad:
            t = np.concatenate([t, np.repeat(t[:, :1], pad, axis=1)], axis=1)
            p = np.concatenate([p, np.repeat(p[:, :1], pad, axis=1)], axis=1)
        tokens.append(np.broadcast_to(t, (n, width)))
        probs.append(np.broadcast_to(p, (n, width)))
        shares.append(np.broadcast_to(mix.model_share, (n,)))
    return (np.concatenate(tokens).astype(np.int64, copy=False), np.concatenate(probs).astype(np.float32, copy=False),
            np.concatenate(shares).astype(np.float32, copy=False))
