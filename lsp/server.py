"""The language server object (state shared by the handlers) and the `main` entry point.

`completer serve [args]` and `python -m lsp [args]` both end up in `main(argv)`.
"""
from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from lsprotocol import types
from pygls.exceptions import JsonRpcContentModified, JsonRpcRequestCancelled
from pygls.lsp.server import LanguageServer

from completer.indentation import UNIT_LINES, indent_unit
from completer.std_streams import STREAM_NAMES, hold_closed_fds
from completer.syntax import PYTHON_NAME, syntax_for
from completer.text import MAX_LINE_CHARS, clean, context_slice, looks_binary, text_below
from completer.types import SKIPPED_BINARY, SKIPPED_LONG_LINE, SKIPPED_OUT_OF_SYNC, EngineSettings
from lsp import __version__
from lsp.cli import parse_args
from lsp.completions import (TRIGGER_CHARACTERS, LineSuggestion, Target, extending, suggested_lines,
                             wants_filter_text, with_document_tabs)
from lsp.documents import Document, DocumentStore, PositionCodec, choose_position_encoding
from lsp.editor_process import exit_when_gone
from lsp.engine_socket import STANDALONE_ENV
from lsp.exclusions import DEFAULT_EXCLUDED, DocumentExclusions, Exclusions, check_patterns
from lsp.line_order import following_first, header_first, known_names_first
from lsp.logs import WORKER_LOG, LspLogHandler, attach_lsp_handler, message_type_for, setup_server_logging
from lsp.model_sources import ModelSources, source_of
from lsp.notebooks import CELL_SCHEME, NotebookStore, cell_file_uri, runs_other_language
from lsp.protocol import ARRIVAL, CompleterProtocol, is_parse_error, prepare_converter, strict_converter
from lsp.remote_backend import OpenAIBackend
from lsp.repository_lookups import RepositoryLookups
from lsp.searches import UNNUMBERED, ContentModified, SearchScheduler, Superseded
from lsp.settings import (SECTION, ServerSettings, apply_changes, engine_dict, extract_section, likely_meant, quoted,
                          shape_problem)
from lsp.transport import serve_stdio, serve_tcp_once
from lsp.worker_client import WorkerClient, WorkerDied, WorkerError
from lsp.workspace import (IGNORE_FILE, SKIPPED_DIRS, RequestsInFlight, WorkspaceFiles, context_suffixes,
                           language_suffixes, path_of, size_limit)

log = logging.getLogger(__name__)

COMPLETION_REGISTRATION = "completer-completion-items"
WATCHERS_REGISTRATION = "completer-workspace-files"
READY_TIMEOUT = 20.0
"""How long a request waits for a (re)starting worker before answering empty."""
SETTINGS_WAIT = 20.0
"""How long completer/info waits for a settings change (a model reload) already under way."""
PULL_TIMEOUT = 5.0
"""How long a didChangeConfiguration without settings waits for the client to answer workspace/configuration."""
INFO_TIMEOUT = 0.5
"""completer/info asks the worker for fresh engine.info() but answers from cache past this."""
UNKNOWN_NAMED = 10
"""Unknown settings a log line names (a client that sends all its servers' settings sends hundreds)."""
SHOWN_CHARS = 1000
"""The most of a popup's message shown (its start and end): a model's error quotes its modelPath, which may be
kilobytes of pasted or generated text."""
EDIT_INDEX_DELAY = 1.0
"""How long after a document's last edit the workspace index reads its unsaved text: once per pause in typing,
never at each keystroke."""


@dataclass
class Stats:
    """Server-side numbers for completer/info (the VS Code status bar shows the latency)."""

    requests: int = 0
    answered: int = 0
    cancelled: int = 0
    content_modified: int = 0
    superseded: int = 0  # answered empty: a newer request of the document, at another cursor, came meanwhile
    worker_failures: int = 0
    last_latency_ms: float | None = None  # request received -> answer ready, in the server
    last_engine_latency_ms: float | None = None  # the engine's own figure for that search
    last_model_runs: int | None = None
    last_context_tokens: int | None = None  # tokens before the cursor the model attended to
    last_new_tokens: int | None = None  # of those, the ones the model had to run (not in the document's cache)
    last_suggestions: int | None = None
    out_of_time: int = 0  # searches cut short by searchBudgetMs


def workspace_roots(params: types.InitializeParams) -> list[Path]:
    """The folders the editor opened: workspaceFolders, else rootUri, else the deprecated rootPath (a path, or
    a `file:` URI some clients send there)."""
    if params.workspace_folders:
        return folders_named([folder.uri for folder in params.workspace_folders])
    if params.root_uri:
        return folders_named([params.root_uri])
    if params.root_path and not params.root_path.startswith("file:"):
        return folders_named([params.root_path], Path)
    return folders_named([params.root_path]) if params.root_path else []


def folders_named(names: list[str], to_path: Callable[[str], Path | None] = path_of) -> list[Path]:
    """The paths of the workspace folders `names` (URIs, or paths with `to_path=Path`), each that names no folder
    on this machine said in one log line: a Windows URI sent to a Linux server, a folder deleted since, a file, a
    URI of another scheme. The index then holds nothing of it, which nothing else would explain."""
    paths = []
    for name in names:
        path = to_path(name)
        if path is None:
            log.info("workspace folder %.300r is no file: URI this machine can read; it is not indexed", name)
            continue
        paths.append(path)
        try:
            is_folder = path.is_dir()
        except OSError:  # a name longer than the system takes
            is_folder = False
        if not is_folder:
            log.warning("workspace folder %.300r names no folder on this machine (%.300s); it is not indexed",
                        name, path)
    return paths


NOTEBOOK_SYNC = types.NotebookDocumentSyncOptions(
    notebook_selector=[types.NotebookDocumentFilterWithNotebook(notebook="*")])
"""Every notebook's cells, so that a cell is completed with the code cells around it (lsp/notebooks.py)."""


