"""The engine's public value types, shared by the CLI, the LSP server and its worker process."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Callable

from .text import MAX_LINE_CHARS

CancelCheck = Callable[[], bool]
"""Polled between beam steps; returning True abandons the search with `Cancelled`."""


class Cancelled(Exception):
    """The search was abandoned between two beam steps because the caller asked."""


class ModelError(Exception):
    """The model bundle is missing, corrupt or incompatible; the message names the file."""


SOURCE_MODEL = "model"  # a line the beam search found
SOURCE_EARLIER_LINE = "earlier line"  # a line further up the file (completer/earlier_lines.py)
SOURCE_WORKSPACE_LINE = "workspace line"  # a line of another file, from the workspace's snippets (the same)
SOURCE_PARTIAL_LINE = "partial line"  # the start of a line too long for the search (completer/partial_lines.py)
SOURCE_REMOTE = "endpoint"  # a line an OpenAI-compatible endpoint generated (completer/remote.py)


@dataclass(frozen=True)
class Suggestion:
    """One whole-line suggestion. Columns count Unicode code points on the cursor's line."""

    line: str  # the whole line once accepted, without the newline
    text: str  # what is inserted at the cursor (line[cursor:])
    start: int  # replaced range on the cursor's line: [start, end)
    end: int
    score: float | None  # cumulative log-probability of the generated tokens (None: not from the model)
    source: str = SOURCE_MODEL  # or SOURCE_EARLIER_LINE or SOURCE_WORKSPACE_LINE (offered last), or SOURCE_PARTIAL_LINE

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


MIN_CONTEXT_TOKENS = 64
"""A window must hold the generated line plus some context; fewer tokens would only guess."""
MAX_CONTEXT_TOKENS = 1 << 24
"""Far above any model's context (a larger window reads the whole of it), and a number the worker's msgpack
frames carry: past 64 bits it arrived as a string."""

SKIPPED_LONG_LINE = f"the cursor's line is longer than {MAX_LINE_CHARS:,} characters (minified code or data)"
SKIPPED_OUTSIDE = "the position is outside the document"
SKIPPED_BINARY = "the text before the cursor looks binary (mostly control characters or undecodable bytes)"
SKIPPED_OUT_OF_SYNC = ("an edit to it could not be read, so the server's copy may differ from the editor's; "
                       "completions resume when the editor sends its whole text (reopen the file)")


@dataclass
class CompletionResult:
    suggestions: list[Suggestion] = field(default_factory=list)
    latency_ms: float = 0.0
    model_runs: int = 0  # ONNX calls this request made (0 when served by typing through)
    cached_tokens: int = 0  # context tokens whose KV was reused
    new_tokens: int = 0  # context tokens that had to be run
    skipped: str = ""  # why the model was not asked: one of the SKIPPED_* reasons, or "" when it was
    out_of_time: bool = False  # the search budget ran out first: only lines finished by then were offered

    def to_dict(self) -> dict[str, Any]:
        return {"suggestions": [s.to_dict() for s in self.suggestions], "latency_ms": self.latency_ms,
                "model_runs": self.model_runs, "cached_tokens": self.cached_tokens, "new_tokens": self.new_tokens,
                "skipped": self.skipped, "out_of_time": self.out_of_time}


STOP_MARGIN = 6.0
"""The search stops once its best live beam trails its best finished line by more than this (nats): a line
e^6, some 400 times, less likely than one already found is not worth the steps. Against 8, on 1,000 positions
of two validation splits no suggestion list changed, and long-document keystrokes ran the model 7 % less
(docs/experiments/2026-11-24-benchmarks-history.md, "The search's margin"); at 4 a line was lost."""


@dataclass
class EngineSettings:
    """Everything a user may tune; the LSP server maps its settings onto this."""

    model_path: str | None = None  # bundle dir; None means the embedded default model
    beams: int = 0  # 0: the bundle's default (its manifest's "defaults", else 4)
    max_suggestions: int = 3
    max_tokens: int = 24  # generated tokens per line at most
    device: str = "auto"  # "auto", "cpu" or "cuda"
    threads: int = 0  # intra-op threads; 0 lets onnxruntime choose
    memory_budget_mb: int = 256  # KV caches across documents, LRU-evicted past this
    context_tokens: int = 0  # 0: the bundle's default window (its manifest's "defaults", else its whole context)
    search_budget_ms: int = 0  # 0: no limit; else no beam step starts this long after the request came in
    document_repeats: bool = True  # mix what followed earlier repeats of the text into the model's predictions
    repeats_below: bool = True  # the repeats also search the lines below the cursor's (eval.py's card: off)
    open_files: int = 4  # the repeats also search this many other open files, most recently edited first
    search_ahead: bool = True  # the worker searches the line after Enter while idle at the end of a line
    first_by_consensus: bool = True  # first the line the beams agree on most, not the likeliest (consensus.py)
    stop_margin: float = STOP_MARGIN  # nats behind the best finished line at which live beams are given up (inf: never)
    partial_lines: bool = True  # no whole line found: offer the start of the likeliest cut-off one (partial_lines.py)
    fill_in_the_middle: bool = True  # with a FIM bundle, the model reads the lines below the cursor too

    def validate(self) -> None:
        """Raise ValueError naming the first invalid field."""
        if not 0 <= self.beams <= 16:
            raise ValueError("beams must be between 1 and 16, or 0 for the model's default")
        if not 1 <= self.max_suggestions <= 16:
            raise ValueError("max_suggestions must be between 1 and 16")
        if not 1 <= self.max_tokens <= 256:
            raise ValueError("max_tokens must be between 1 and 256")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ValueError("device must be auto, cpu or cuda")
        if not 0 <= self.threads <= 256:
            raise ValueError("threads must be between 0 and 256")
        if not 1 <= self.memory_budget_mb <= 65536:
            raise ValueError("memory_budget_mb must be between 1 and 65536")
        if not 0 <= self.open_files <= 16:
            raise ValueError("open_files must be between 0 and 16")
        if not self.stop_margin > 0:  # also refuses NaN
            raise ValueError("stop_margin must be above 0 (inf: the search never gives up on a live beam)")
        if not 0 <= self.search_budget_ms <= 60000:
            raise ValueError("search_budget_ms must be between 0 (no limit) and 60000")
        if self.context_tokens and self.context_tokens < self.max_tokens + MIN_CONTEXT_TOKENS:
            raise ValueError(f"context_tokens must be 0 (the model's default window) or at least "
                             f"max_tokens + {MIN_CONTEXT_TOKENS} = {self.max_tokens + MIN_CONTEXT_TOKENS}")
        if self.context_tokens > MAX_CONTEXT_TOKENS:
            raise ValueError(f"context_tokens must be at most {MAX_CONTEXT_TOKENS:,}")

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]


def at_cursor(typed_line: str, inserted: str, after: str, score: float | None, source: str) -> Suggestion:
    """A suggestion that inserts `inserted` at the end of `typed_line`, replacing the text `after` the cursor."""
    cursor = len(typed_line)
    return Suggestion(line=typed_line + inserted, text=inserted, start=cursor, end=cursor + len(after),
                      score=round(score, 4) if score is not None else None, source=source)
