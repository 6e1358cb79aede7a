"""Per-document KV cache of the text before the cursor, with an LRU memory budget across documents.

Each request keeps the longest common token prefix with what is cached and runs only the new
tokens, so a keystroke usually costs no prefill at all (only the last token changed).
"""
from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from .calls import KV, ModelCall, Steps, drive
from .prefill_chunks import PrefillChunks
from .runtime import Runtime, StepOutput


@dataclass
class DocumentState:
    ids: list[int] = field(default_factory=list)  # tokens whose KV is cached
    keys: list[np.ndarray] = field(default_factory=list)  # per layer [1, H, D, P] (pre-transposed for q @ K)
    values: list[np.ndarray] = field(default_factory=list)  # per layer [1, H, P, D]
    last_answer: object | None = None  # the engine's memory for typing through
    token_memo: tuple[str, list[int]] = ("", [])  # (text up to the cursor's line, its tokens)
    context_memo: tuple[str, object] = ("", None)  # (text up to the cursor's line, its filters.LineContext)
    below_memo: tuple[str, np.ndarray] = ("", np.zeros(0, np.int64))  # (text below the cursor's line, its tokens)
    head_line_tokens: dict[str, list[int]] = field(default_factory=dict)  # tokens of each line above the cursor's
    below_line_tokens: dict[str, list[int]] = field(default_factory=dict)  # tokens of each line below it
    repository_memo: tuple[object, list[int]] = (None, [])  # ((RepositoryContext, budget), Prompts.repository_ids)

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.keys) + sum(a.nbytes for a in self.values)

    def prefix(self) -> list[tuple[np.ndarray, np.ndarray]]:
        return list(zip(self.keys, self.values))


def common_prefix_length(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def extend_prefix(state: DocumentState, runtime: Runtime, ids: list[int]) -> tuple[int, int]:
    """Make the cache hold exactly `ids`, running the new tokens in one call; returns (reused tokens, newly run
    tokens)."""
    return drive(prefix_steps(state, runtime.empty_prefix(), ids), runtime)


def prefix_steps(state: DocumentState, empty_prefix: KV, ids: list[int], chunk: int | PrefillChunks | None = None
                 ) -> Steps[tuple[int, int]]:
    """`extend_prefix` as the calls it needs (completer/calls.py): the new tokens in one prefill, or in calls
    of at most `chunk` tokens (or as many as `PrefillChunks` sizes by time, told each call's time), the cache
    updated after each, so a caller that stops between them keeps the chunks already run. `empty_prefix` is the
    runtime's KV of no tokens."""
    if not state.keys:
        state.keys = [k for k, _ in empty_prefix]
        state.values = [v for _, v in empty_prefix]
        state.ids = []
    keep = common_prefix_length(state.ids, ids)
    if keep < len(state.ids):
        state.keys = [np.ascontiguousarray(k[:, :, :, :keep]) for k in state.keys]
        state.values = [np.ascontiguousarray(v[:, :, :keep, :]) for v in state.values]
        state.ids = state.ids[:keep]
    done = keep
    while done < len(ids):
        size = chunk.next_size() if isinstance(chunk, PrefillChunks) else chunk
        end = len(ids) if size is None else min(len(ids), done + size)
        out: StepOutput = yield ModelCall(np.asarray([ids[done:end]], dtype=np.int64), done, state.prefix())
        appending = time.perf_counter()
        state.keys = [np.concatenate([k, pk.transpose(0, 1, 3, 2)], axis=3)
                      for k, (pk, _) in zip(state.keys, out.present)]
        state.values = [np.concatenate([v, pv], axis=2) for v, (_, pv) in zip(state.values, out.present)]
        if isinstance(chunk, PrefillChunks):  # a waiting keystroke waits for the call and this copy
            chunk.record(end - done, out.seconds + time.perf_counter() - appending, position=done)
        state.ids = list(ids[:end])
        done = end
    return keep, len(ids) - keep


class DocumentCache:
    """LRU over documents: the least recently completed documents are dropped past the budget."""

    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = budget_bytes
        self._docs: OrderedDict[str, DocumentState] = OrderedDict()

    def get(self, uri: str) -> DocumentState:
        state = self._docs.pop(uri, None) or DocumentState()
        self._docs[uri] = state
        return state

    def get_quietly(self, uri: str) -> DocumentState:
        """The document's state without making it recently used; a new one comes least recently used, so work
        done ahead of any request (a prefill) never pushes out the documents being edited."""
        state = self._docs.get(uri)
        if state is None:
            state = self._docs[uri] = DocumentState()
            self._docs.move_to_end(uri, last=False)
        return state

    def drop(self, uri: str) -> None:
        self._docs.pop(uri, None)

    def __contains__(self, uri: str) -> bool:
        return uri in self._docs

    def uris(self) -> list[str]:
        return list(self._docs)

    @property
    def nbytes(self) -> int:
        return sum(s.nbytes for s in self._docs.values())

    def enforce_budget(self, keep: str | None = None) -> list[str]:
        """Evict least recently used documents (never `keep`) until under budget; returns the evicted."""
        evicted = []
        for uri in list(self._docs):
            if self.nbytes <= self.budget_bytes:
                break
            if uri != keep:
                del self._docs[uri]
                evicted.append(uri)
        return evicted
