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

TOKEN_BYTES = 36
"""A token id in a Python list: its pointer and its int object (ids past 256 are objects of their own)."""
LINE_ENTRY_BYTES = 160
"""A line's entry in a document's per-line token memo beside its characters: its key string's and list's headers and
the dict's slot."""


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
        """Its KV, and what its memos hold beside it (`memo_bytes`): the budget bounds both."""
        return sum(a.nbytes for a in self.keys) + sum(a.nbytes for a in self.values) + self.memo_bytes

    @property
    def memo_bytes(self) -> int:
        """The texts and tokens the document's memos keep, estimated from their lengths (a read of each line's
        tokens would cost every budget check a pass over them): a cursor near the top holds a few tokens of KV
        but up to 32,768 characters below it and their tokens, and counted by its KV alone, documents completed
        there held twice the budget and more. The per-line memos hold the lines and tokens of the head and of the
        text below once more, and a header per line."""
        head = len(self.token_memo[0]) + TOKEN_BYTES * len(self.token_memo[1])
        below = len(self.below_memo[0]) + TOKEN_BYTES * len(self.below_memo[1])
        lines = len(self.head_line_tokens) + len(self.below_line_tokens)
        return (head * (1 + bool(self.head_line_tokens)) + below * (1 + bool(self.below_line_tokens))
                + len(self.context_memo[0]) + TOKEN_BYTES * (len(self.ids) + len(self.repository_memo[1]))
                + LINE_ENTRY_BYTES * lines)

    def prefix(self) -> list[tuple[np.ndarray, np.ndarray]]:
        return list(zip(self.keys, self.values))


def token_kv_bytes(prefix: KV) -> int:
    """What one more cached token's KV costs, read off a prefix's layers (keys [1, H, D, P], values [1, H, P, D])."""
    return sum(k.shape[1] * k.shape[2] * k.itemsize + v.shape[1] * v.shape[3] * v.itemsize for k, v in prefix)


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
        total = self.nbytes  # summed once: a budget check costs a pass over the documents, not one per eviction
        for uri in list(self._docs):
            if total <= self.budget_bytes:
                break
            if uri != keep:
                total -= self._docs.pop(uri).nbytes
                evicted.append(uri)
        return evicted