class CompleterServer(LanguageServer):
    def __init__(self, log_level: str = "INFO", log_file: Path | None = None,
                 worker_log_file: str | None = None, shared_engine: bool = False) -> None:
        super().__init__("completer", __version__, protocol_cls=CompleterProtocol, converter_factory=strict_converter,
                         text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
                         notebook_document_sync=NOTEBOOK_SYNC)
        self.documents = DocumentStore()
        self.notebooks = NotebookStore()
        self.settings = ServerSettings()
        self.settings_generation = 0
        self.initial_settings = self.settings  # those initialize left: what a key a pulled configuration omits means
        self.readable_serial = 0  # moves with each change of excludeFiles or workspaceContext (what may be read)
        self.set_up_run(log_level, log_file, worker_log_file, shared_engine)
        self.repository: WorkspaceFiles | None = None
        self.completions_in_flight = RequestsInFlight()  # every index's build waits for none, one built mid-request too
        self._roots: list[Path] = []
        self.document_exclusions = DocumentExclusions()  # excludeFiles compiled, and each document's answer
        self._client_capabilities: types.ClientCapabilities | None = None
        self.filter_text = True  # completion items carry filterText (not for Neovim 0.7 to 0.9: completions.py)
        self._watching: tuple[str, tuple[str, ...]] | None = None  # the watchers' registration id and suffixes
        self._watchers_lock = asyncio.Lock()
        self._registrations = itertools.count(1)
        self._completion_dynamic = False  # completion items registered (and unregistered) with the client
        self._completion_registration: str | None = None
        self.stats = Stats()
        self.skips_noted: set[tuple[str, str]] = set()  # (uri, reason) logged once, forgotten on close
        self._config_lock: asyncio.Lock | None = None
        self._background: set[asyncio.Task[Any]] = set()
        self._edit_timers: dict[str, asyncio.TimerHandle] = {}  # per document: its unsaved text indexed when it fires
        self._edit_reads: dict[str, asyncio.Future] = {}  # per document: its unsaved text being indexed
        self._disk_reads: dict[Path, None] = {}  # files events named, to read again from the disk, in order
        self._disk_reading: frozenset[Path] = frozenset()  # those being read now, on a thread
        self._edits_before_disk: list[asyncio.Future] = []  # unsaved texts being indexed: the disk's comes after
        self._disk_reader: asyncio.Task[Any] | None = None
        self.lookups = RepositoryLookups(self)
        self.sources = ModelSources(self.spawn, self._model_converted,
                                    lambda message: self.show(message, types.MessageType.Info))
        self._handed: str | None = None  # the model path last handed to the worker (_engine_dict)
        self.log_handler = LspLogHandler(self._send_log)
        self.session_host_pid: int | None = None  # set when a session host forked this server
        self.started_as: int | None = None  # the process the editor started, where not this one (a session's relay)
        self._editor_watched = False  # exits once initialize's processId is gone (lsp/editor_process.py)

    def set_up_run(self, log_level: str, log_file: Path | None, worker_log_file: str | None,
                   shared_engine: bool) -> None:
        """What this run's arguments decide: the logs and the backend (a server built before them, as the session
        host's spare is, gets them here)."""
        self.log_level = log_level
        self.log_file = log_file
        self.worker_log_file = worker_log_file
        self.shared_engine = shared_engine
        self.worker: WorkerClient | OpenAIBackend = self._new_backend()
        self.searches = SearchScheduler(self.worker)

    # -- plumbing ---------------------------------------------------------------------------------
    def _send_log(self, levelno: int, message: str) -> None:
        if self.protocol.writer is None:
            return
        self.window_log_message(types.LogMessageParams(type=message_type_for(levelno), message=message))

    def show(self, message: str, kind: types.MessageType = types.MessageType.Warning) -> None:
        """A popup (window/showMessage) for what the user must fix, mirrored in the log."""
        level = {types.MessageType.Error: logging.ERROR, types.MessageType.Info: logging.INFO}.get(kind, logging.WARNING)
        if len(message) > SHOWN_CHARS:
            message = f"{message[:SHOWN_CHARS // 2]} ... {message[-SHOWN_CHARS // 2:]}"
        log.log(level, "%s", message)
        if self.protocol.writer is not None:
            self.window_show_message(types.ShowMessageParams(type=kind, message=f"completer: {message}"))

    def report_server_error(self, error: Exception, source: Any) -> None:
        """Malformed JSON gets a JSON-RPC parse error; other internal errors go to the log, not popups."""
        if is_parse_error(error):
            self.protocol.send_parse_error(error)  # type: ignore[attr-defined]
            return
        from pygls.exceptions import FeatureRequestError

        if source is not FeatureRequestError:  # request errors were already answered
            log.error("error handling a message: %s", error)

    def _new_backend(self) -> WorkerClient | OpenAIBackend:
        """What generates the lines, by the `backend` setting: the local worker, or an OpenAI-compatible endpoint."""
        if self.settings.remote.is_remote:
            return OpenAIBackend(lambda: self.settings)
        return WorkerClient(lambda: self._engine_dict(self.settings), self.log_level, self.worker_log_file,
                            shared=self.shared_engine, tell_user=lambda why: self.show(why, types.MessageType.Error),
                            on_restart=self._worker_restarted)

    async def _replace_backend(self) -> None:
        """The `backend` setting (or the endpoint's) changed: stop the old backend and start the new one. Its
        searches in flight fail; the next keystroke asks the new one."""
        old = self.worker
        self.worker = self._new_backend()
        self.searches = self.searches.for_backend(self.worker)
        await old.stop()
        await self._boot()

    def spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    # -- lifecycle --------------------------------------------------------------------------------
    def on_initialize(self, params: types.InitializeParams) -> None:
        loop = asyncio.get_running_loop()
        self.log_handler.set_loop(loop)
        encoding = choose_position_encoding(params.capabilities)
        self.documents = DocumentStore(codec=PositionCodec(encoding))
        options = self._section(params.initialization_options, "initializationOptions")
        if options:
            self.settings = self._merge(options, "initializationOptions")
        self.initial_settings = self.settings
        log.info("initialize: client %s, position encoding %s, settings %s",
                 params.client_info.name if params.client_info else "?", encoding, self.settings.to_camel())
        self._config_lock = asyncio.Lock()
        if self.settings.remote.is_remote:
            self.worker = self._new_backend()
            self.searches = self.searches.for_backend(self.worker)
        self._roots = workspace_roots(params)
        self._client_capabilities = params.capabilities
        self.filter_text = wants_filter_text(params.client_info)
        self.index_workspace()
        self.spawn(self.boot_worker())
        if not self._editor_watched:  # its pipes may outlive it: held by what it started, or what started it
            self._editor_watched = exit_when_gone(params.process_id, self.started_as or os.getpid())

    def index_workspace(self) -> None:
        """Start indexing the workspace folders when the setting asks for it and no index runs yet; stop and
        free the index when it is turned off (turned on again, it is built anew, with the settings of then),
        and build it anew when its memory budget, the enabled languages or excludeFiles change."""
        repository = self.repository
        if repository is not None and not self.settings.workspace_context:
            self._drop_index("workspaceContext off")
        elif repository is not None and (repository.budget_mb, repository.suffixes, repository.exclusions.patterns) \
                != (self.settings.workspace_memory_mb, language_suffixes(self._indexed_languages()),
                    self.settings.exclude_files):
            self._drop_index("its memory budget, the enabled languages' files or excludeFiles changed; building it "
                             "anew")
        if self.settings.workspace_context and self.repository is None and self._roots:
            self.repository = WorkspaceFiles(self.settings.workspace_memory_mb, self._indexed_languages(),
                                             self.completions_in_flight, self.exclusions())
            self.repository.start(self._roots)
            log.info("indexing the workspace folders in the background: %s", ", ".join(map(str, self._roots)))
            for uri in self.documents.uris():  # the new index walks the disk: the open documents' unsaved text again
                self.workspace_document_edited(uri)

    def _drop_index(self, why: str) -> None:
        if self.repository is not None:
            self.repository.stop()
            self.repository = None
            log.info("workspace index dropped (%s)", why)

    def workspace_folders_changed(self, event: types.WorkspaceFoldersChangeEvent) -> None:
        """workspace/didChangeWorkspaceFolders: index the folders open now, anew (a rare event: a rebuild on a
        thread costs less than keeping two walks apart)."""
        removed = {path for path in (path_of(folder.uri) for folder in event.removed or ()) if path is not None}
        added = folders_named([folder.uri for folder in event.added or ()])
        roots = [root for root in self._roots if root not in removed]
        for path in added:
            if path not in roots:
                roots.append(path)
        if roots == self._roots:
            return
        self._roots = roots
        log.info("workspace folders now: %s", ", ".join(map(str, roots)) or "none")
        self._drop_index("the workspace folders changed")
        self.index_workspace()
        self.spawn(self.watch_workspace_files())  # the first folder may come now

    def completion_items_registered_later(self) -> bool:
        """At initialize: whether to leave completion items out of the capabilities, because the settings turn
        them off and the client can register them when they are turned on. A client shown a completion provider
        with every printable character as a trigger asks for items at every keystroke, and VS Code opens its
        suggest widget, whose Tab then takes an item instead of the ghost text."""
        text_document = self._client_capabilities.text_document if self._client_capabilities else None
        completion = text_document.completion if text_document else None
        self._completion_dynamic = bool(completion and completion.dynamic_registration) \
            and not self.settings.completion_items
        return self._completion_dynamic

    async def register_completion_items(self) -> None:
        """Register completion items with the client when the settings turn them on, and unregister them when
        they turn them off again, where they were left out at initialize."""
        if not self._completion_dynamic:
            return
        registered = self._completion_registration is not None
        if self.settings.completion_items == registered:
            return
        try:
            if self.settings.completion_items:
                self._completion_registration = COMPLETION_REGISTRATION
                options = types.CompletionRegistrationOptions(document_selector=None,
                                                              trigger_characters=TRIGGER_CHARACTERS,
                                                              resolve_provider=False)
                await self.client_register_capability_async(types.RegistrationParams(registrations=[
                    types.Registration(id=COMPLETION_REGISTRATION, method=types.TEXT_DOCUMENT_COMPLETION,
                                       register_options=options)]))
            else:
                self._completion_registration = None
                await self.client_unregister_capability_async(types.UnregistrationParams(unregisterations=[
                    types.Unregistration(id=COMPLETION_REGISTRATION, method=types.TEXT_DOCUMENT_COMPLETION)]))
        except Exception as exc:  # the client refused: its completion requests are still answered as set
            log.info("the client did not take the completion items' registration (%s)", exc)

    async def watch_workspace_files(self) -> None:
        """Ask the client to report changes on disk to the indexed files (a git pull, a branch switch), where it
        can register file watchers; clients send workspace/didChangeWatchedFiles only for registered ones. When
        the indexed suffixes change (enabledLanguages), the watchers are registered anew for the new ones, one
        change at a time, under a new id (a client that refused to drop the old ones still takes them); with no
        index (workspaceContext off, no folder left) they are dropped, so the client stops watching for nobody."""
        workspace = self._client_capabilities.workspace if self._client_capabilities else None
        watched = workspace.did_change_watched_files if workspace else None
        if not (watched and watched.dynamic_registration):
            return
        async with self._watchers_lock:
            while (self.repository.suffixes if self.repository is not None else None) != \
                    (self._watching[1] if self._watching is not None else None):
                if self._watching is not None:
                    await self._unwatch(self._watching[0])
                    continue  # the index may have changed meanwhile: look again
                if not await self._watch(self.repository.suffixes):  # type: ignore[union-attr]
                    return

    async def _watch(self, suffixes: tuple[str, ...]) -> bool:
        """Register watchers for files ending in `suffixes` under a new id; False when the client refused."""
        self._watching = (f"{WATCHERS_REGISTRATION}-{next(self._registrations)}", suffixes)
        watchers = [types.FileSystemWatcher(glob_pattern=f"**/*{suffix}") for suffix in suffixes]
        # A folder deleted, renamed or checked out comes as one event for the folder (VS Code folds its files'),
        # which no pattern of files matches: a created or deleted path of any name, the server reads what it is.
        watchers.append(types.FileSystemWatcher(glob_pattern="**/*",
                                                kind=types.WatchKind.Create | types.WatchKind.Delete))
        watchers.append(types.FileSystemWatcher(glob_pattern=f"**/{IGNORE_FILE}"))  # changed: what it ignores leaves
        registration = types.Registration(
            id=self._watching[0], method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
            register_options=types.DidChangeWatchedFilesRegistrationOptions(watchers))
        try:
            await self.client_register_capability_async(types.RegistrationParams(registrations=[registration]))
        except Exception as exc:  # the client refused: the index still follows didSave and didClose
            log.info("the client did not register file watchers (%s)", exc)
            return False
        return True

    async def _unwatch(self, registration: str) -> None:
        """Drop the watchers registered under `registration` (forgotten here even where the client refuses)."""
        self._watching = None
        try:
            await self.client_unregister_capability_async(types.UnregistrationParams(unregisterations=[
                types.Unregistration(id=registration, method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES)]))
        except Exception as exc:
            log.info("the client did not drop the old file watchers (%s)", exc)

    def workspace_file_changed(self, uri: str) -> None:
        """A file of the workspace was saved, closed, created, changed or deleted on disk: index it again, on a
        thread (it reads the disk), after any unsaved text of it still being indexed, which would otherwise
        stand in place of the disk's. A document the editor holds keeps its text in the index: the disk's is
        older, or the same just saved. Events in folders the walk never enters (`.git`'s lock file at each `git
        status`, `__pycache__`, `node_modules`) are passed over: the index holds nothing of theirs."""
        path = path_of(uri)
        if path is not None and self._in_skipped_folder(path):
            return
        self.forget_exclusions()
        if self.repository is None or path is None or (self._editor_holds(uri) and path.name != IGNORE_FILE):
            return  # a .gitignore's document is no text the index holds: what it ignores is read again
        self._cancel_edit_index(uri)
        unsaved = self._edit_reads.get(uri)
        if unsaved is not None:
            self._edits_before_disk.append(unsaved)
        self._disk_reads[path] = None
        if self._disk_reader is None or self._disk_reader.done():
            self._disk_reader = self.spawn(self._read_disk())

    def _in_skipped_folder(self, path: Path) -> bool:
        """Whether `path` is, or lies in, a folder the workspace walk skips (SKIPPED_DIRS), below the innermost
        workspace folder that holds it (one opened inside another's node_modules is walked as its own)."""
        root = max((root for root in self._roots if path.is_relative_to(root)), key=lambda root: len(root.parts),
                   default=None)
        return root is not None and any(part in SKIPPED_DIRS or part.endswith(".egg-info")
                                        for part in path.relative_to(root).parts)

    async def _read_disk(self) -> None:
        """Read again the files events named, all those waiting at once on one thread: a branch switch's thousands
        of events cost the event loop a job, not one each (which held it for a quarter of a second)."""
        while self._disk_reads:
            if self._edits_before_disk:
                edits, self._edits_before_disk = self._edits_before_disk, []
                await asyncio.wait(edits)
            paths = list(self._disk_reads)
            self._disk_reads.clear()
            self._disk_reading = frozenset(paths)
            try:
                if self.repository is not None:
                    await asyncio.to_thread(self.repository.update_all, paths)
            finally:
                self._disk_reading = frozenset()

    def _editor_holds(self, uri: str) -> bool:
        """Whether the document is open and in sync: its text, indexed after each pause in typing, is the file's."""
        doc = self.documents.get(uri)
        return doc is not None and doc.in_sync

    def _disk_read_due(self, path: Path) -> bool:
        """Whether the disk's text of `path` is waiting to be read or being read: a read of a document's unsaved
        text started now might end first, and the disk's would stay in its place."""
        return path in self._disk_reads or path in self._disk_reading

    def workspace_document_edited(self, uri: str) -> None:
        """A document changed: once it has not changed for EDIT_INDEX_DELAY, the workspace index reads its unsaved
        text (`WorkspaceFiles.edited`), so the other documents' suggestions follow it before it is saved."""
        if self.repository is None or path_of(uri) is None:
            return
        self._cancel_edit_index(uri)
        self._edit_timers[uri] = asyncio.get_running_loop().call_later(EDIT_INDEX_DELAY, self._index_edited, uri)

    def _cancel_edit_index(self, uri: str) -> None:
        timer = self._edit_timers.pop(uri, None)
        if timer is not None:
            timer.cancel()

    def _index_edited(self, uri: str) -> None:
        self._edit_timers.pop(uri, None)
        doc, path = self.documents.get(uri), path_of(uri)
        if uri in self._edit_reads or (path is not None and self._disk_read_due(path)):
            self.workspace_document_edited(uri)  # one read of a file at a time: one started now might end first, and
            return  # the older text, put in last, would stay; this one waits its turn
        if self.repository is None or doc is None or not doc.in_sync or path is None:
            return
        # A document too large for the index is not joined into one text on the event loop at every pause in typing
        # (50 MB held it for half a second): the index is only told to leave it out.
        text = None if doc.longer_than(size_limit(path)) else doc.text()
        read = asyncio.ensure_future(asyncio.to_thread(self.repository.edited, path, text))
        self._edit_reads[uri] = read
        self._background.add(read)

        def done(task: asyncio.Future) -> None:
            self._background.discard(task)
            if self._edit_reads.get(uri) is task:
                del self._edit_reads[uri]
        read.add_done_callback(done)

    async def boot_worker(self) -> None:
        assert self._config_lock is not None
        async with self._config_lock:
            await self._boot()

    async def _boot(self) -> None:
        """Start the backend; a local model that will not load falls back to the default model, then settings."""
        if isinstance(self.worker, OpenAIBackend):
            self.sources.settle(None)  # no local model: nothing to convert
            error = await self.worker.start()
            if error:
                self.show(f"no completions: {error}", types.MessageType.Error)
            self.model_changed()
            return
        error = await self.worker.start(reported=True)
        if self.worker.code_changed:  # the user was told; no other settings would start a worker
            return
        if not error:
            self.sources.loaded(self._handed)
            self.model_changed()
        error = await self._fall_back(error, "cannot load the model with the configured settings")
        if error:
            self.show(f"no model loaded, completions are off: {error}", types.MessageType.Error)
        self.sources.settle(self.settings.engine.model_path)

    async def _fall_back(self, error: str | None, why: str) -> str | None:
        """The model of the settings would not load (`error`): the default model with the other settings, then the
        default settings, each said once (`why` the model would not load); the error left, None once one loads."""
        defaults = EngineSettings()
        for what, fallback in (("model", _with_model_of(self.settings.engine, defaults)), ("settings", defaults)):
            if not error or fallback == self.settings.engine:
                continue
            self.show(f"{why} ({error}); using the default {what}")
            self.settings = dataclasses.replace(self.settings, engine=fallback)
            error = await self._configure(self.settings)
        return error

    async def _worker_restarted(self, error: str) -> None:
        """The worker started in place of one that died (a crash, a converted bundle's weights truncated in place
        under its memory map, the shared engine killed) could not load the model of the settings: its bundle moved
        or changed on disk since. Fall back as at startup, and say so, rather than leave completions off unsaid."""
        async with self._config_lock or asyncio.Lock():
            if self.worker.model_error is None or isinstance(self.worker, OpenAIBackend) or self.worker.code_changed:
                return  # a settings change loaded a model meanwhile
            old = self.settings
            error = await self._fall_back(error, "the inference worker restarted and cannot load the model")
            if error:
                self.show(f"no model loaded, completions are off: {error}", types.MessageType.Error)
            if self.settings != old:
                self.settings_generation += 1
                self.searches.invalidate()
                self.sources.settle(self.settings.engine.model_path)

    async def shutdown_worker(self) -> None:
        await self.sources.close()
        await self.worker.stop()

    # -- a modelPath that names a model another tool keeps (lsp/model_sources.py) -------------------------
    def _engine_dict(self, settings: ServerSettings) -> dict[str, Any]:
        """The engine settings the worker is handed, a modelPath naming another tool's model resolved to its
        converted bundle (or, while it is converted, to the model loaded before)."""
        self._handed = self.sources.resolve(settings.engine.model_path)
        return engine_dict(dataclasses.replace(settings, engine=dataclasses.replace(settings.engine,
                                                                                    model_path=self._handed)))

    async def _configure(self, settings: ServerSettings) -> str | None:
        """Hand the worker `settings`; the model error, if any. A model loaded is what answers while another
        is converted."""
        error = await self.worker.configure(self._engine_dict(settings))
        if not error:
            self.sources.loaded(self._handed)
            self.model_changed()
        return error

    async def _model_converted(self, source: str, error: str | None) -> None:
        """A conversion ended: load its bundle if modelPath still names its source, or say why there is none."""
        if error is not None:
            self.show(f"cannot convert modelPath {source} into a bundle: {error}; the model loaded before answers")
            return
        assert self._config_lock is not None
        async with self._config_lock:
            if source_of(self.settings.engine.model_path) != source or isinstance(self.worker, OpenAIBackend):
                return
            error = await self._configure(self.settings)
            if error:
                self.show(f"the bundle converted from {source} would not load: {error}", types.MessageType.Error)
                return
            self.settings_generation += 1
            self.searches.invalidate()
            self.show(f"modelPath {source}: converted, and now answering", types.MessageType.Info)

    # -- settings ---------------------------------------------------------------------------------
    def _merge(self, changes: Mapping[str, Any], source: str) -> ServerSettings:
        new, warnings, unknown = apply_changes(self.settings, changes)
        for warning in warnings:
            self.show(warning)
        misspelt = {key: meant for key in unknown if (meant := likely_meant(key)) is not None}
        for key, meant in misspelt.items():  # a typo would otherwise leave the user's setting silently unused
            self.show(f"{SECTION}.{key} is not a setting; ignored (did you mean {SECTION}.{meant}?)")
        others = sorted(key for key in unknown if key not in misspelt)
        if others:
            more = f" and {len(others) - UNKNOWN_NAMED} more" if len(others) > UNKNOWN_NAMED else ""
            log.warning("%s: ignoring unknown settings %s%s", source,
                        ", ".join(quoted(key) for key in others[:UNKNOWN_NAMED]), more)
        return new

    async def change_settings(self, raw: Any) -> None:
        """workspace/didChangeConfiguration: apply what is valid, warn about the rest. Null settings (LSP's pull
        model) are asked of the client, before taking the lock: a client slow to answer holds up no request."""
        changes = self._section(raw if raw is not None else await self._pulled_settings(), "didChangeConfiguration")
        if changes is None or (not changes and raw is not None):
            return
        if raw is None:
            changes = self._whole_section(changes)
        pending = self._exclude_meanwhile(changes)
        try:
            await self._apply_settings(changes)
        finally:
            if pending is not None:
                self.document_exclusions.pending.remove(pending)

    def _whole_section(self, pulled: Mapping[str, Any]) -> dict[str, Any]:
        """A configuration pulled with workspace/configuration is the client's whole section, not a change: a key it
        leaves out is one the user no longer sets, back to its value at startup (initializationOptions, else its
        default). Merged as a change, a setting the user removed kept its value until the server restarted."""
        started = self.initial_settings.to_camel()
        return {**{key: value for key, value in started.items() if key not in pulled}, **pulled}

    def _exclude_meanwhile(self, changes: Mapping[str, Any]) -> tuple[str, ...] | None:
        """The change's excludeFiles, valid, excluding as well from now until the change is applied: a model that
        loads holds the settings' lock for seconds, and a document opened meanwhile must not be read (prefilled,
        indexed, sent) under the patterns of before."""
        if "excludeFiles" not in changes:
            return None
        value = changes["excludeFiles"]
        try:
            pending = DEFAULT_EXCLUDED if value is None else check_patterns(value)
        except ValueError:  # _merge says so when the change is applied
            return None
        self.document_exclusions.pending.append(pending)
        return pending

    async def _apply_settings(self, changes: Mapping[str, Any]) -> None:
        lock = self._config_lock or asyncio.Lock()
        async with lock:
            old = self.settings
            new = self._merge(changes, "didChangeConfiguration")
            if (new.exclude_files, new.workspace_context) != (old.exclude_files, old.workspace_context):
                self.readable_serial += 1
                self.worker.forget_searches_ahead()  # searched with the snippets of files no longer read
            if new.engine.model_path != old.engine.model_path:
                self.sources.named_anew(new.engine.model_path)
            if new.remote != old.remote and (new.remote.is_remote or old.remote.is_remote):
                self.settings = new
                await self._replace_backend()
                new = self.settings  # a local model that would not load fell back
            elif new.engine != old.engine and getattr(self.worker, "code_changed", None):
                log.info("engine settings kept for the restart the user was told of: the code changed on disk")
            elif new.engine != old.engine:
                error = await self._configure(new)
                kept = _with_model_of(new.engine, old.engine)
                if error and new.engine != kept:  # the model would not load: apply the rest (the worker kept it)
                    self.show(f"{_model_keys_changed(new.engine, old.engine)} not applied, keeping the loaded model: "
                              f"{error}")
                    new = dataclasses.replace(new, engine=kept)
                    error = await self._configure(new) if kept != old.engine else None
                if error:
                    self.show(f"settings not applied, keeping the previous ones: {error}")
                    new = dataclasses.replace(new, engine=old.engine)
            if new != old:
                self.settings = new
                self.settings_generation += 1
                self.searches.invalidate()
                log.info("settings now %s", new.to_camel())
                if not (old.completion_items or old.inline_completions):  # both were off: nothing was prefilled
                    self.prefill_open_documents()
                if not isinstance(self.worker, OpenAIBackend):
                    self.sources.settle(new.engine.model_path)
                self.index_workspace()  # turned on, or on from the start once settings arrive
                self.spawn(self.watch_workspace_files())
                self.spawn(self.register_completion_items())

    def _section(self, raw: Any, source: str) -> Mapping[str, Any] | None:
        """The settings for this server in `raw`. A `completer` that is not an object is the user's to fix, a popup
        as an invalid value is; settings that are not one are the client's mistake, a log line."""
        problem = shape_problem(raw)
        if problem is not None and isinstance(raw, Mapping):
            self.show(problem)
        elif problem is not None:
            log.warning("%s: %s; ignored", source, problem)
        return extract_section(raw)

    async def _pulled_settings(self) -> Any:
        """The client's `completer` settings, asked with workspace/configuration; None where it cannot answer."""
        workspace = self._client_capabilities.workspace if self._client_capabilities else None
        if not (workspace and workspace.configuration):
            return None
        params = types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)])
        try:
            answer = await asyncio.wait_for(self.workspace_configuration_async(params), PULL_TIMEOUT)
        except Exception as exc:  # refused, not answered in time, or not a list: the settings stay
            log.warning("didChangeConfiguration without settings: the client did not answer workspace/configuration "
                        "(%s)", str(exc) or type(exc).__name__)
            return None
        return answer[0] if isinstance(answer, (list, tuple)) and answer else None

    # -- completion -------------------------------------------------------------------------------
    async def settings_applied(self, asking: str) -> None:
        """Wait (SETTINGS_WAIT at most) for the settings changes read before now to be applied. One that loads a
        model holds them for a while, and what the client asks meanwhile it asked of the new settings: answered with
        the old ones, or from a search of the old ones, it got lines the change had ruled out."""
        lock = self._config_lock
        if lock is None or not lock.locked():
            return
        try:
            await asyncio.wait_for(lock.acquire(), SETTINGS_WAIT)  # the lock is fair: changes queued before come first
        except asyncio.TimeoutError:
            log.info("%s: answering while a settings change is still being applied", asking)
        else:
            lock.release()

    def locate(self, uri: str, position: types.Position) -> Target | None:
        """The request's target, or None when we should answer empty (unknown doc, off the end, language off)."""
        doc = self.documents.get(uri)
        if doc is not None and self.excluded(uri):
            self._skip(uri, f"the file matches excludeFiles' {self.excluding_pattern(uri)!r}", logging.INFO)
            return None
        if doc is None or not self.completes(doc, unknown=True):  # suggest() asks again once the model is known
            return None
        if position.line >= len(doc.lines):
            return None
        current = doc.lines[position.line]
        codec = self.documents.codec
        column = codec.to_code_points(current, position.character)
        arrived = ARRIVAL.get()  # an edit read since the request was makes it stale (SearchScheduler.run), and a
        # request read since at another cursor obsolete
        changes = self.searches.changes(uri) if arrived is None else arrived.changes
        return Target(uri, position.line, column, current, codec.to_units(current, len(current)), changes,
                      arrival=UNNUMBERED if arrived is None else arrived.number)

    def with_selected_item(self, target: Target, item: types.SelectedCompletionInfo) -> Target | None:
        """`target` as accepting `item`, the completion item the client's suggest widget has selected, would leave
        it: the item's text in place of its range, the cursor after that text. None for an item that no line of
        ours can extend, one whose range is on another line or whose text holds a line break."""
        rng, text = item.range, item.text
        if rng.start.line != target.line_no or rng.end.line != target.line_no or "\n" in text or "\r" in text:
            log.debug("a selected completion item no whole line extends: %s %.100r", rng, text)
            return None
        line, codec = target.current, self.documents.codec
        start, end = sorted((codec.to_code_points(line, rng.start.character),
                             codec.to_code_points(line, rng.end.character)))
        return dataclasses.replace(target, column=start + len(text), current=line[:start] + text + line[end:],
                                   item_start=start)

    async def suggest_beside_item(self, target: Target, item: Target) -> list[LineSuggestion]:
        """Lines that extend the selected completion item `item` was made with (`with_selected_item`), as LSP
        asks of inline completions beside the suggest widget: those of the lines for `target` that do (the item
        may be one of ours, or name what the model guessed), else those searched for the line the item leaves;
        failing both, the item's own line, where it is one of ours."""
        accepted = item.current[:item.column]
        lines = await self.suggest(target)
        found = extending(lines, accepted)
        if not found:
            found = extending(await self.suggest(item), accepted)
        return found or [s for s in lines if s.line == accepted]

    def enabled_languages(self) -> tuple[str, ...] | None:
        """enabledLanguages, or where it is not set the languages the loaded model writes (Bundle.languages:
        Python for the embedded models, every language for a converted one or an inference server's); None
        while the backend that would say has not (it is starting)."""
        if self.settings.enabled_languages is not None:
            return self.settings.enabled_languages
        model = self.worker.info.get("languages")
        valid = isinstance(model, list) and model and all(isinstance(name, str) for name in model)
        return tuple(model) if valid else None

    def _indexed_languages(self) -> tuple[str, ...]:
        """The languages whose files the workspace index reads: the enabled ones, Python until they are known
        (model_changed builds the index anew when they turn out to be others)."""
        enabled = self.enabled_languages()
        return ("python",) if enabled is None else enabled

    def completes(self, doc: Document, unknown: bool = False) -> bool:
        """Whether the document gets suggestions: not excluded (excludeFiles), and its language enabled, by the
        client's id (which may be the user's own) or the one its file's extension gives. While the model that
        decides is not known yet: Python, which every model writes, or whatever `unknown` says. Not a notebook's
        Python cell that IPython runs as another language (a `%%bash` cell): its lines are no Python."""
        if self.excluded(doc.uri) or (runs_other_language(doc) and (
                doc.uri.startswith(CELL_SCHEME) or self.notebooks.notebook_of(doc.uri) is not None)):
            return False
        enabled = self.enabled_languages()
        if enabled is None:
            return unknown or PYTHON_NAME in (doc.language_id, doc.language)
        return "*" in enabled or doc.language_id in enabled or doc.language in enabled

    def exclusions(self) -> Exclusions:
        """excludeFiles compiled, with the patterns of changes not applied yet."""
        return self.document_exclusions.rules(self.settings.exclude_files)

    def excluded(self, uri: str) -> bool:
        """Whether excludeFiles leaves the document (for a notebook's cell, its notebook) alone: no suggestions in
        it, and its text is context for no other document."""
        return self.document_exclusions.excluded(uri, self.exclusions(), self._roots, lambda: self._file_named(uri))

    def _file_named(self, uri: str) -> Path | None:
        """The file excludeFiles matches for `uri`: its own, or its notebook's for a cell, synced or not (a cell's
        URI names its notebook's path)."""
        return self.lookups.file_of(uri) or path_of(cell_file_uri(uri) or "")

    def forget_exclusions(self, uri: str | None = None) -> None:
        """Ask `excluded` anew for `uri` (opened), or for every document (something changed on disk)."""
        self.document_exclusions.forget(uri)

    def excluding_pattern(self, uri: str) -> str | None:
        """The excludeFiles pattern that leaves `uri` alone (for the log and a status bar), or None."""
        return self.exclusions().pattern_for(self._file_named(uri), self._roots)

    def model_changed(self) -> None:
        """Another model answers now: where enabledLanguages is not set, the workspace index and its file watchers
        follow the languages it writes."""
        if self.settings.enabled_languages is None:
            self.index_workspace()
            self.spawn(self.watch_workspace_files())

    def engine_document(self, uri: str) -> str | None:
        """The engine's document whose cache `uri`'s searches read, where it is not `uri`'s own: a notebook's, one
        for its code cells (`NotebookStore.shared_document`), so a cell's first keystroke reuses what another
        cell's searches ran."""
        return self.notebooks.shared_document(uri, self.documents)

    def prefill(self, uri: str) -> None:
        """Ask the worker to run the model over a newly opened document's context while it is idle: the text
        before a cursor at its end, which begins every cursor's context while the file fits the window. Not while
        both kinds of answer are off (VS Code's toggle): nothing would use it, and the user turned the work off."""
        if not (self.settings.completion_items or self.settings.inline_completions):
            return
        doc = self.documents.get(uri)
        if doc is None or not doc.lines or not self.completes(doc):
            return
        around = self.notebooks.around(doc, self.documents)
        text_lines, first = (around.lines, around.first) if around is not None else (doc.lines, 0)
        last = first + len(doc.lines) - 1
        sliced = context_slice(text_lines, last, len(text_lines[last]))
        if sliced is not None and not looks_binary(sliced[0]):
            self.worker.notify_open(self.engine_document(uri) or uri, clean(sliced[0]))

    def prefill_open_documents(self) -> None:
        """Prefill the open documents as when each was opened (a notebook: its last code cell), for answers turned
        on again: while both kinds were off, nothing was prefilled (`prefill`)."""
        for uri in self.documents.uris():
            if self.notebooks.notebook_of(uri) is None:
                self.prefill(uri)
        for notebook in self.notebooks.uris():
            last = self.notebooks.last_code_cell(notebook)
            if last is not None:
                self.prefill(last)

    async def suggest(self, target: Target) -> list[LineSuggestion]:
        """Best-first whole lines for `target`; raises JSON-RPC cancel/content-modified errors. A search the worker
        stopped to load another model, or a backend stopped as the settings replaced it, is asked again, of what
        replaced it, once the change is applied: the client did not cancel it. Asked again as often as changes stop
        it (each stop needs a change of its own): two model switches in turn stop it twice."""
        retried = False
        while True:
            try:
                return await self._suggest(target, retried)
            except _StoppedForSettings:
                await self.settings_applied("a completion stopped by a settings change")
                retried = True

    async def _suggest(self, target: Target, retried: bool) -> list[LineSuggestion]:
        started = time.perf_counter()
        generation, readable = self.settings_generation, self.readable_serial
        doc = self.documents.get(target.uri)
        if doc is None:
            return []
        if not self.completes(doc):  # the languages are the model's, and the backend is starting
            await self.worker.wait_ready(READY_TIMEOUT)
            if not self.completes(doc):
                return []
        self.stats.requests += not retried
        if not doc.in_sync:
            return self._skip(target.uri, SKIPPED_OUT_OF_SYNC, logging.WARNING)
        if len(target.current) > MAX_LINE_CHARS:  # the engine answers empty there: do not ship the line
            return self._skip(target.uri, SKIPPED_LONG_LINE, logging.INFO)
        around = self.notebooks.around(doc, self.documents)  # a notebook's cell reads the code cells around it
        code, first = (around.lines, around.first) if around is not None else (doc.lines, 0)
        at = dataclasses.replace(target, line_no=first + target.line_no) if first else target  # the cursor in `code`
        if target.item_start is not None:  # the line as a selected completion item would leave it
            code = [*code[:at.line_no], target.current, *code[at.line_no + 1:]]
        sliced = context_slice(code, at.line_no, target.column)
        if sliced is None:
            return []
        if looks_binary(sliced[0]):  # before clean(), which would hide the NULs
            return self._skip(target.uri, SKIPPED_BINARY, logging.WARNING)
        before, after = clean(sliced[0]), clean(sliced[1])
        engine_settings = self.settings.engine
        reads_below = (engine_settings.document_repeats and engine_settings.repeats_below) \
            or engine_settings.fill_in_the_middle  # the worker's bundle may be FIM: it reads the lines below
        raw_below = text_below(code, at.line_no)
        below = clean(raw_below) if reads_below else ""
        others = self.documents.others(target.uri, engine_settings.open_files, self.notebooks.cells_of(target.uri),
                                       self.excluded) if engine_settings.document_repeats else []
        snippets = await self.lookups.snippets(target.uri, before) \
            if engine_settings.document_repeats or self.settings.remote.is_remote else []
        placed = self.lookups.context(target.uri, snippets) \
            if snippets or self.settings.remote.is_remote else None  # a remote prompt names the file with none
        puts_following = engine_settings.document_repeats and not after.strip()
        following = self.lookups.followers(target.uri, before) if puts_following else None  # while the search runs
        header = self.lookups.header(target.uri) if puts_following and at.line_no == 0 else None
        key = (target.uri, doc.edits, target.line_no, target.column, self.settings_generation,
               None if target.item_start is None else target.current,  # a selected item's line is not the document's
               self.documents.generation if others or around else 0,  # an edit elsewhere changes what is searched
               (self.repository.serial, self.repository.generation) if snippets and self.repository else 0)
        changes = target.changes  # an edit during the awaits above, or before the request's task ran, makes it stale
        result: Any = None
        self.completions_in_flight.started()  # counted by the server: an index built during the search waits too
        try:
            for attempt in range(2):  # a worker that died under us gets one retry on its successor
                try:
                    result = await self.searches.run(key, target.uri, before, after, READY_TIMEOUT, changes, below,
                                                     others, [snippet.text for snippet in snippets], placed,
                                                     doc.language, self.engine_document(target.uri), target.arrival)
                    break
                except asyncio.CancelledError:
                    self.stats.cancelled += 1
                    raise
                except Superseded:
                    self.stats.superseded += 1
                    raise
                except ContentModified:
                    self.stats.content_modified += 1
                    raise JsonRpcContentModified(message="the document changed; the search was abandoned") from None
                except WorkerDied as exc:
                    if self._settings_moved(generation):  # a backend the settings replaced
                        raise _StoppedForSettings from None
                    if attempt:
                        self.stats.worker_failures += 1
                        log.warning("completion failed: %s", exc)
                        return []
                except WorkerError as exc:
                    if exc.kind == "cancelled" and self._settings_moved(generation):
                        raise _StoppedForSettings from None
                    if exc.kind == "cancelled":
                        self.stats.cancelled += 1
                        raise JsonRpcRequestCancelled(message="the search was cancelled") from None
                    self.stats.worker_failures += 1
                    log.log(logging.DEBUG if exc.kind in ("nomodel", "unavailable") else logging.WARNING,
                            "completion failed (%s): %s", exc.kind, exc.message)
                    return []
        finally:
            self.completions_in_flight.ended()
            self.lookups.pick_after_search(target.uri)
            if readable != self.readable_serial:  # its snippets were picked before: the search it leads the
                self.worker.forget_searches_ahead()  # worker to run ahead of the user would use them too
        if not isinstance(result, dict) or not self.completes(doc, unknown=True):  # enabledLanguages left it out
            return []  # while it searched
        engine = result.get("result") or {}

        def indents_with_tabs() -> bool:
            return indent_unit("\n".join(code[max(0, at.line_no - UNIT_LINES):at.line_no])) == "\t"

        lines = suggested_lines(target.current, target.column, engine.get("suggestions") or [],
                                self.settings.engine.max_suggestions, indents_with_tabs)
        if not after.strip() and not engine.get("skipped") and doc.language == PYTHON_NAME:  # Python's own names
            own_file = self.lookups.file_of(target.uri)  # a cell's is its notebook's: the index holds its saved code
            in_workspace = self.repository.names_elsewhere(own_file, context_suffixes(doc.language)) \
                if self.repository is not None else None
            lines = known_names_first(lines, at, code, in_workspace)
        if puts_following and not engine.get("skipped"):
            most = self.settings.engine.max_suggestions
            syntax = syntax_for(doc.language)
            lines = await following_first(following, lines, at, before, code, most, syntax, indents_with_tabs)
            if header is not None:
                lines = await header_first(header, lines, at, code, most, syntax, indents_with_tabs)
            if self.searches.changes(target.uri) != target.changes:  # edited while the other files' lines came
                raise JsonRpcContentModified(message="the document changed; the answer was abandoned")
        if "\t" in sliced[0] or "\t" in raw_below:  # the engine read them as spaces: a line copied keeps its tabs,
            lines = with_document_tabs(lines, target.current[:target.column],  # the line put first (following) too
                                       itertools.chain(sliced[0].split("\n"), raw_below.split("\n")))
        self.stats.answered += 1
        self.stats.last_latency_ms = round((time.perf_counter() - started) * 1000, 2)
        self.stats.last_engine_latency_ms = engine.get("latency_ms")
        self.stats.last_model_runs = engine.get("model_runs")
        if engine.get("model_runs"):  # typing through reuses the previous search's context
            self.stats.last_context_tokens = (engine.get("cached_tokens") or 0) + (engine.get("new_tokens") or 0)
            self.stats.last_new_tokens = engine.get("new_tokens") or 0
        self.stats.last_suggestions = len(lines)
        self.stats.out_of_time += bool(engine.get("out_of_time"))
        return lines

    def _settings_moved(self, generation: int) -> bool:
        """Whether settings have changed since `generation`, or a change is being applied: the worker stops the
        searches of the model it unloads, which no client cancelled (a cancel of the server's own has no waiter)."""
        lock = self._config_lock
        return generation != self.settings_generation or (lock is not None and lock.locked())

    def change_lost(self, uri: str) -> None:
        """A didChange for `uri` whose params could not be read (lsp.protocol): stop completing from a copy
        that may be wrong, and make any running search for it stale."""
        self.searches.document_changed(uri)
        self.documents.lost_change(uri)

    def notebook_change_lost(self, uri: str | None, cells: list[str] | None) -> None:
        """A notebookDocument/didChange whose params could not be read (lsp.protocol): the cells it edited (every
        cell of the notebook, where its params do not say which) are lost as a didChange of theirs would be, so
        no answer replaces the client's line with one made from the old text."""
        for cell in cells if cells is not None else self.notebooks.cells(uri or ""):
            self.change_lost(cell)

    def _skip(self, uri: str, reason: str, level: int) -> list[LineSuggestion]:
        """No suggestions, for a reason the user may wonder about: logged once per document."""
        if (uri, reason) not in self.skips_noted:
            self.skips_noted.add((uri, reason))
            log.log(level, "no completions in %s where %s", uri, reason)
        return []

    # -- completer/info ---------------------------------------------------------------------------
    async def info(self) -> dict[str, Any]:
        """engine.info() plus the server's own state, for status bars and bug reports. A settings change still
        being applied (a model loading) is waited for, so a status bar that asks right after changing
        `modelPath` is not told the old model."""
        await self.settings_applied("completer/info")
        if self.worker.model_error is None:
            await self.worker.refresh_info(INFO_TIMEOUT)
        out: dict[str, Any] = dict(self.worker.info)
        enabled = self.enabled_languages()
        out["model_runs"] = self.worker.model_runs_total
        out["model_error"] = self.worker.model_error
        out["model_conversion"] = self.sources.summary()
        out["backend"] = self.settings.remote.backend
        out["server"] = {
            "version": __version__,
            "pid": os.getpid(),
            "session_host_pid": self.session_host_pid,
            "worker_pid": self.worker.pid,
            "shared_engine": getattr(self.worker, "on_shared_engine", False),
            "worker_restarts": self.worker.restarts,
            "position_encoding": self.documents.codec.encoding,
            "open_documents": len(self.documents),
            "log_file": str(self.log_file) if self.log_file else None,
            "settings": self.settings.to_camel(),
            "enabled_languages": None if enabled is None else list(enabled),  # None: the model's, not known yet
            "searches_abandoned": self.searches.abandoned,
            "requests_in_flight": self.protocol.requests_in_flight,  # type: ignore[attr-defined]
            "searches_stopped_in_worker": self.worker.cancelled_in_worker,
            "workspace_index": self.repository.summary() if self.repository is not None else None,
            **dataclasses.asdict(self.stats),
        }
        return out


