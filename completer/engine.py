"""The completion engine: documents in, whole-line suggestions out. No LSP here.

Data flow of one request: clip and clean the text before the cursor (text.py) -> tokenize, back off the last
token for token healing and fit the window (prompt.py) -> reuse the document's cached KV for the longest common
token prefix and run only the new tokens (cache.py, runtime.py) -> beam search to the end of the line (beam.py)
-> filters and the answer (answer.py). A keystroke that types through the last suggestion is answered by
trimming it, without the model (typing_through.py). Each request is a generator of the model calls it needs
(calls.py): run alone here, or beside other requests' by the scheduler (scheduler.py), which batches their beam
steps. This module holds the documents, the model and the searches run ahead (ahead.py), and ties the steps
together.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from .ahead import SearchesAhead, Speculation, answering
from .answer import LineOffer, answer
from .beam import SearchRequest, forced_score, search_steps
from .bundle import Bundle, load_bundle
from .cache import (DocumentCache, DocumentState, common_prefix_length, extend_prefix, prefix_steps,
                    token_kv_bytes)
from .calls import Steps, drive
from .filters import CONTEXT_LINES, LineContext, keep_suggestion, kept_comment, line_context, only_indentation
from .indentation import next_line_indents
from .prefill_chunks import PrefillChunks
from .prompt import Prompts
from .syntax import Syntax, syntax_for
from .repository import RepositoryContext
from .repeats import DocumentRepeats
from .runtime import Runtime
from .text import (MAX_CONTEXT_CHARS, MAX_INSERTED_BYTES, MAX_LINE_CHARS, clean, clip_before, context_slice,
                   looks_binary, rest_of_line, split_lines, text_below)
from .tokens import Tokens
from .typing_through import LastAnswer, typed_through
from .types import (SKIPPED_BINARY, SKIPPED_LONG_LINE, SKIPPED_OUTSIDE, CancelCheck, Cancelled, CompletionResult,
                    EngineSettings, ModelError)

log = logging.getLogger(__name__)

PREFILL_CHUNK_TOKENS = 128  # a prefill runs in chunks at most this long; a background one, as long as takes
# about 25 ms here (completer/prefill_chunks.py): a keystroke in another document waits for one at most


class Engine:
    """Holds the model, the tokenizer and the per-document caches."""

    def __init__(self, settings: EngineSettings | None = None) -> None:
        self.settings = settings or EngineSettings()
        self.settings.validate()
        self.bundle, self.tokens, self.runtime = self._load(self.settings)
        self.background_chunks = PrefillChunks(PREFILL_CHUNK_TOKENS)  # sized by this model's measured speed
        self.cache = DocumentCache(self.settings.memory_budget_mb * 1024 * 1024)
        self.documents: dict[str, list[str]] = {}
        self.languages: dict[str, str] = {}  # per document, the LSP language id it was given (set_language)
        self.prompts = Prompts(self.bundle, self.tokens, self.settings)
        self.ahead = SearchesAhead()  # per document: the answers searched ahead of it (completer/ahead.py)
        self._runs_before_reload = 0
        self.typing_through = True  # benchmarks turn it off to time the model path on every keystroke

    @staticmethod
    def _check_fits(settings: EngineSettings, bundle: Bundle) -> None:
        """The generated line and at least one context token must fit in the model's positions."""
        if settings.max_tokens + 2 > bundle.context_length:
            raise ValueError(f"max_tokens must be below {bundle.context_length - 1} for this model "
                             f"(its context is {bundle.context_length} tokens)")

    @staticmethod
    def _load(settings: EngineSettings) -> tuple[Bundle, Tokens, Runtime]:
        bundle = load_bundle(settings.model_path)
        Engine._check_fits(settings, bundle)
        # the runtime first: it checks the manifest's sizes against the graph, and the tokens are sized by them
        runtime = Runtime(bundle, device=settings.device, threads=settings.threads)
        model_vocab = int(bundle.architecture["vocab_size"]) if "vocab_size" in bundle.architecture else None
        tokens = Tokens(bundle.tokenizer_path, vocab_size=model_vocab, end_of_text=bundle.end_of_text_token)
        own = tokens.tokenizer.get_vocab_size()
        expected = bundle.manifest.get("tokenizer_vocab_size", model_vocab or own)  # a model may pad the vocabulary
        if own != expected:
            raise ModelError(f"{bundle.tokenizer_path}: {own:,} tokens, but the model's vocabulary is "
                             f"{expected:,} (a tokenizer from another bundle?)")
        tokens.ban_markers(bundle.fim_ids or ())
        return bundle, tokens, runtime

    @property
    def beams(self) -> int:
        """The beam width searches use: the user's, else the bundle's default."""
        return self.settings.beams or self.bundle.default_beams

    @property
    def model_runs(self) -> int:
        return self._runs_before_reload + self.runtime.calls

    def configure(self, settings: EngineSettings) -> None:
        """Apply new settings; on any error the old model and settings stay in place."""
        settings.validate()
        old = self.settings
        if (settings.model_path, settings.device, settings.threads) != (old.model_path, old.device, old.threads):
            bundle, tokens, runtime = self._load(settings)
            self._runs_before_reload += self.runtime.calls
            self.bundle, self.tokens, self.runtime = bundle, tokens, runtime
            self.background_chunks = PrefillChunks(PREFILL_CHUNK_TOKENS)  # another model's speed
            self.cache = DocumentCache(settings.memory_budget_mb * 1024 * 1024)
            self.prompts = Prompts(bundle, tokens, settings)  # another tokenizer
        else:
            self._check_fits(settings, self.bundle)
        self.cache.budget_bytes = settings.memory_budget_mb * 1024 * 1024
        self.settings = self.prompts.settings = settings
        if (settings.model_path, settings.device, settings.threads) != (old.model_path, old.device, old.threads):
            self.ahead.clear()  # answers of another model (the answers of other settings are kept by their settings)
        self.cache.enforce_budget()

    # Documents -----------------------------------------------------------------------------
    def open(self, uri: str, text: str, language: str | None = None) -> None:
        self.documents[uri] = split_lines(text)
        if language is not None:
            self.set_language(uri, language)

    def set_language(self, uri: str, language: str | None) -> None:
        """The document's LSP language id, whose rules the filters and the search ahead follow (syntax.py);
        a document never given one (None) is Python, and one given "" none's."""
        if language is None:
            self.languages.pop(uri, None)
        else:
            self.languages[uri] = language

    def _syntax(self, uri: str) -> Syntax:
        return syntax_for(self.languages.get(uri))

    def update(self, uri: str, text: str) -> None:
        self.open(uri, text)

    def close(self, uri: str) -> None:
        self.documents.pop(uri, None)
        self.languages.pop(uri, None)
        self.cache.drop(uri)
        self.ahead.drop(uri)

    def forget_searches_ahead(self, prefix: str = "") -> None:
        """Drop the answers searched ahead for the documents under `prefix`, which the next requests would take
        without running the model: their context (the workspace's snippets) may hold what may no longer be read."""
        self.ahead.drop_under(prefix)

    def complete(self, uri: str, line: int, column: int, is_cancelled: CancelCheck | None = None,
                 others: Sequence[str] = (), snippets: Sequence[str] = ()) -> CompletionResult:
        """Suggestions at a 0-based line and code-point column of an open document; `others` are the texts
        of other files open beside it, most recently edited first."""
        lines = self.documents.get(uri)
        sliced = context_slice(lines, line, column, MAX_CONTEXT_CHARS) if lines is not None else None
        if lines is None or sliced is None:
            return CompletionResult(skipped=SKIPPED_OUTSIDE)
        before, after = sliced
        below = text_below(lines, line, MAX_CONTEXT_CHARS) if self.reads_below else ""
        return self.complete_text(uri, before, after, is_cancelled, below, others, snippets)

    # Completion ----------------------------------------------------------------------------
    def complete_text(self, uri: str, before: str, after: str, is_cancelled: CancelCheck | None = None,
                      below: str = "", others: Sequence[str] = (), snippets: Sequence[str] = (),
                      repository: RepositoryContext | None = None) -> CompletionResult:
        """Suggestions for a cursor with `before` the text before it, `after` the rest of its line, `below`
        the lines after it, `others` the texts of other open files, most recently edited first, and `snippets`
        windows of the repository's other files most like the code at the cursor (completer/workspace.py; all
        three searched by the document's repeats; the snippets also go in the prompt as the files of the
        `repository`, by their paths, where the bundle's template lays a repository out: completer/prompt.py).
        Raises Cancelled when `is_cancelled` turns true between beam steps; otherwise never raises."""
        return drive(self.complete_steps(uri, before, after, below, others, snippets, repository), self.runtime,
                     is_cancelled)

    def complete_steps(self, uri: str, before: str, after: str, below: str = "", others: Sequence[str] = (),
                       snippets: Sequence[str] = (), repository: RepositoryContext | None = None
                       ) -> Steps[CompletionResult]:
        """`complete_text` as the model calls it needs (completer/calls.py), for the scheduler to run beside
        other requests. Raises Cancelled when thrown one at a call; otherwise never raises."""
        started = time.perf_counter()
        foreseen = self.ahead.foreseen(uri, before, after, below, others, self.settings)
        if foreseen is not None:  # searched with nothing after the cursor: its lines replace the blanks there
            line_after = rest_of_line(after)
            suggestions = [replace(s, end=s.start + len(line_after)) for s in foreseen.result.suggestions]
            self.cache.get(uri).last_answer = LastAnswer(clip_before(before)[0], line_after, suggestions,
                                                         answering(self.settings))
            return replace(foreseen.result, suggestions=suggestions, model_runs=0, cached_tokens=0, new_tokens=0,
                           latency_ms=(time.perf_counter() - started) * 1000)
        try:
            result = yield from self._complete(uri, before, after, below, others, snippets, repository)
        except Cancelled:
            raise
        except Exception:  # a bad request must never take the engine down
            log.exception("completion failed for %s", uri)
            result = CompletionResult()
        result.latency_ms = (time.perf_counter() - started) * 1000
        return result

    def foresees(self, uri: str, before: str, after: str, below: str = "", others: Sequence[str] = ()) -> bool:
        """Whether a search ahead, finished or under way with the current settings, is for exactly this request:
        the scheduler then lets it finish instead of stopping it (completer/scheduler.py)."""
        return self.ahead.foresees(uri, before, after, below, others, self.settings)

    def answers_from_ahead(self, uri: str, before: str, after: str, below: str = "", others: Sequence[str] = ()
                           ) -> bool:
        """Whether a finished search ahead answers this request now, without the model."""
        return self.ahead.answers(uri, before, after, below, others, self.settings)

    def prefill(self, uri: str, text: str, is_cancelled: CancelCheck | None = None) -> int:
        """`prefill_steps` run alone; raises Cancelled between chunks, keeping those already run."""
        return drive(self.prefill_steps(uri, text), self.runtime, is_cancelled)

    def prefill_steps(self, uri: str, text: str) -> Steps[int]:
        """Run the model over the context of a cursor at the end of `text` (a document just opened), in chunks
        sized to take about 25 ms each (`background_chunks`, at most PREFILL_CHUNK_TOKENS), so a keystroke in
        another document waits little for one, and the first suggestion in the file pays for its own line
        only: any cursor's context starts with these tokens while the file fits the window.
        With a prefix-suffix-middle FIM bundle the tokens follow its prefix marker, as its prompts' do; a
        suffix-prefix-middle bundle's prompts start with the lines below the cursor, which no prefill can know,
        so it runs none. The document stays least recently used: a prefill never evicts the documents being
        edited, and is the first evicted itself, so one of a document not cached that the budget has no room for
        beside those cached does not run (hundreds of files opened at once would run each for nothing). Returns
        how many tokens ran; Cancelled thrown at a chunk keeps those already run."""
        before, at_start = clip_before(text)
        if looks_binary(before) or (self.fim_ids is not None and self.bundle.fim_order == "spm"):
            return 0
        fresh = uri not in self.cache
        state = self.cache.get_quietly(uri)
        repository = self.prompts.last_repository(state)  # the files its last prompt laid out come first again
        ids, _, document, _ = self.prompts.context_ids(state, before, at_start, repository=repository)
        if self.fim_ids is not None and self.bundle.fim_order == "psm":
            marker = self.prompts.start_marker
            start = len(marker) if at_start and document[:len(marker)] == marker else 0
            files = ids[:ids.index(self.fim_ids[0])] if self.fim_ids[0] in ids else []
            ids = [*files, self.fim_ids[0], *document[start:]][:len(ids)]
        prompt = ids[:-1]  # as a completion's: its last token goes to the search, not the prefix
        if common_prefix_length(state.ids, prompt) == len(prompt):
            return 0
        empty = self.runtime.empty_prefix()
        if fresh and self.cache.nbytes + token_kv_bytes(empty) * len(prompt) > self.cache.budget_bytes:
            self.cache.drop(uri)  # the first evicted, it would be evicted as soon as it ran
            return 0
        ran = (yield from prefix_steps(state, empty, prompt, self.background_chunks))[1]
        self.cache.enforce_budget()
        return ran

    def search_next_line(self, uri: str, before: str, below: str = "", others: Sequence[str] = (),
                         is_cancelled: CancelCheck | None = None, snippets: Sequence[str] = (),
                         repository: RepositoryContext | None = None) -> int:
        """`search_next_line_steps` run alone; raises Cancelled between beam steps, keeping the searches done."""
        return drive(self.search_next_line_steps(uri, before, below, others, snippets, repository), self.runtime,
                     is_cancelled)

    def search_next_line_steps(self, uri: str, before: str, below: str = "", others: Sequence[str] = (),
                               snippets: Sequence[str] = (), repository: RepositoryContext | None = None
                               ) -> Steps[int]:
        """Run ahead the searches for the line after Enter at the end of `before`'s last line, at the indentations
        it most likely starts at (`next_line_indents`), while the user has not asked for anything, and keep their
        answers for those requests: the first keystroke on a new line searches a whole line, the slowest search
        there is. On a line holding only indentation, Enter leaves it blank: editors take the indentation off it
        (VS Code's trimAutoWhitespace, Vim's autoindent) and give it to the new line, which is searched at that
        indentation, beside the searches kept from the line before. The last answer stays as it was, so typing
        on in the line still types through it. Returns how many were searched; Cancelled thrown at a beam step
        keeps those already done."""
        cut = before.rfind("\n")
        line = before[cut + 1:]
        if line.strip():
            aheads = [before + "\n" + indent
                      for indent in next_line_indents(line, before[:max(cut, 0)], self._syntax(uri))]
        else:
            aheads = [before[:len(before) - len(line)] + "\n" + line]
        kept = self.ahead.start(uri, [(ahead, below, tuple(others)) for ahead in aheads], self.settings,
                                fresh=bool(line.strip()))
        state = self.cache.get(uri)
        last_answer = state.last_answer
        # A FIM prompt for the next line is not an extension of this line's (the line moves into the prefix, or
        # the lines below change), so this line's cached prompt is put back: the next keystroke in it then
        # costs one token, not the whole prompt after the shared head.
        cached = (state.ids, state.keys, state.values) if self.fim_ids is not None else None
        try:
            for ahead in aheads:
                settings = self.settings  # what this search runs with: _complete reads them before its first call
                result = yield from self._complete(uri, ahead, "", below, others, snippets, repository)
                self.ahead.keep(kept, Speculation((ahead, below, tuple(others)), settings, result))
        finally:
            self.ahead.finish(uri)
            state = self.cache.get(uri)
            state.last_answer = last_answer
            if cached is not None:
                state.ids, state.keys, state.values = cached
                self.cache.enforce_budget(keep=uri)
        return len(aheads)

    def _typed_through(self, uri: str, before: str, after: str) -> CompletionResult | None:
        """`typed_through` the document's last answer, if searched with the settings this request runs with, unless
        benchmarks turned typing through off."""
        if not self.typing_through or uri not in self.cache:
            return None
        last = self.cache.get(uri).last_answer
        if not isinstance(last, LastAnswer) or last.settings != answering(self.settings):
            return None  # an answer searched with other settings (more suggestions, another window) is not trimmed
        return typed_through(last, before, after)

    @staticmethod
    def _line_context(state: DocumentState, head: str, syntax: Syntax) -> LineContext:
        """The filters' view of the lines above the cursor, recomputed only when they change."""
        memo = state.context_memo[1]
        if state.context_memo[0] != head or not isinstance(memo, LineContext) or memo.syntax is not syntax:
            lines = head[:-1].rsplit("\n", CONTEXT_LINES) if head else []
            state.context_memo = (head, line_context(lines, syntax))
        return state.context_memo[1]  # type: ignore[return-value]

    @property
    def fim_ids(self) -> tuple[int, int, int] | None:
        """The bundle's (prefix, suffix, middle) ids when the engine prompts with the lines below, else None."""
        return self.prompts.fim_ids

    @property
    def reads_below(self) -> bool:
        """Whether a request's lines below the cursor are used: by the document's repeats or by a FIM prompt."""
        settings = self.settings
        return (settings.document_repeats and settings.repeats_below) or self.fim_ids is not None

    def _repeats(self, state: DocumentState, document: list[int], window: int, below: str,
                 others: Sequence[str] = (), snippets: Sequence[str] = ()) -> DocumentRepeats | None:
        """The document's own repeats for the beam step (the model's window is the last `window` of the
        `document` ids; the lines `below` the cursor's are searched too, placed before them, and the heads
        of the other open files before those, and the repository's snippets first), unless switched off or the
        bundle predates them."""
        if not (self.settings.document_repeats and self.runtime.mixes_repeats):
            return None
        parts = [self.prompts.other_ids(text) for text in (*snippets, *others[:self.settings.open_files])]
        others_end = sum(len(part) for part in parts)
        if below and self.settings.repeats_below:
            parts.append(self.prompts.below_ids(state, below))
        ids: Sequence[int] = np.concatenate([*parts, np.asarray(document, dtype=np.int64)]) if parts else document
        return DocumentRepeats(ids, self.tokens.vocab_size, window_start=len(ids) - window, others_end=others_end)

    def _complete(self, uri: str, before: str, after: str, below: str = "", others: Sequence[str] = (),
                  snippets: Sequence[str] = (), repository: RepositoryContext | None = None
                  ) -> Steps[CompletionResult]:
        budget_ms = self.settings.search_budget_ms
        deadline = time.perf_counter() + budget_ms / 1000 if budget_ms else None
        full_line = before[before.rfind("\n") + 1:]
        if len(full_line) + len(after) > MAX_LINE_CHARS:
            return CompletionResult(skipped=SKIPPED_LONG_LINE)
        before, at_start = clip_before(before)
        after = rest_of_line(after)
        through = self._typed_through(uri, before, after)
        if through is not None:  # extends an answer given for text that was not binary
            return through
        if looks_binary(before):
            return CompletionResult(skipped=SKIPPED_BINARY)
        settings, tokens = self.settings, self.tokens
        line_start = before.rfind("\n") + 1
        typed_line = full_line  # the whole typed line, even when the context clipped inside it
        state = self.cache.get(uri)
        context = self._line_context(state, before[:line_start], self._syntax(uri))
        ids, healed, document, window = self.prompts.context_ids(state, before, at_start, below, repository)
        repeats = self._repeats(state, document, window, below, others, snippets)
        beams = self.beams
        # Everything that depends on the settings is read above: another window's settings may apply to the
        # engine while this request waits for its calls (completer/scheduler.py).
        counter = [0]  # this request's model runs
        reused, new = yield from _counted(prefix_steps(state, self.runtime.empty_prefix(), ids[:-1],
                                                       PREFILL_CHUNK_TOKENS), counter)
        request = SearchRequest(prefix=state.prefix(), position=len(ids) - 1, last_token=ids[-1], healed=healed,
                                beams=beams, lines_wanted=settings.max_suggestions,
                                margin=settings.stop_margin, max_tokens=settings.max_tokens, deadline=deadline,
                                indent_only=only_indentation(typed_line),
                                max_new_bytes=MAX_INSERTED_BYTES + len(healed), repeats=repeats)
        offer = LineOffer(tokens, healed, typed_line, after, context, kept_comment(typed_line, after, context))
        request.offerable = offer.is_new  # the search stops once the lines it will show have ended
        search = yield from _counted(search_steps(self.runtime.empty_past(1), tokens, request), counter)
        suggestions = answer(search.hypotheses, offer, settings, before[:line_start], snippets)
        state.last_answer = LastAnswer(before, after, suggestions, answering(settings))
        self.cache.enforce_budget(keep=uri)
        return CompletionResult(suggestions=suggestions, model_runs=counter[0],
                                cached_tokens=reused, new_tokens=new, out_of_time=search.out_of_time)

    def line_score(self, uri: str, before: str, rest: str, below: str = "", others: Sequence[str] = (),
                   snippets: Sequence[str] = (), repository: RepositoryContext | None = None) -> float | None:
        """The log-probability the beam search would give the line ending in `rest` (then a newline) at the
        cursor after `before`: evaluation compares it with the suggestions' scores to tell a line the search
        missed from one the model ranks low. None when the search could not produce it: more tokens than
        `max_tokens`, or a context the engine does not complete. The filters are not asked (`would_offer`)."""
        typed_line = before[before.rfind("\n") + 1:]
        before, at_start = clip_before(before)
        if looks_binary(before) or "\n" in rest or len(typed_line) + len(rest) > MAX_LINE_CHARS:
            return None
        state = self.cache.get(uri)
        ids, healed, document, window = self.prompts.context_ids(state, before, at_start, below, repository)
        try:
            tail = healed.decode("utf-8") + rest
        except UnicodeDecodeError:  # the healed token ends inside a character
            return None
        continuation = self.tokens.encode(clean(tail)) + [self.tokens.newline_id]
        if len(continuation) > self.settings.max_tokens:
            return None
        extend_prefix(state, self.runtime, ids[:-1])
        score = forced_score(self.runtime, state.prefix(), len(ids) - 1, ids[-1], continuation,
                             self._repeats(state, document, window, below, others, snippets))
        self.cache.enforce_budget(keep=uri)  # as after a completion: the KV it may have added counts too
        return score

    def would_offer(self, uri: str, before: str, rest: str) -> bool:
        """Whether the filters let the line ending in `rest` through at the cursor after `before`."""
        typed_line = before[before.rfind("\n") + 1:]
        before, _ = clip_before(before)
        context = self._line_context(self.cache.get(uri), before[:before.rfind("\n") + 1], self._syntax(uri))
        return keep_suggestion(typed_line + rest, rest, "", context)

    # Introspection -------------------------------------------------------------------------
    def info(self) -> dict:
        files = self.bundle.manifest.get("files", {})
        return {
            "model": self.bundle.name,
            "model_path": str(self.bundle.path),
            "languages": list(self.bundle.languages),  # what gets suggestions unless enabledLanguages says
            "providers": self.runtime.providers,
            "searches_per_call": self.runtime.batch_slots,  # how many searches one model call can hold
            "threads": self.settings.threads or "onnxruntime default",
            "context_length": self.bundle.context_length,
            "context_window": self.prompts.window_tokens(),  # what the model reads at most, these settings
            "beams": self.beams,
            "vocab_size": self.tokens.vocab_size,
            "architecture": self.bundle.architecture,
            "model_bytes": files.get("model.onnx", {}).get("bytes"),
            "fp32_onnx_bytes": self.bundle.manifest.get("fp32_onnx_bytes"),
            "runtime_bundle_bytes": self.bundle.runtime_bytes,
            "documents_cached": len(self.cache.uris()),
            "cache_bytes": self.cache.nbytes,
            "memory_budget_mb": self.settings.memory_budget_mb,
            "model_runs": self.model_runs,
            "settings": self.settings.__dict__.copy(),
        }


def _counted(steps: Steps, counter: list[int]) -> Steps:
    """`steps`, counting the calls it makes in counter[0]: a request's own model runs, whatever else the
    runtime runs beside it."""
    output = None
    while True:
        try:
            call = steps.send(output)
        except StopIteration as done:
            return done.value
        counter[0] += 1
        try:
            output = yield call
        except BaseException as exc:  # Cancelled, or the generator closed: the inner steps clean up first
            try:
                steps.throw(exc)
            except StopIteration as done:
                return done.value
            raise
