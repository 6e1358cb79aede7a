"""The tokens the model reads for a cursor: the text before it encoded (each line once, kept per document),
the word at the cursor backed off for token healing (`heal`), the window slid in coarse jumps so the KV cache
survives typing, and with a fill-in-the-middle bundle the FIM prompt around the lines below, after the
workspace's snippets laid out as files where the model was trained on whole repositories
(completer/repository.py). The engine (completer/engine.py) asks `Prompts.context_ids` for every request; the
document's repeats take `below_ids` and `other_ids`.
"""
from __future__ import annotations

import math

import numpy as np

from .bundle import Bundle
from .cache import DocumentState, common_prefix_length
from .repository import REPOSITORY_FORMATS, RepositoryContext, document_opening, repository_head_ids
from .text import clean, head_of_file
from .tokens import Tokens
from .types import MIN_CONTEXT_TOKENS, EngineSettings

WINDOW_SLIDE_TOKENS = 256  # the context window jumps by this much when it slides
OTHER_FILES_KEPT = 32  # other open files' tokens kept between requests (they change only when edited)
FIM_SUFFIX_TOKENS = 128  # the lines below the cursor a FIM prompt holds: the nearest ones say most
MIN_FIM_CONTEXT_TOKENS = 64  # a FIM prompt keeps this much of the text before the cursor (half a small window)
REPOSITORY_SHARE = 4  # the workspace's files take at most a quarter of a FIM prompt's window
NEW_FILES_AFTER_TOKENS = 128  # new files replace a prompt's only where its cache keeps at most this much after them
HEALED_WORD_TOKENS = 4  # token healing backs off at most this many tokens of the word at the cursor


def _word_byte(byte: int) -> bool:
    """A byte of a name: ASCII letters, digits, `_`, and every byte of a non-ASCII character (bytes, not
    characters, as known_names._word_char reads them: a token may end inside a character)."""
    return byte >= 0x80 or byte == 0x5F or 0x30 <= byte <= 0x39 or 0x41 <= byte <= 0x5A or 0x61 <= byte <= 0x7A


def heal(tokens: Tokens, ids: list[int]) -> tuple[list[int], bytes]:
    """Back off the last token, and the rest of the word it ends (up to HEALED_WORD_TOKENS tokens, with the
    space before it): the search then spells the typed bytes again with the tokens the model would have used
    for the whole word. `except Valu` encodes as `except`, ` `, `Val`, `u`, where the model writes ` ValueError`
    in one token: backing off `u` alone leaves it to finish a word it never saw split there."""
    healed = tokens.token_bytes[ids[-1]]
    ids = ids[:-1]
    for _ in range(HEALED_WORD_TOKENS - 1):
        if len(ids) < 2 or not healed or not _word_byte(healed[0]):
            break
        previous = tokens.token_bytes[ids[-1]]
        if previous == b" " or (previous and _word_byte(previous[-1])):
            healed, ids = previous + healed, ids[:-1]
            if not _word_byte(previous[0]):  # it opens the word (` version`, `.app`): the word is whole
                break
        else:
            break
    return ids, healed


