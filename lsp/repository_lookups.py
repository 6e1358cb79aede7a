"""What the repository offers a request beside its search, looked up on threads (they read files) and kept per
document: the windows of other files most like the code above the cursor (snippets), the lines that follow
copies of the lines above (followers), and the line most files start with (header). The server asks; these
keep each document's lookups in flight, so a request that comes while the same lookup runs shares it."""
from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any, Callable, Protocol

from completer.earlier_lines import anchor_above
from completer.repository import RepositoryContext
from completer.workspace import Snippet
from lsp.documents import Document, DocumentStore
from lsp.notebooks import NotebookStore
from lsp.settings import ServerSettings
from lsp.workspace import WorkspaceFiles, context_suffixes, normal_path, path_of

log = logging.getLogger(__name__)

SNIPPETS_WAIT = 0.3
"""How long a request waits for its document's snippets when it has none to take meanwhile (a document's first
request, or the first after a file changed on disk): the pick reads and indexes by line up to eight files, which
took 1.8 s for files of a megabyte of generated code, before the first keystroke's search even began. Past this,
the request is searched without them, and the pick, which goes on, serves the keystrokes after it."""


class _Server(Protocol):
    """What the lookups read from the server, as it is at each request (its index and settings change)."""

    repository: WorkspaceFiles | None
    settings: ServerSettings
    documents: DocumentStore
    notebooks: NotebookStore