class _StoppedForSettings(Exception):
    """The worker stopped a search to load another model, or its backend was replaced."""


def _model_keys_changed(new: EngineSettings, old: EngineSettings) -> str:
    """The settings that choose and load the model (`_with_model_of`) that differ, as the user writes them."""
    names = {"modelPath": "model_path", "device": "device", "threads": "threads"}
    return " and ".join(key for key, name in names.items() if getattr(new, name) != getattr(old, name))


def _with_model_of(settings: EngineSettings, source: EngineSettings) -> EngineSettings:
    """`settings` with the keys that choose and load the model (path, device, threads) from `source`."""
    return dataclasses.replace(settings, model_path=source.model_path, device=source.device, threads=source.threads)


def _private_stdio() -> tuple[Any, Any]:
    """The LSP channel on private copies of fds 0/1; fd 1 then points at stderr, so that a stray
    print() (ours or a library's) lands in the editor's log instead of corrupting the stream."""
    stdout = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return sys.stdin.buffer, stdout


_spare_server: CompleterServer | None = None
"""A server the session host built before forking (`prepare_spare_server`): each session takes its own copy of it
instead of building one, so the pages that building writes stay shared with the host."""


def new_server(*run: Any) -> CompleterServer:
    """A server with every handler registered, set up with `run` (`CompleterServer.set_up_run`'s arguments; with
    none, the defaults, for a spare that is set up when it is taken)."""
    from lsp.handlers import register

    server = CompleterServer(*run)
    register(server)
    return server