def slid_start(length: int, limit: int) -> int:
    """Where a window of at most `limit` tokens starts in `length` tokens: it slides in coarse jumps, so the
    cache survives typing."""
    if length <= limit:
        return 0
    slide = min(WINDOW_SLIDE_TOKENS, max(1, limit // 4))
    return math.ceil((length - limit) / slide) * slide


def code_line_start(text: str, at: int) -> int:
    """The start of the last line at or before `at` (a line start) that begins with code, not with any white
    space (a form feed too: pre-tokenizers join it with the newlines around it); 0 when there is none."""
    while at > 0:
        if at < len(text) and not text[at].isspace():
            return at
        at = text.rfind("\n", 0, at - 1) + 1
    return 0


class Prompts:
    """Builds the model's input for the engine's requests; holds the other open files' tokens between them."""

    def __init__(self, bundle: Bundle, tokens: Tokens, settings: EngineSettings) -> None:
        self.bundle = bundle
        self.tokens = tokens
        self.settings = settings  # the engine's, replaced when they change
        self._other_file_ids: dict[str, np.ndarray] = {}  # other open files' tokens by text, oldest use first
        self.repository_markers = self._repository_markers()
        self.start_marker = self._start_marker()

    def _repository_markers(self) -> tuple[int, int] | None:
        """The ids of the bundle's repository-name and file-separator markers, where its FIM template has them
        (REPOSITORY_FORMATS) and its tokenizer holds both; else None: the snippets reach the repeats alone."""
        layout = REPOSITORY_FORMATS.get(self.bundle.fim_template or "")
        if layout is None or self.bundle.fim_order != "psm":
            return None
        ids = tuple(self.tokens.tokenizer.token_to_id(marker) for marker in layout.markers)
        return ids if all(isinstance(i, int) for i in ids) else None  # type: ignore[return-value]

    def _start_marker(self) -> list[int]:
        """What a prompt at the top of a document starts with: end-of-text, which training put after every file.
        A model with learned positions gets a newline before it, as the file before ended: its training windows
        start at random places in the stream of files, almost never on the marker itself, so a lone end-of-text
        at position 0 reads to it as the middle of some code (`:`, `def`, an indentation come first, where after
        `\n<|endoftext|>` it expects `#`, `import`, `from` or a docstring)."""
        end = self.tokens.end_of_text_id
        return [self.tokens.newline_id, end] if self.bundle.learned_positions else [end]

    def window_tokens(self) -> int:
        """The tokens the model reads at most: the user's `context_tokens`, else the bundle's default window;
        never more than the model's context, nor (a bundle's default) less than a line and its context need."""
        chosen = self.settings.context_tokens or self.bundle.default_context_tokens
        return min(max(chosen, self.settings.max_tokens + MIN_CONTEXT_TOKENS), self.bundle.context_length)

    @property
    def fim_ids(self) -> tuple[int, int, int] | None:
        """The bundle's (prefix, suffix, middle) ids when the engine prompts with the lines below, else None."""
        return self.bundle.fim_ids if self.settings.fill_in_the_middle else None

    def context_ids(self, state: DocumentState, before: str, at_start: bool, below: str = "",
                    repository: RepositoryContext | None = None) -> tuple[list[int], bytes, list[int], int]:
        """The context's token ids, the word at the cursor backed off for token healing (`heal`; its bytes
        returned: the first generated tokens must spell them), inside the model's window; the same document ids
        from the start of the clipped text, which the document's repeats search; and how many of those the
        window holds (their tail). With a FIM bundle and lines below, the window is the FIM prompt (`_fim_ids`,
        `_fim_psm_ids`), after the `repository`'s files where the bundle reads them (`repository_ids`)."""
        tokens = self.tokens
        encoded, head_count = self.encode(state, clean(before))
        marker = self.start_marker if at_start else []
        ids = marker + encoded
        head_count += len(marker)
        healed = b""
        # Token healing: regenerate the word at the cursor. A lone newline is kept where newlines are always lone
        # tokens (nothing could re-spell it otherwise); a merged one ("\n   ") is healed like any other.
        bare_newline = ids and ids[-1] == tokens.newline_id and tokens.isolates_newlines
        if len(ids) > 1 and not bare_newline and ids[-1] != tokens.end_of_text_id:
            ids, healed = heal(tokens, ids)
        if not ids:
            ids = [tokens.end_of_text_id]
        document = ids
        limit = self.window_tokens() - self.settings.max_tokens - 1  # >= 1: _check_fits
        psm = self.bundle.fim_order == "psm"  # released FIM models: always this template, so all prompts share a head
        if self.fim_ids is not None and (below.strip() or psm):
            if psm:
                fim = self._fim_with_files(state, document, min(head_count, len(document)), len(marker), below,
                                           limit, repository)
            else:
                fim = self._fim_ids(state, document, below, limit)
            if fim is not None:
                return fim[0], healed, document, fim[1]
        if len(ids) > limit:  # slide the window in coarse jumps so the cache survives typing
            ids = ids[slid_start(len(ids), limit):]
        return ids, healed, document, len(ids)

    def _fim_ids(self, state: DocumentState, document: list[int], below: str, limit: int
                 ) -> tuple[list[int], int] | None:
        """The FIM prompt in suffix-prefix-middle order, `<prefix> <suffix> lines below <middle> text before the
        cursor`, and how many document ids it holds. The text before the cursor comes last, as in a plain
        prompt, so typing within a line only extends the cached prompt and the window slides as the plain one
        does; a new line changes the lines below, and the prompt is run again. The suffix starts at the next
        line's start, as in training, and keeps at most FIM_SUFFIX_TOKENS (a quarter of a small window). None
        when the window could not hold enough of the text before the cursor beside it: the plain prompt is used."""
        prefix_id, suffix_id, middle_id = self.fim_ids  # type: ignore[misc]
        suffix = self._fim_suffix(state, below, limit)
        room = limit - 3 - len(suffix)
        if room < min(MIN_FIM_CONTEXT_TOKENS, limit // 2):
            return None
        kept = document[slid_start(len(document), room):]
        return [prefix_id, suffix_id, *suffix, middle_id, *kept], len(kept)

    def _fim_suffix(self, state: DocumentState, below: str, limit: int) -> list[int]:
        """A FIM prompt's lines below the cursor: the nearest FIM_SUFFIX_TOKENS, at most a quarter of the window;
        none when there is nothing below."""
        return self.below_ids(state, below)[:min(FIM_SUFFIX_TOKENS, limit // 4)].tolist() if below.strip() else []

    def _fim_psm_ids(self, state: DocumentState, document: list[int], head_count: int, marker: int, below: str,
                     limit: int, files: list[int]) -> tuple[list[int], int] | None:
        """The FIM prompt in prefix-suffix-middle order, as released FIM models were trained: `<prefix> text up
        to the cursor's line <suffix> lines below <middle> the typed part of the line`, after the workspace's
        `files` (`repository_ids`: everything before the document's text, the prefix marker included; they are
        left out when the window cannot hold them too). The typed part comes last, so typing within a line only
        extends the cached prompt; a new line changes the prefix and the prompt is run again. It is used with
        nothing below the cursor too (an empty suffix), so every prompt in a file starts with the same head, which
        Engine.prefill runs ahead. The document-start marker is left out (`marker` leading ids): the template
        starts the text. None when the window cannot hold the typed line beside the suffix: the plain prompt is
        used."""
        prefix_id, suffix_id, middle_id = self.fim_ids  # type: ignore[misc]
        suffix = self._fim_suffix(state, below, limit)
        head, line = document[marker:head_count], document[head_count:]
        room = limit - 2 - len(suffix) - len(line)  # beside the suffix and middle markers
        least = min(MIN_FIM_CONTEXT_TOKENS, limit // 2)
        opening = files if files and room - len(files) >= least else [prefix_id]
        if room - 1 < least:
            return None
        kept = head[slid_start(len(head), room - len(opening)):]
        return [*opening, *kept, suffix_id, *suffix, middle_id, *line], len(kept) + len(line)

    def _fim_with_files(self, state: DocumentState, document: list[int], head_count: int, marker: int, below: str,
                        limit: int, repository: RepositoryContext | None) -> tuple[list[int], int] | None:
        """`_fim_psm_ids` after the files the document's prompts start with (`repository_ids`). Other snippets
        (the server picks them again once the lines above say other names) replace those files only where the
        document's cache would keep no more than NEW_FILES_AFTER_TOKENS after them: everything after the files
        is run again when they change, which costs a large model seconds on a small CPU, so they change when the
        prompt is mostly run again anyway (a first request, an edit far above, the window sliding)."""
        files = state.repository_memo[1]
        fim = self._fim_psm_ids(state, document, head_count, marker, below, limit, files)
        key = (repository, limit // REPOSITORY_SHARE) if repository is not None else None
        if self.repository_markers is None or key == state.repository_memo[0]:
            return fim
        opening = max(len(files), 1)  # the files and the prefix marker, or the marker alone
        if fim is not None and common_prefix_length(state.ids, fim[0]) > opening + NEW_FILES_AFTER_TOKENS:
            return fim
        state.repository_memo = (key, self.repository_ids(repository, limit))
        return self._fim_psm_ids(state, document, head_count, marker, below, limit, state.repository_memo[1])

    def repository_ids(self, repository: RepositoryContext | None, limit: int) -> list[int]:
        """What a FIM prompt starts with before the document's text where the bundle's template reads a
        repository: the `repository`'s snippets laid out as files, the FIM prefix marker, and the document's path
        where the format puts it after that marker; at most a REPOSITORY_SHARE of the window. [] for other
        bundles, no repository, or no room."""
        if self.repository_markers is None or repository is None or self.fim_ids is None:
            return []
        template = self.bundle.fim_template or ""
        opening = [self.fim_ids[0], *self.tokens.encode(document_opening(template, repository))]
        head = repository_head_ids(template, repository, limit // REPOSITORY_SHARE - (len(opening) - 1),
                                   self.tokens.encode, self.repository_markers)
        return [*head, *opening] if head else []

    def last_repository(self, state: DocumentState) -> RepositoryContext | None:
        """The repository the document's prompts lay out (a prefill of the document keeps their files)."""
        key = state.repository_memo[0]
        return key[0] if isinstance(key, tuple) else None

    def encode(self, state: DocumentState, text: str) -> tuple[list[int], int]:
        """Tokens of `text`, and how many of them come before the cursor's line. Where a newline is always its
        own pre-token (our own vocabularies) only the cursor's line is encoded again: the tokens of the lines
        above never depend on it. Vocabularies that merge newlines with their neighbours ("):\n", "\n   ")
        are encoded whole, so the model sees the tokens it was trained on; the head then ends at the last
        token boundary at or before the line start."""
        line_start = text.rfind("\n") + 1
        head = text[:line_start]
        if not self.tokens.isolates_newlines:
            return self._encode_merged(state, text, line_start)
        if state.token_memo[0] != head:  # a new line or an edit above: only unseen lines are encoded
            state.token_memo = (head, self.encode_lines(state.head_line_tokens, head[:-1]) if head else [])
        return state.token_memo[1] + self.tokens.encode(text[line_start:]), len(state.token_memo[1])

    def _encode_merged(self, state: DocumentState, text: str, line_start: int) -> tuple[list[int], int]:
        """`encode` for a vocabulary that merges newlines: the text up to the last line that starts with code
        at or before the cursor's line is encoded once and kept; only the rest is encoded again. Byte-level
        BPE pre-tokenizers never join a newline with a letter or punctuation after it, so the tokens of the two
        parts are the tokens of the whole (an indented line is no such place: "\n   " can be one token)."""
        safe = code_line_start(text, line_start)
        head = text[:safe]
        if state.token_memo[0] != head:
            state.token_memo = (head, self.tokens.encode(head) if head else [])
        tail, before_line = self.tokens.encode_split(text[safe:], line_start - safe)
        return state.token_memo[1] + tail, len(state.token_memo[1]) + before_line

    def encode_lines(self, known: dict[str, list[int]], text: str) -> list[int]:
        """Tokens of `text` followed by a newline, built from each line's tokens, which `known` keeps between
        calls (a newline is always a token of its own: a text's tokens are its lines' tokens with newlines).
        `known` is left holding only `text`'s lines. A vocabulary that merges newlines encodes the text whole."""
        if not self.tokens.isolates_newlines:
            return self.tokens.encode(text + "\n")
        lines = text.split("\n")
        missing = [line for line in dict.fromkeys(lines) if line not in known]
        known.update(zip(missing, self.tokens.encode_many(missing)))
        ids: list[int] = []
        for line in lines:
            ids += known[line]
            ids.append(self.tokens.newline_id)
        kept = {line: known[line] for line in lines}
        known.clear()
        known.update(kept)
        return ids

    def below_ids(self, state: DocumentState, below: str) -> np.ndarray:
        """The tokens of the lines `below` the cursor's, then a newline. They stay put while the user types
        on one line; moving to another line changes them by a line or two, so each line's tokens are kept."""
        if state.below_memo[0] != below:
            state.below_memo = (below, np.asarray(self.encode_lines(state.below_line_tokens, clean(below)),
                                                  dtype=np.int64))
        return state.below_memo[1]

    def other_ids(self, text: str) -> np.ndarray:
        """The tokens of another open file's head (then a newline), kept while the file stays unchanged."""
        ids = self._other_file_ids.pop(text, None)
        if ids is None:
            head = clean(head_of_file(text)).removesuffix("\n")
            ids = np.asarray(self.encode_lines({}, head), dtype=np.int64)
            while len(self._other_file_ids) >= OTHER_FILES_KEPT:
                del self._other_file_ids[next(iter(self._other_file_ids))]
        self._other_file_ids[text] = ids  # the most recent use last
        return ids
