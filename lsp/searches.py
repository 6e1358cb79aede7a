"""Engine searches in flight: one per (document state, cursor), shared, abandoned when stale.

A search is keyed by the document's edit counter and the cursor, so identical requests (an
editor asking for completion items and inline completions at the same keystroke) share one
beam search, and the last finished result per document is reused. A newer edit of the document
makes every running search for it stale: its requests fail with ContentModified at once and
the worker is told to stop at its next beam step.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Hashable

from completer.repository import RepositoryContext
from lsp.worker_client import WorkerClient

log = logging.getLogger(__name__)


class ContentModified(Exception):
    """The document changed while its search was running."""


@dataclass(eq=False)
class _Search:
    key: Hashable
    uri: str
    job_id: int
    future: asyncio.Future[Any]
    waiters: int = 0


class SearchScheduler:
    def __init__(self, worker: WorkerClient) -> None:
        self._worker = worker
        self._inflight: dict[Hashable, _Search] = {}
        self._recent: dict[str, tuple[Hashable, Any]] = {}
        self._changes: dict[str, int] = {}  # document_changed calls per document
        self.abandoned = 0  # searches stopped because of an edit or a cancel

    def for_backend(self, worker: WorkerClient) -> SearchScheduler:
        """The searches of the backend that replaces this one's, counting on from its edits: a request whose text
        was cut before the change is stale only if its document changed since, not because the count began anew."""
        moved = SearchScheduler(worker)
        moved._changes = self._changes
        return moved

    def changes(self, uri: str) -> int:
        """A counter that moves with every edit of `uri`: a request notes it before its first await."""
        return self._changes.get(uri, 0)

    async def run(self, key: Hashable, uri: str, before: str, after: str, ready_timeout: float,
                  changes: int | None = None, below: str = "", others: list[str] | None = None,
                  snippets: list[str] | None = None, repository: RepositoryContext | None = None,
                  language: str | None = None, document: str | None = None) -> Any:
        """The engine result for `key`; raises ContentModified, WorkerError or CancelledError. `repository` (the
        snippets by their files) is for a model that reads the workspace laid out as files; `language` is the
        document's LSP language id, whose rules the engine's filters follow; `document` the engine's document,
        whose cache the search reads, where it is not `uri`'s own (a notebook's, for its cells).

        `changes` is `self.changes(uri)` as it was when `before` was cut from the document; an
        edit since then (even one that lands while we wait for the worker) makes the text stale."""
        expected = self.changes(uri) if changes is None else changes
        if self.changes(uri) != expected:  # the key's text is no longer the one `before` was cut from
            raise ContentModified(uri)
        recent = self._recent.get(uri)
        if recent is not None and recent[0] == key:
            return recent[1]
        search = self._inflight.get(key)
        if search is None:
            if not await self._worker.wait_ready(ready_timeout):
                from lsp.worker_client import WorkerError

                raise WorkerError("unavailable", "the inference worker is not ready")
            search = self._inflight.get(key)  # someone may have started it while we waited
        if search is None and self.changes(uri) != expected:
            raise ContentModified(uri)
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

    def document_changed(self, uri: str) -> None:
        """Fail every running search of `uri` with ContentModified and stop it in the worker."""
        self._recent.pop(uri, None)
        self._changes[uri] = self._changes.get(uri, 0) + 1
        for search in [s for s in self._inflight.values() if s.uri == uri]:
            self._abandon(search)
            if not search.future.done():
                search.future.set_exception(ContentModified(uri))

    def invalidate(self) -> None:
        """Settings changed: forget finished results (running ones carry the old key anyway)."""
        self._recent.clear()
