"""LSP method handlers: thin adapters from protocol messages to CompleterServer state."""
from __future__ import annotations

import logging
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from completer.types import SKIPPED_OUT_OF_SYNC

from lsp.completions import TRIGGER_CHARACTERS, completion_list, inline_list, inline_start
from lsp.notebooks import Cell
from lsp.searches import Superseded
from lsp.server import CompleterServer

log = logging.getLogger(__name__)

INFO_METHOD = "completer/info"
FILE_INFO_METHOD = "completer/fileInfo"


def _open(ls: CompleterServer, doc: types.TextDocumentItem) -> None:
    ls.forget_exclusions(doc.uri)
    ls.searches.document_changed(doc.uri)
    ls.documents.open(doc.uri, doc.language_id, doc.version, doc.text)
    ls.workspace_document_edited(doc.uri)  # its text may not be the disk's: new, or restored unsaved


def _change(ls: CompleterServer, document: types.VersionedTextDocumentIdentifier,
            content_changes: list[types.TextDocumentContentChangeEvent]) -> None:
    uri = document.uri
    changes = []
    for change in content_changes:
        if isinstance(change, types.TextDocumentContentChangePartial):
            r = change.range
            changes.append(((r.start.line, r.start.character, r.end.line, r.end.character), change.text))
        else:
            changes.append((None, change.text))
    if ls.documents.unchanged_by(uri, document.version, changes):  # the same whole text again: nothing is stale
        return
    ls.searches.document_changed(uri)  # a newer edit makes running searches stale
    doc = ls.documents.change(uri, document.version, changes)
    if doc is not None and doc.in_sync:
        ls.skips_noted.discard((uri, SKIPPED_OUT_OF_SYNC))  # if it is lost again, say so again
    ls.workspace_document_edited(uri)


def _close(ls: CompleterServer, uri: str) -> None:
    ls.searches.document_changed(uri)
    ls.skips_noted = {noted for noted in ls.skips_noted if noted[0] != uri}
    if ls.documents.close(uri) is not None:
        ls.worker.notify_close(uri)
    ls.workspace_file_changed(uri)  # its unsaved edits are gone: the disk's text counts again
    if ls.repository is not None:
        ls.repository.forget(uri)


