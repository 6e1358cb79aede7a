"""Engine searches in flight: one per (document state, cursor), shared, abandoned when stale.

A search is keyed by the document's edit counter and the cursor, so identical requests (an
editor asking for completion items and inline completions at the same keystroke) share one
beam search, and the last finished result per document is reused. A newer edit of the document
makes every running search for it stale: its requests fail with ContentModified at once and
the worker is told to stop at its next beam step.

A request read after another of the same document, at another cursor, makes that one obsolete as well (`arrived`):
the user has moved on, and a client that never cancels (a script, a plugin) would otherwise have every cursor it
asked about searched in turn before the one it is at. The obsolete request is answered at once, empty
(`Superseded`), and its search stops; requests at the same cursor still share one search.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import sys
from dataclasses import dataclass
from typing import Any, Hashable

from completer.repository import RepositoryContext
from lsp.worker_client import WorkerClient

log = logging.getLogger(__name__)


class ContentModified(Exception):
    """The document changed while its search was running."""


class Superseded(Exception):
    """A newer request of the document, at another cursor, came while this one waited: answer it empty."""


@dataclass(frozen=True)
class Arrival:
    """A completion request as it was read: its document's edit count then, and its place among the requests."""

    changes: int
    number: int


@dataclass
class _Cursor:
    """Where a document's last request asked, and the number of the last request that asked elsewhere than the
    one before it: every request read before that one is obsolete."""

    at: Hashable
    moved: int


UNNUMBERED = sys.maxsize
"""The arrival number of a request that was not read as one (a direct call): nothing makes it obsolete."""


@dataclass(eq=False)
class _Search:
    key: Hashable
    uri: str
    job_id: int
    future: asyncio.Future[Any]
    waiters: int = 0
    newest: int = 0  # the arrival number of the newest request waiting for it


