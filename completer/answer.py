"""The answer to a completion: the lines the beam search finished, turned into suggestions. Each line is decoded
after the healed bytes and must pass the filters; the first is the one the beams agree on most; when no line
ended, the start of the likeliest one is offered; and the nearest earlier line of the file that begins with the
typed text (or, failing that, a line of the workspace's snippets) comes last.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .beam import Hypothesis
from .consensus import consensus_index
from .earlier_lines import file_line, workspace_line
from .filters import LineContext, kept_insertion
from .partial_lines import partial_line
from .tokens import Tokens
from .types import (SOURCE_EARLIER_LINE, SOURCE_MODEL, SOURCE_PARTIAL_LINE, SOURCE_WORKSPACE_LINE, EngineSettings,
                    Suggestion, at_cursor)


@dataclass
class LineOffer:
    """What a finished line of generated tokens inserts at the cursor, if the filters let it through. The
    suggestions and the search's stop ask the same question, so the search does not stop on lines that
    would then be dropped; each line is decoded and filtered once, for both."""

    tokens: Tokens
    healed: bytes  # typed bytes the generated tokens re-spell first (token healing)
    typed_line: str
    after: str  # the rest of the cursor's line, which a suggestion replaces
    context: LineContext
    comment: str = ""  # the comment `after` ends with, which a suggestion keeps (filters.kept_comment)
    counted: set[str] = field(default_factory=set)  # the insertions `is_new` has counted
    _answers: dict[tuple[int, ...], str | None] = field(default_factory=dict)  # `inserted` by generated tokens

    def inserted(self, generated: list[int]) -> str | None:
        key = tuple(generated)
        if key not in self._answers:
            inserted = self.tokens.after_healed(generated, self.healed)
            self._answers[key] = self.kept(inserted) if inserted is not None else None
        return self._answers[key]

    def kept(self, inserted: str) -> str | None:
        """What `inserted`, a line's text after the cursor, puts there if the filters let it through: itself and the
        comment after the cursor; None when they do not."""
        return kept_insertion(self.typed_line, inserted, self.after, self.comment, self.context)

    def is_new(self, generated: list[int]) -> bool:
        """Whether the line would be offered and is not one already counted (another spelling of it)."""
        inserted = self.inserted(generated)
        if inserted is None or inserted in self.counted:
            return False
        self.counted.add(inserted)
        return True


def answer(hypotheses: Sequence[Hypothesis], offer: LineOffer, settings: EngineSettings, head: str,
           elsewhere: Sequence[str] = ()) -> list[Suggestion]:
    """The suggestions from a search's hypotheses (best first), at most settings.max_suggestions; `head` is the
    text above the cursor's line, where an earlier line may come from, and `elsewhere` the workspace's snippets,
    where one may come from when the file has none."""
    suggestions: list[Suggestion] = []
    seen: set[str] = set()
    scores: list[float] = []  # the unrounded scores of `suggestions`, for the consensus
    typed_line, after = offer.typed_line, offer.after
    for hyp in hypotheses:
        if not hyp.finished:
            continue  # cut off at max_tokens: not a whole line
        inserted = offer.inserted(hyp.tokens)
        if inserted is None or typed_line + inserted in seen:
            continue
        seen.add(typed_line + inserted)
        scores.append(hyp.score)
        suggestions.append(at_cursor(typed_line, inserted, after, hyp.score, SOURCE_MODEL))
    if settings.first_by_consensus and suggestions:  # chosen among every line kept, before the cut
        first = consensus_index([s.line for s in suggestions], scores)
        suggestions.insert(0, suggestions.pop(first))
    del suggestions[settings.max_suggestions:]
    if not suggestions and settings.partial_lines and not after.strip():
        offer_partial_line(suggestions, hypotheses, offer)
    if settings.document_repeats:
        offer_earlier_line(suggestions, head, offer, settings.max_suggestions, elsewhere)
    return suggestions


def offer_partial_line(suggestions: list[Suggestion], hypotheses: Sequence[Hypothesis], offer: LineOffer) -> None:
    """No whole line was found: offer the start of the likeliest beam the search cut off, if enough is left."""
    cut_off = next((hyp for hyp in hypotheses if not hyp.finished), None)  # best first
    text = partial_line(offer.tokens, cut_off.tokens, offer.healed, offer.typed_line, offer.context.syntax) \
        if cut_off is not None else None
    if text is not None:
        suggestions.append(at_cursor(offer.typed_line, text, offer.after, cut_off.score, SOURCE_PARTIAL_LINE))


def offer_earlier_line(suggestions: list[Suggestion], head: str, offer: LineOffer, limit: int,
                       elsewhere: Sequence[str] = ()) -> None:
    """Put the nearest earlier line that begins with the typed line after the model's lines (in the last place
    when they fill the list, never in the model's first), unless it is among them already or the filters refuse
    it. A line of `elsewhere` says so (its source), as it is not one of the file."""
    typed_line, after = offer.typed_line, offer.after
    line, source = file_line(head, typed_line), SOURCE_EARLIER_LINE
    if line is None and elsewhere:
        line, source = workspace_line(head, typed_line, elsewhere), SOURCE_WORKSPACE_LINE
    inserted = offer.kept(line[len(typed_line):]) if line is not None else None
    if inserted is None or any(s.line == typed_line + inserted for s in suggestions):
        return
    if len(suggestions) >= limit:
        if limit < 2:
            return
        del suggestions[limit - 1:]
    suggestions.append(at_cursor(typed_line, inserted, after, None, source))