class RepositoryLookups:
    def __init__(self, server: _Server) -> None:
        self._server = server
        self._picking_snippets: dict[str, tuple[tuple, asyncio.Future]] = {}  # per document: (lines above, task)
        self._late_picks: set[asyncio.Future] = set()  # picks a request stopped waiting for: no request waits again
        self._finding_followers: dict[str, tuple[tuple, asyncio.Future]] = {}  # per document: (key, lookup)
        self._snippets_after_search: dict[str, str] = {}  # per document: the text before the cursor to pick for

    def file_of(self, uri: str) -> Path | None:
        """The file `uri` is, or for a notebook's cell the notebook's: the index holds its code, which the cell's
        context holds already (the cells around it), so it is never the cell's "other file"."""
        return path_of(self._server.notebooks.notebook_of(uri) or uri)

    def _repository(self, uri: str) -> WorkspaceFiles | None:
        """The workspace index, when it is on and holds files of the document's language (`holds_language`)."""
        repository, doc = self._server.repository, self._server.documents.get(uri)
        if repository is None or not self._server.settings.workspace_context or doc is None:
            return None
        return repository if repository.holds_language(doc.language) else None

    def _within(self, uri: str) -> tuple[str, ...] | None:
        """The endings of the files that are context for the document (`context_suffixes` of its language)."""
        doc = self._server.documents.get(uri)
        return context_suffixes(doc.language) if doc is not None else None

    def context(self, uri: str, snippets: list[Snippet]) -> RepositoryContext | None:
        """The snippets by their files' places in the workspace, for a model that reads a repository laid out as
        files (completer/repository.py); None for a document outside the workspace folders."""
        path, repository = self.file_of(uri), self._server.repository
        place = repository.place(path) if repository is not None and path is not None else None
        if repository is None or place is None:
            return None
        files = []
        for snippet in snippets:
            found = repository.place(Path(snippet.path), indexed=True)
            files.append((found[1] if found is not None else Path(snippet.path).name, snippet.text))
        return RepositoryContext(place[0], place[1], tuple(files))

    async def snippets(self, uri: str, before: str) -> list[Snippet]:
        """Windows of the repository's other files most like the code above the cursor (none when off). Kept
        per document while the lines above stay the same; picked again on a thread, which reads files. When only
        the lines above have changed (a new line), the request does not wait for that: it takes the document's
        snippets of the line before, which differ from the new ones by one line of the 40 they are picked for,
        and the new ones serve the keystrokes after it. With none to take (a document's first request, or the first
        after a change to the index) it waits, at most SNIPPETS_WAIT."""
        repository = self._repository(uri)
        if repository is None:
            return []
        cached = repository.cached(uri, before)
        if cached is not None:
            return cached
        picking = self._picking_snippets.get(uri)
        earlier = repository.latest(uri)
        if picking is None or picking[0] != repository.key(before):
            if earlier is not None:  # picked once this request's search is over: a thread now would slow it
                self._snippets_after_search[uri] = before
                return earlier
            picking = self._pick_snippets(repository, uri, before)
        if earlier is not None or picking[1] in self._late_picks:
            return earlier or []
        try:
            return await asyncio.wait_for(asyncio.shield(picking[1]), SNIPPETS_WAIT)
        except asyncio.TimeoutError:
            log.debug("searching %s without the workspace's snippets: picking them takes longer than %.1f s", uri,
                      SNIPPETS_WAIT)
            if not picking[1].done():
                self._late_picks.add(picking[1])
            return []

    def pick_after_search(self, uri: str) -> None:
        """A request's search is over: pick the snippets it left to pick (`snippets`), unless they are
        picked or being picked already, or the document was closed meanwhile (its snippets are forgotten)."""
        before, repository = self._snippets_after_search.pop(uri, None), self._server.repository
        if before is None or repository is None or self._server.documents.get(uri) is None \
                or repository.cached(uri, before) is not None:
            return
        picking = self._picking_snippets.get(uri)
        if picking is None or picking[0] != repository.key(before):
            self._pick_snippets(repository, uri, before)

    def _pick_snippets(self, repository: WorkspaceFiles, uri: str, before: str) -> tuple[tuple, asyncio.Future]:
        """Start picking `uri`'s snippets for the lines above `before` on a thread (it reads files)."""
        path = self.file_of(uri)
        task = asyncio.ensure_future(asyncio.to_thread(repository.snippets, uri, normal_path(path) if path else None,
                                                       before, self.open_text_reader(), self._within(uri)))
        picking = self._picking_snippets[uri] = (repository.key(before), task)
        task.add_done_callback(lambda done, uri=uri: self._picked_snippets(uri, done))
        return picking

    def _picked_snippets(self, uri: str, task: asyncio.Future) -> None:
        """A pick ended: a document closed while it ran has its snippets forgotten again (the pick kept them)."""
        self._late_picks.discard(task)
        if self._picking_snippets.get(uri, (None, None))[1] is task:
            del self._picking_snippets[uri]
        if self._server.documents.get(uri) is None and self._server.repository is not None:
            self._server.repository.forget(uri)
        if not task.cancelled() and task.exception() is not None:
            log.warning("picking the workspace's snippets failed: %s", task.exception())

    def followers(self, uri: str, before: str) -> asyncio.Future | None:
        """Start finding the copies of the lines above the cursor (`anchor_above`) in the repository's other
        files and the lines after them (None when the index is off), on a thread, as it reads the files that hold
        a copy. Kept per document while those lines and the index stay the same, so typing along a line asks
        once; a request that comes while the same lookup runs shares it."""
        repository = self._repository(uri)
        if repository is None:
            return None
        cut = before.rfind("\n") + 1
        anchor = anchor_above(before[:cut], before[cut:])
        cached = repository.cached_followers(uri, anchor) if anchor is not None else []
        if anchor is None or cached is not None:
            done: asyncio.Future = asyncio.get_running_loop().create_future()
            done.set_result(cached)
            return done
        key = (repository.serial, repository.generation, repository.edits, anchor)
        finding = self._finding_followers.get(uri)
        if finding is not None and finding[0] == key:
            return finding[1]
        path = self.file_of(uri)
        task = asyncio.ensure_future(self._on_thread("finding the lines after the lines above", [],
                                                     repository.followers, uri, normal_path(path) if path else None,
                                                     anchor, self.open_text_reader(), self._within(uri)))
        self._finding_followers[uri] = (key, task)
        task.add_done_callback(lambda done, uri=uri: self._found_followers(uri, done))
        return task

    def header(self, uri: str) -> asyncio.Future | None:
        """Start finding the line most of the workspace's other files start with (a licence header), for a
        cursor on a document's first line, on a thread (it may read a few files); None when the index is off.
        Kept while the index stays the same: then no thread is started."""
        repository = self._repository(uri)
        if repository is None:
            return None
        path = self.file_of(uri)
        path = normal_path(path) if path else None
        within = self._within(uri)
        known, line = repository.cached_first_line(path, within)
        if known:
            done: asyncio.Future = asyncio.get_running_loop().create_future()
            done.set_result(line)
            return done
        return asyncio.ensure_future(self._on_thread("finding the workspace's first line", None,
                                                     repository.common_first_line, path, self.open_text_reader(),
                                                     within))

    @staticmethod
    async def _on_thread(what: str, failed: Any, call: Callable[..., Any], *args: Any) -> Any:
        """`call(*args)` on a thread, or `failed` (and one log line) when it raises."""
        try:
            return await asyncio.to_thread(call, *args)
        except Exception as exc:  # an index that cannot answer costs the line first, not the suggestions
            log.warning("%s failed: %s", what, exc)
            return failed

    def _found_followers(self, uri: str, task: asyncio.Future) -> None:
        if self._finding_followers.get(uri, (None, None))[1] is task:
            del self._finding_followers[uri]

    def open_text_reader(self) -> Callable[[str], str | None]:
        """An open document's unsaved text by its file, for a thread: the documents are found here on the event
        loop, and a text is joined only when the thread asks for it (one `str.join`, which no edit interrupts)."""
        documents: dict[str, Document] = {}
        for doc_uri in self._server.documents.uris():
            path, doc = path_of(doc_uri), self._server.documents.get(doc_uri)
            if path is not None and doc is not None:
                documents[str(normal_path(path))] = doc
        return lambda name: documents[name].text() if name in documents else None
