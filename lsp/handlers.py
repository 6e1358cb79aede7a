"""LSP method handlers: thin adapters from protocol messages to CompleterServer state."""
from __future__ import annotations

import logging
from typing import Any

from lsprotocol import types

from completer.types import SKIPPED_OUT_OF_SYNC

from lsp.completions import TRIGGER_CHARACTERS, completion_list, inline_list
from lsp.server import CompleterServer

log = logging.getLogger(__name__)

INFO_METHOD = "completer/info"


def register(server: CompleterServer) -> None:
    """Attach every handler to `server` (capabilities are derived from what is registered)."""

    @server.feature(types.INITIALIZE)
    def initialize(ls: CompleterServer, params: types.InitializeParams) -> None:
        ls.on_initialize(params)

    @server.feature(types.INITIALIZED)
    async def initialized(ls: CompleterServer, params: types.InitializedParams) -> None:
        await ls.watch_workspace_files()

    @server.feature(types.SHUTDOWN)
    async def shutdown(ls: CompleterServer, *args: Any) -> None:
        await ls.shutdown_worker()

    @server.feature(types.EXIT)
    def exit_(ls: CompleterServer, *args: Any) -> None:
        ls.worker.kill()

    # -- documents ---------------------------------------------------------------------------------
    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: CompleterServer, params: types.DidOpenTextDocumentParams) -> None:
        doc = params.text_document
        ls.searches.document_changed(doc.uri)
        ls.documents.open(doc.uri, doc.language_id, doc.version, doc.text)
        ls.prefill(doc.uri)  # the first keystroke in the file then pays for its own line only
        ls.workspace_document_edited(doc.uri)  # its text may not be the disk's: new, or restored unsaved

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: CompleterServer, params: types.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.searches.document_changed(uri)  # a newer edit makes running searches stale
        changes = []
        for change in params.content_changes:
            if isinstance(change, types.TextDocumentContentChangePartial):
                r = change.range
                changes.append(((r.start.line, r.start.character, r.end.line, r.end.character), change.text))
            else:
                changes.append((None, change.text))
        doc = ls.documents.change(uri, params.text_document.version, changes)
        if doc is not None and doc.in_sync:
            ls.skips_noted.discard((uri, SKIPPED_OUT_OF_SYNC))  # if it is lost again, say so again
        ls.workspace_document_edited(uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: CompleterServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.searches.document_changed(uri)
        ls.skips_noted = {noted for noted in ls.skips_noted if noted[0] != uri}
        if ls.documents.close(uri) is not None:
            ls.worker.notify_close(uri)
        ls.workspace_file_changed(uri)  # its unsaved edits are gone: the disk's text counts again
        if ls.repository is not None:
            ls.repository.forget(uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: CompleterServer, params: types.DidSaveTextDocumentParams) -> None:
        ls.workspace_file_changed(params.text_document.uri)

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(ls: CompleterServer, params: types.DidChangeWatchedFilesParams) -> None:
        for change in params.changes:
            ls.workspace_file_changed(change.uri)

    @server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    def did_change_workspace_folders(ls: CompleterServer, params: types.DidChangeWorkspaceFoldersParams) -> None:
        ls.workspace_folders_changed(params.event)

    # -- completion --------------------------------------------------------------------------------
    @server.feature(types.TEXT_DOCUMENT_COMPLETION,
                    types.CompletionOptions(trigger_characters=TRIGGER_CHARACTERS, resolve_provider=False))
    async def completion(ls: CompleterServer, params: types.CompletionParams) -> types.CompletionList:
        target = ls.locate(params.text_document.uri, params.position)
        if target is None or not ls.settings.completion_items:
            return types.CompletionList(is_incomplete=True, items=[])
        lines = await ls.suggest(target)
        return completion_list(lines, target.line_no, target.end_units)

    @server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
    async def inline_completion(ls: CompleterServer,
                                params: types.InlineCompletionParams) -> types.InlineCompletionList:
        target = ls.locate(params.text_document.uri, params.position)
        if target is None or not ls.settings.inline_completions:
            return types.InlineCompletionList(items=[])
        lines = await ls.suggest(target)
        return inline_list(lines, target.line_no, target.end_units)

    # -- settings and status -----------------------------------------------------------------------
    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(ls: CompleterServer, params: types.DidChangeConfigurationParams) -> None:
        await ls.change_settings(params.settings)

    @server.feature(INFO_METHOD)
    async def info(ls: CompleterServer, params: Any = None) -> dict[str, Any]:
        return await ls.info()