class SearchScheduler:
    def __init__(self, worker: WorkerClient) -> None:
        self._worker = worker
        self._inflight: dict[Hashable, _Search] = {}
        self._recent: dict[str, tuple[Hashable, Any]] = {}
        self._changes: dict[str, int] = {}  # document_changed calls per document
        self._cursors: dict[str, _Cursor] = {}  # per document: where its requests asked, since its last edit
        self._arrivals = itertools.count(1)
        self.abandoned = 0  # searches stopped because of an edit, a cancel or a newer request elsewhere

    def for_backend(self, worker: WorkerClient) -> SearchScheduler:
        """The searches of the backend that replaces this one's, counting on from its edits: a request whose text
        was cut before the change is stale only if its document changed since, not because the count began anew."""
        moved = SearchScheduler(worker)
        moved._changes, moved._cursors, moved._arrivals = self._changes, self._cursors, self._arrivals
        return moved

    def changes(self, uri: str) -> int:
        """A counter that moves with every edit of `uri`: a request notes it before its first await."""
        return self._changes.get(uri, 0)

    def arrived(self, uri: str, position: Hashable | None) -> Arrival:
        """A completion request for `uri` at `position` was read, in the order the client sent it. One at a cursor
        other than the last request's makes every request read before it obsolete: their searches stop now and
        they are answered empty (Superseded), so the newest is searched next, not after every cursor the client
        left without cancelling. Requests at the same cursor (completion items and inline completions of one
        keystroke) share their search as before. A request with no `position` (one for a document not open,
        answered empty) is numbered UNNUMBERED and moves nothing."""
        if position is None:
            return Arrival(self.changes(uri), UNNUMBERED)
        arrival = Arrival(self.changes(uri), next(self._arrivals))
        cursor = self._cursors.get(uri)
        if cursor is not None and cursor.at == position:
            return arrival
        self._cursors[uri] = _Cursor(position, arrival.number)
        for search in [s for s in self._inflight.values() if s.uri == uri and s.newest < arrival.number]:
            self._stop(search, Superseded(uri))
        return arrival

    def superseded(self, uri: str, arrival: int) -> bool:
        """Whether a request of `uri` read at `arrival` has been made obsolete by a newer one at another cursor."""
        cursor = self._cursors.get(uri)
        return cursor is not None and cursor.moved > arrival

    async def run(self, key: Hashable, uri: str, before: str, after: str, ready_timeout: float,
                  changes: int | None = None, below: str = "", others: list[str] | None = None,
                  snippets: list[str] | None = None, repository: RepositoryContext | None = None,
                  language: str | None = None, document: str | None = None, arrival: int = UNNUMBERED) -> Any:
        """The engine result for `key`; raises ContentModified, Superseded, WorkerError or CancelledError.
        `repository` (the snippets by their files) is for a model that reads the workspace laid out as files;
        `language` is the document's LSP language id, whose rules the engine's filters follow; `document` the
        engine's document, whose cache the search reads, where it is not `uri`'s own (a notebook's, for its cells).

        `changes` is `self.changes(uri)` as it was when `before` was cut from the document; an
        edit since then (even one that lands while we wait for the worker) makes the text stale. `arrival` is
        the request's number from `arrived`: a newer request elsewhere in the document makes it obsolete."""
        expected = self.changes(uri) if changes is None else changes
        if self.changes(uri) != expected:  # the key's text is no longer the one `before` was cut from
            raise ContentModified(uri)
        recent = self._recent.get(uri)
        if recent is not None and recent[0] == key:
            return recent[1]
        search = self._inflight.get(key)
        if search is None:
            if self.superseded(uri, arrival):
                raise Superseded(uri)
            if not await self._worker.wait_ready(ready_timeout):
                from lsp.worker_client import WorkerError

                raise WorkerError("unavailable", "the inference worker is not ready")
            search = self._inflight.get(key)  # someone may have started it while we waited
        if search is None and self.changes(uri) != expected:
            raise ContentModified(uri)
        if search is None and self.superseded(uri, arrival):
            raise Superseded(uri)
        if search is None:
            fields: dict[str, Any] = {"repository": repository} if repository is not None else {}
            if language is not None:
                fields["language"] = language
            job_id, future = self._worker.submit("complete", uri=document or uri, before=before, after=after,
                                                 below=below, others=others or [], snippets=snippets or [], **fields)
            search = _Search(key, uri, job_id, future)
            self._inflight[key] = search
            future.add_done_callback(lambda f, s=search: self._finished(s, f))
        search.waiters += 1
        search.newest = max(search.newest, arrival)
        try:
            return await asyncio.shield(search.future)
        except asyncio.CancelledError:
            if search.waiters == 1 and not search.future.done():  # the last requester gave up
                self._abandon(search)
            raise
        finally:
            search.waiters -= 1

    def _finished(self, search: _Search, future: asyncio.Future[Any]) -> None:
        if self._inflight.get(search.key) is search:
            del self._inflight[search.key]
        if future.cancelled() or future.exception() is not None:  # also marks the exception retrieved
            return
        self._recent[search.uri] = (search.key, future.result())

    def _abandon(self, search: _Search) -> None:
        if self._inflight.get(search.key) is search:
            del self._inflight[search.key]
        self._worker.cancel(search.job_id)
        self.abandoned += 1

    def _stop(self, search: _Search, why: Exception) -> None:
        """Answer the search's requests with `why` and stop it: the answer first, since a backend may answer a job
        it is told to stop (that it was cancelled) at once."""
        if not search.future.done():
            search.future.set_exception(why)
        self._abandon(search)

    def document_changed(self, uri: str) -> None:
        """Fail every running search of `uri` with ContentModified and stop it in the worker."""
        self._recent.pop(uri, None)
        self._cursors.pop(uri, None)  # the requests before the edit are stale anyway
        self._changes[uri] = self._changes.get(uri, 0) + 1
        for search in [s for s in self._inflight.values() if s.uri == uri]:
            self._stop(search, ContentModified(uri))

    def invalidate(self) -> None:
        """Settings changed: forget finished results (running ones carry the old key anyway)."""
        self._recent.clear()