def _cells(cells: list[types.NotebookCell]) -> list[Cell]:
    return [Cell(cell.document, int(cell.kind)) for cell in cells]


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
        _open(ls, params.text_document)
        ls.prefill(params.text_document.uri)  # the first keystroke in the file then pays for its own line only

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: CompleterServer, params: types.DidChangeTextDocumentParams) -> None:
        _change(ls, params.text_document, params.content_changes)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: CompleterServer, params: types.DidCloseTextDocumentParams) -> None:
        _close(ls, params.text_document.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    def did_open_notebook(ls: CompleterServer, params: types.DidOpenNotebookDocumentParams) -> None:
        notebook = params.notebook_document
        reopened = set(ls.notebooks.close(notebook.uri)) - {cell.uri for cell in params.cell_text_documents}
        for cell_uri in reopened:  # opened twice: the cells of the first open that the second does not hold
            _close(ls, cell_uri)
        for cell in params.cell_text_documents:
            _open(ls, cell)
        ls.notebooks.open(notebook.uri, _cells(notebook.cells))
        ls.forget_exclusions()  # its cells are now files of the notebook's
        last = ls.notebooks.last_code_cell(notebook.uri)
        if last is not None:
            ls.prefill(last)  # where a new line is most likely typed: the cells above it are its context

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def did_change_notebook(ls: CompleterServer, params: types.DidChangeNotebookDocumentParams) -> None:
        uri, cells = params.notebook_document.uri, params.change.cells
        if uri not in ls.notebooks:
            log.warning("notebookDocument/didChange for a notebook that is not open: %.200s", uri)
            return
        if cells is None:
            return
        before = ls.notebooks.cells(uri)
        opened = []
        if cells.structure is not None:
            for cell in cells.structure.did_close or []:
                _close(ls, cell.uri)
            for item in cells.structure.did_open or []:
                _open(ls, item)
                opened.append(item.uri)
            array = cells.structure.array
            ls.notebooks.splice(uri, array.start, array.delete_count, _cells(array.cells or []))
            ls.forget_exclusions()
        kinds = [ls.notebooks.set_kind(uri, cell.document, int(cell.kind)) for cell in cells.data or []]
        for content in cells.text_content or []:
            _change(ls, content.document, content.changes)
        if cells.structure is not None or cells.text_content or any(kinds):  # not for a cell's run ending alone
            for cell_uri in {*before, *ls.notebooks.cells(uri)}:  # each cell's context holds the others: its search
                ls.searches.document_changed(cell_uri)  # is stale, as after an edit of its own
        for cell_uri in opened:  # a new cell: its context is the cells above
            if ls.notebooks.notebook_of(cell_uri) == uri:
                ls.prefill(cell_uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def did_close_notebook(ls: CompleterServer, params: types.DidCloseNotebookDocumentParams) -> None:
        held = ls.notebooks.close(params.notebook_document.uri)
        if held:
            ls.worker.notify_close(params.notebook_document.uri)  # the cache its cells shared
        listed = [cell.uri for cell in params.cell_text_documents]
        named = set(listed)
        unlisted = [uri for uri in held if uri not in named and ls.notebooks.notebook_of(uri) is None]
        if unlisted:  # a cell is no document without its notebook: it would stay open for good
            log.warning("notebookDocument/didClose left %d of the notebook's cells open; closing them too: %.200s",
                        len(unlisted), params.notebook_document.uri)
        for cell_uri in [*listed, *unlisted]:
            _close(ls, cell_uri)

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
        await ls.settings_applied(types.TEXT_DOCUMENT_COMPLETION)
        target = ls.locate(params.text_document.uri, params.position)
        if target is None or not ls.settings.completion_items:
            return types.CompletionList(is_incomplete=True, items=[])
        try:
            lines = await ls.suggest(target)
        except Superseded:  # the client asked at another cursor since, and did not cancel this: answered empty,
            return types.CompletionList(is_incomplete=True, items=[])  # which every client takes, and asks again
        if not ls.settings.completion_items:  # turned off while it searched
            return types.CompletionList(is_incomplete=True, items=[])
        return completion_list(lines, target.line_no, target.end_units, ls.filter_text)

    @server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
    async def inline_completion(ls: CompleterServer,
                                params: types.InlineCompletionParams) -> types.InlineCompletionList:
        await ls.settings_applied(types.TEXT_DOCUMENT_INLINE_COMPLETION)
        target = ls.locate(params.text_document.uri, params.position)
        if target is None or not ls.settings.inline_completions:
            return types.InlineCompletionList(items=[])
        selected = params.context.selected_completion_info  # the suggest widget is open: extend its item, or none
        item = ls.with_selected_item(target, selected) if selected is not None else None
        if selected is not None and item is None:
            return types.InlineCompletionList(items=[])
        try:
            lines = await (ls.suggest(target) if item is None else ls.suggest_beside_item(target, item))
        except Superseded:  # the client asked at another cursor since, and did not cancel this
            return types.InlineCompletionList(items=[])
        if not ls.settings.inline_completions:  # turned off while it searched
            return types.InlineCompletionList(items=[])
        start = item.item_start if item is not None else None
        if start is None:
            start = inline_start(target.current, target.column, lines)
        return inline_list(lines, target.line_no, target.end_units, start,
                           ls.documents.codec.to_units(target.current, start))  # the client's line before `start`

    # -- settings and status -----------------------------------------------------------------------
    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(ls: CompleterServer, params: types.DidChangeConfigurationParams) -> None:
        await ls.change_settings(params.settings)

    @server.feature(INFO_METHOD)
    async def info(ls: CompleterServer, params: Any = None) -> dict[str, Any]:
        return await ls.info()

    @server.feature(FILE_INFO_METHOD)
    async def file_info(ls: CompleterServer, params: Any = None) -> dict[str, Any]:
        """What a status bar says of one file: the excludeFiles pattern that leaves it alone, or null."""
        uri = getattr(params, "uri", None)
        if not isinstance(uri, str):
            raise JsonRpcInvalidParams(message=f'{FILE_INFO_METHOD} takes {{"uri": "file:///..."}}')
        await ls.settings_applied(FILE_INFO_METHOD)
        return {"excluded": ls.excluding_pattern(uri)}
