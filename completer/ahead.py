"""The answers of searches run ahead of the user (the line after Enter, searched while the user pauses at the end
of a line; Engine.search_next_line_steps), kept per document for exactly the request each one foresaw.

A kept answer serves a request only if it was searched with the settings the request runs with: on the shared
engine, windows with other settings (beams, maxSuggestions) take turns, and each one's answers stay its own.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from .types import CompletionResult, EngineSettings

SPECULATIONS_KEPT = 4  # searches run ahead kept per document: Enter, the dedent, Enter again on blank lines

Request = tuple[str, str, tuple[str, ...]]  # (text before the cursor, lines below, other open files)


@dataclass
class Speculation:
    """A search run ahead for the line after Enter, kept for the request it foresaw."""

    request: Request
    settings: EngineSettings  # those it was searched with
    result: CompletionResult


class SearchesAhead:
    """Per document, the answers searched ahead and the requests of the search ahead under way."""

    def __init__(self) -> None:
        self._kept: dict[str, list[Speculation]] = {}
        self._under_way: dict[str, tuple[EngineSettings, list[Request]]] = {}

    def start(self, uri: str, requests: list[Request], settings: EngineSettings, fresh: bool) -> list[Speculation]:
        """A search ahead begins for these requests; the list its answers go into. `fresh`: the answers kept
        from before are dropped (a new line of code), else they stay beside the new ones (Enter on a blank line)."""
        kept = self._kept.setdefault(uri, [])
        if fresh:
            kept.clear()
        self._under_way[uri] = (settings, requests)
        return kept

    @staticmethod
    def keep(kept: list[Speculation], speculation: Speculation) -> None:
        kept.append(speculation)
        del kept[:-SPECULATIONS_KEPT]

    def finish(self, uri: str) -> None:
        """The search ahead under way for the document ended (finished, stopped or failed)."""
        self._under_way.pop(uri, None)

    def drop(self, uri: str) -> None:
        self._kept.pop(uri, None)
        self._under_way.pop(uri, None)

    def clear(self) -> None:
        self._kept.clear()

    def drop_under(self, prefix: str) -> None:
        """Drop the answers of every document whose name starts with `prefix` (one client's, on the shared
        engine): they were searched with context the client may no longer read (a file newly excluded)."""
        for uri in [uri for uri in {*self._kept, *self._under_way} if uri.startswith(prefix)]:
            self.drop(uri)

    def foreseen(self, uri: str, before: str, after: str, below: str, others: Sequence[str],
                 settings: EngineSettings) -> Speculation | None:
        """The answer searched ahead for exactly this request, if any. A request none of them foresaw (the user
        typed on) drops them all; one that was foreseen keeps the others (the user may dedent next). The
        repository's snippets are picked again after Enter, from the new lines above; an answer searched with
        the last line's snippets still serves (they only nudge the repeats)."""
        kept = self._kept.get(uri)
        if not kept:
            return None
        found = self._match(kept, (before, below, tuple(others)), settings)
        if found is None or after.strip():
            del self._kept[uri]
            return None
        return found

    def answers(self, uri: str, before: str, after: str, below: str, others: Sequence[str],
                settings: EngineSettings) -> bool:
        """Whether a finished search ahead answers this request now, without the model."""
        return not after.strip() and self._match(self._kept.get(uri, ()), (before, below, tuple(others)),
                                                 settings) is not None

    def foresees(self, uri: str, before: str, after: str, below: str, others: Sequence[str],
                 settings: EngineSettings) -> bool:
        """Whether a search ahead, finished or under way, is for exactly this request with these settings."""
        if after.strip():
            return False
        request = (before, below, tuple(others))
        under_way = self._under_way.get(uri)
        return (under_way is not None and answering(under_way[0]) == answering(settings)
                and request in under_way[1]) or \
            self.answers(uri, before, after, below, others, settings)

    @staticmethod
    def _match(kept: Sequence[Speculation], request: Request, settings: EngineSettings) -> Speculation | None:
        same = answering(settings)
        return next((s for s in kept if s.request == request and answering(s.settings) == same), None)


def answering(settings: EngineSettings) -> EngineSettings:
    """The settings an answer depends on (a search ahead's, and the last answer typing through trims): not the
    memory budget (the shared engine's is the largest of its windows', and changes as they come and go) nor whether
    searches run ahead."""
    return replace(settings, memory_budget_mb=1, search_ahead=True)