def prepare_spare_server() -> None:
    """Build the server the next `main` in this process (or in a child forked from it) takes, with the hooks
    of every LSP message type already generated in its converter."""
    global _spare_server
    prepare_converter()
    _spare_server = new_server()


def _take_spare_server() -> CompleterServer | None:
    global _spare_server
    server, _spare_server = _spare_server, None
    return server


def main(argv: list[str] | None = None, prog: str = "python -m lsp", session_host_pid: int | None = None,
         started_as: int | None = None) -> int:
    """Run the server until the client says exit (or disconnects, or its process is gone): in the process the editor
    started, or in a session the session host forked for it (lsp/session_host.py) for the relay `started_as`."""
    closed = hold_closed_fds()  # before the log file is opened, which would otherwise take a closed one's number
    args = parse_args(argv, prog)
    if not args.tcp and (no_channel := sorted(closed & {0, 1})):
        names = " and ".join(STREAM_NAMES[fd] for fd in no_channel)
        print(f"{prog}: {names} {'is' if len(no_channel) == 1 else 'are'} closed: there is no client to speak LSP "
              f"with on stdio (--tcp --port N serves one over TCP)", file=sys.stderr)
        return 1
    log_file = setup_server_logging(args.log_level, args.log_file)
    worker_log = str(Path(args.log_file).with_name(WORKER_LOG)) if args.log_file else None
    shared = not (args.standalone or os.environ.get(STANDALONE_ENV) == "1")
    run = (args.log_level, log_file, worker_log, shared)
    server = _take_spare_server()
    if server is None:
        server = new_server(*run)
    else:
        server.set_up_run(*run)
    server.session_host_pid = session_host_pid
    server.started_as = started_as
    attach_lsp_handler(server.log_handler, args.log_level)
    fm = server.protocol.fm
    log.debug("handlers: %s; options: %s", ", ".join(sorted({*fm.features, *fm.builtin_features})), fm.feature_options)
    log.info("completer language server %s (pid %d), log file %s", __version__, os.getpid(), log_file)
    try:
        if args.tcp:
            serve_tcp_once(server, args.port)
        else:
            stdin, stdout = _private_stdio()
            serve_stdio(server, stdin, stdout)
    finally:
        server.worker.kill()
    code = 0 if server.protocol._shutdown else 1  # LSP: exit without shutdown (or a lost client) is 1
    log.info("server exiting with code %d", code)
    return code
