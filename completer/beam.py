"""Beam search to the end of the line, one ONNX call per step with the beam step inside the graph.

Hypotheses that produce a newline are collected as finished (JetBrains' dynamic beam search).
Each step the graph proposes twice as many candidates as there are beams, so a line that ends
does not take a beam's place: a candidate that ends among the best `beams` is kept as finished,
and the best candidates that go on fill all the beams. The search stops when no live beam is
left, when every live beam scores below the k-th finished one (log-probabilities only fall, so
none could enter; k is the number of lines wanted, the beams or fewer, and only lines the caller would
offer count), when the best live beam trails the best finished one, offered or not, by more than a
margin (at the end of a finished line the likeliest continuation is the line as typed, which adds
nothing and is never offered; lines far less likely than that are not worth the steps), or at the
token limit. A beam whose line has run on past any real line's length (a banner of `=`
extending itself) is dropped at once rather than carried to the token limit, where it would be
dropped anyway. The beams share the document's prefix KV; only their suffixes move.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .calls import KV, ModelCall, Steps, drive
from .repeats import DocumentRepeats
from .runtime import Runtime, StepOutput
from .tokens import Tokens
from .types import STOP_MARGIN, CancelCheck

CANDIDATES_PER_BEAM = 2  # a beam ends in one token: `beams` that go on are nearly always among twice as many


@dataclass
class Hypothesis:
    tokens: list[int]  # generated tokens, without a final token that is only a newline or end of text
    score: float
    finished: bool  # reached the end of the line (False: stopped at the token limit)


@dataclass
class SearchRequest:
    prefix: KV  # shared document KV, P tokens
    position: int  # P: the position of `last_token`
    last_token: int  # the last context token, not yet in the prefix KV
    healed: bytes  # typed bytes the first generated tokens must spell
    beams: int
    max_tokens: int
    margin: float = STOP_MARGIN
    indent_only: bool = False  # the typed line is only indentation: what follows it must be code
    max_new_bytes: int | None = None  # a beam that generates more than this has run on: drop it
    deadline: float | None = None  # time.perf_counter() value after which no further step starts
    repeats: DocumentRepeats | None = None  # the context's own repeats, mixed into each step (None: the model alone)
    lines_wanted: int | None = None  # finished lines that end the search once no live beam can pass them (None: beams)
    offerable: Callable[[list[int]], bool] | None = None  # does this finished line count toward those? (None: all do)


@dataclass
class SearchResult:
    hypotheses: list[Hypothesis] = field(default_factory=list)  # best first
    out_of_time: bool = False  # stopped at the deadline while some beam was still live


def _allowed(tokens: Tokens, remaining: list[bytes], guarded: list[bool]) -> np.ndarray | None:
    """The first-token mask [B, V]: spell the typed bytes still owed (token healing) and, on a line of
    typed indentation, go on with code rather than deeper indentation, which the filters would drop."""
    if not any(remaining) and not any(guarded):
        return tokens.generable[None, :] if tokens.banned_ids else None  # [1, V]; None: every token
    rows = [tokens.allowed_for(r, then_code=g) if r else tokens.starts_code if g
            else tokens.generable for r, g in zip(remaining, guarded)]
    return np.stack(rows)  # [B, V]


def beam_search(runtime: Runtime, tokens: Tokens, req: SearchRequest, is_cancelled: CancelCheck | None = None
                ) -> SearchResult:
    """The search run alone, one call after another; raises Cancelled when `is_cancelled` turns true before a step."""
    return drive(search_steps(runtime.empty_past(1), tokens, req), runtime, is_cancelled)


def search_steps(empty_past: KV, tokens: Tokens, req: SearchRequest) -> Steps[SearchResult]:
    """The search as the calls it needs, one beam step each (completer/calls.py); `empty_past` is the runtime's
    suffix KV of one beam before the first step."""
    live_seqs: list[list[int]] = [[]]
    live_scores = np.zeros(1, dtype=np.float32)
    remaining = [req.healed]
    guarded = [req.indent_only]  # per beam: still at the typed indentation
    lengths = [0]  # per beam: bytes generated so far
    past = empty_past
    step_input = np.asarray([[req.last_token]], dtype=np.int64)  # [B, 1]
    finished: list[Hypothesis] = []
    counted: list[float] = []  # the scores of the finished lines that count toward the stop
    best_finished = -np.inf  # the best score of any line that ended, offered or not (the margin's reference)
    wanted = min(req.beams, req.lines_wanted or req.beams)  # that many counted lines can end the search
    bare_ends = {tokens.newline_id, tokens.end_of_text_id}  # line ends that carry no text
    step = 0
    seqs: list[list[int]] = []
    scores: list[float] = []
    out_of_time = False
    for step in range(req.max_tokens):
        out: StepOutput = yield ModelCall(
            step_input, req.position + step, req.prefix, past, scores=live_scores,
            allowed=_allowed(tokens, remaining, guarded), num_beams=CANDIDATES_PER_BEAM * req.beams,
            repeats=req.repeats.mixture(live_seqs) if req.repeats is not None else None)
        keep, seqs, scores, rems, guards, lens = [], [], [], [], [], []
        for j in range(len(out.tokens)):  # best first
            score = float(out.scores[j])
            if not np.isfinite(score):
                continue
            parent, token = int(out.parents[j]), int(out.tokens[j])
            if tokens.line_ends_in(token, remaining[parent]):
                if j < req.beams:  # as in plain beam search: lines ranked lower would favour short ones
                    line = live_seqs[parent] if token in bare_ends else live_seqs[parent] + [token]
                    finished.append(Hypothesis(line, score, True))
                    best_finished = max(best_finished, score)
                    if req.offerable is None or req.offerable(line):
                        counted.append(score)
                continue
            if len(keep) == req.beams:
                continue
            piece = tokens.token_bytes[token]
            length = lengths[parent] + len(piece)
            if req.max_new_bytes is not None and length > req.max_new_bytes:
                continue
            rem = remaining[parent]
            keep.append(j)
            seqs.append(live_seqs[parent] + [token])
            scores.append(score)
            rems.append(rem[len(piece):] if len(piece) < len(rem) else b"")
            guards.append(guarded[parent] and len(piece) <= len(rem))
            lens.append(length)
        if not keep or step == req.max_tokens - 1:
            break
        best_live = max(scores)
        ranked = sorted(counted, reverse=True)
        if len(ranked) >= wanted and best_live < ranked[wanted - 1]:
            break
        if best_live < best_finished - req.margin:  # even a line not offered: the line as typed may be done
            break
        if req.deadline is not None and time.perf_counter() >= req.deadline:
            out_of_time = True
            break
        index = np.asarray(keep, dtype=np.int64)
        past = out.carried(index)
        live_seqs, remaining, guarded, lengths = seqs, rems, guards, lens
        live_scores = np.asarray(scores, dtype=np.float32)
        step_input = out.tokens[index][:, None].astype(np.int64)
    if keep and step == req.max_tokens - 1:
        finished += [Hypothesis(s, float(sc), False) for s, sc in zip(seqs, scores)]
    finished.sort(key=lambda h: -h.score)
    return SearchResult(finished, out_of_time)


def forced_score(runtime: Runtime, prefix: KV, position: int, last_token: int,
                 continuation: list[int], repeats: DocumentRepeats | None = None) -> float:
    """The log-probability the search would give `continuation`, taken step by step through the same graph.
    The graph masks after its log-softmax, so a mask that allows one token reads that token's log-probability.
    Exact in fp32; with INT8 a step's activation scale depends on the rows beside it, so a search that ran
    several beams may have scored the same tokens slightly differently (docs/architecture.md, section 6)."""
    past = runtime.empty_past(1)
    step_input = np.asarray([[last_token]], dtype=np.int64)  # [1, 1]
    score = np.zeros(1, dtype=np.float32)
    for step, token in enumerate(continuation):
        allowed = np.zeros((1, runtime.vocab_size), dtype=bool)
        allowed[0, token] = True
        mix = repeats.mixture([continuation[:step]]) if repeats is not None else None
        out = runtime.run_call(ModelCall(step_input, position + step, prefix, past, scores=score, allowed=allowed,
                                         num_beams=1, repeats=mix))
        score = out.scores[:1].astype(np.float32)
        past = out.carried(np.zeros(1, dtype=np.int64))
        step_input = np.asarray([[token]], dtype=np.int64)
    return float(score[0])
