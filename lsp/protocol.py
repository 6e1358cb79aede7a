"""pygls' LanguageServerProtocol, hardened so every request gets exactly one response.

pygls 2.1.1 drops a request whose params fail to deserialize without any reply (the client
waits forever), answers malformed JSON with a window/showMessage popup instead of a JSON-RPC
parse error, silently ignores requests after `shutdown`, logs a traceback for every cancelled
request or unknown command, and keeps the future of every notification forever. It also files the
client's running requests and its own requests to the client in one table, so that a client's
response reusing a running request's id settled (and unlisted) that request. This subclass fixes
those, refuses a request whose method or id is of the wrong type, or that names a notification, and a
second initialize (pygls answered it with the capabilities of its offer, a position encoding the server
did not use among them), and takes document sync away from pygls' workspace (see `lsp.documents` for
why). `strict_converter` refuses params whose strings or integers are of another type, where cattrs would convert them.
"""
from __future__ import annotations

import json
import logging
import uuid
from concurrent.futures import Future
from contextvars import ContextVar
from functools import partial
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, Callable, Optional, Union
from urllib.parse import urlsplit

import attrs
from cattrs.errors import ClassValidationError
from lsprotocol import types
from pygls.exceptions import (
    JsonRpcContentModified,
    JsonRpcException,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcMethodNotFound,
    JsonRpcParseError,
    JsonRpcRequestCancelled,
    JsonRpcServerNotInitialized,
)
from pygls.protocol import LanguageServerProtocol, default_converter, lsp_method

from lsp.documents import prefer_encodings

if TYPE_CHECKING:
    from lsp.searches import Arrival

log = logging.getLogger(__name__)

QUIET_ERRORS = (JsonRpcContentModified, JsonRpcRequestCancelled)
"""Expected while the user types; answered without a traceback in the log."""
CLIENT_ERRORS = (JsonRpcInvalidParams, JsonRpcInvalidRequest, JsonRpcMethodNotFound)
"""A request the client got wrong (an unknown command, say): answered, and logged in one line."""


@attrs.define
class UndeliverableRequest:
    """A request whose params (or envelope) could not be deserialized; answered with an error."""

    id: Any
    method: str
    error: JsonRpcException


@attrs.define
class DroppedNotification:
    method: str
    uri: str | None = None  # the document a dropped didChange was for, when its params name one (a notebook's)
    cells: list[str] | None = attrs.field(factory=list)  # the cells a dropped notebook change edited; None: unknown


_NOT_JSONRPC = object()

SEARCH_REQUESTS = frozenset((types.TEXT_DOCUMENT_COMPLETION, types.TEXT_DOCUMENT_INLINE_COMPLETION))
ARRIVAL: ContextVar[Arrival | None] = ContextVar("arrival", default=None)
"""In a completion request's handler: its document's edit count (`SearchScheduler.changes`) when the request was
read, and its place among the requests (`SearchScheduler.arrived`). The handler's task runs later, after the
messages read meanwhile (a TCP client's, read all at once): an edit among them makes the request stale, as it was
sent for the text before, and a request at another cursor of the document makes it obsolete."""

NOTIFICATIONS = frozenset(method for method, (_, response, *_rest) in types.METHOD_TO_TYPES.items()
                          if response is None)
"""LSP's notification methods (no response type): a message naming one carries no id."""


def _only_strings(value: Any, cl: type) -> Any:
    """A str field, or a str-valued enum (which the hook for str also serves): a string, nothing else."""
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value if cl is str else cl(value)


def _only_integers(value: Any, cl: type) -> Any:
    """An int field or an int-valued enum: an integer, so that 2.5 is no 2 and true no 1. The hook for
    int also serves bool, which keeps cattrs' bool(): a capability sent as 1 should not fail initialize."""
    if issubclass(cl, bool):
        return bool(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"expected an integer, got {type(value).__name__}")
    return value if cl is int else cl(value)


def _only_ids(value: Any, cl: Any) -> Any:
    """A request id or progress token (`int | str`), which lsprotocol passes through unchecked: a cancel
    whose id was an object reached pygls' table of requests and failed there, unhashable."""
    if value is None and cl == Optional[Union[int, str]]:
        return None
    if _valid_id(value) is None:
        raise TypeError(f"expected an integer or a string, got {type(value).__name__}")
    return value


_prepared_converter: Any = None
"""A converter with every LSP message's hooks already generated, built by the session host before it forks
sessions (lsp/session_host.py), so that each session shares them instead of generating its own."""


def prepare_converter() -> None:
    """Build the converter the next server takes, with the hooks of every LSP message type generated now."""
    global _prepared_converter
    converter = strict_converter()
    for message, _, params, result in types.METHOD_TO_TYPES.values():
        for kind in (message, params, result):
            if kind is None:
                continue
            try:
                converter.get_structure_hook(kind)
                converter.get_unstructure_hook(kind)
            except Exception:  # noqa: BLE001 (a type cattrs cannot hook now fails the same way when used)
                continue
    _prepared_converter = converter


def strict_converter() -> Any:
    """pygls' converter, except that a string field takes only a string and an integer field only an
    integer: cattrs' defaults call str() and int() on anything, so `"text": null` in a didOpen would open
    a document that reads `None`, and a position of 2.5 would quietly become 2."""
    global _prepared_converter
    if _prepared_converter is not None:
        converter, _prepared_converter = _prepared_converter, None
        return converter
    converter = default_converter()
    converter.register_structure_hook(str, _only_strings)
    converter.register_structure_hook(int, _only_integers)
    converter.register_structure_hook(Union[int, str], _only_ids)
    converter.register_structure_hook(Optional[Union[int, str]], _only_ids)
    return converter


def _valid_id(value: Any) -> int | str | None:
    if isinstance(value, bool):
        return None
    return value if isinstance(value, (int, str)) else None


def _readable_uri(uri: str) -> bool:
    """Whether urllib can split `uri`: it refuses an unclosed `[` in the host ("Invalid IPv6 URL")."""
    try:
        urlsplit(uri)
    except ValueError:
        return False
    return True


def _utf8(text: str) -> bool:
    """Whether `text` encodes as UTF-8: a file name that is no UTF-8, as the system decodes it, holds lone surrogates."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _file_uri(path: str) -> str | None:
    """The `file:` URI of an absolute `path`, its bytes percent-escaped as the system encodes them (a name that is no
    UTF-8 comes decoded with surrogate escapes); None for a relative path, or one no file can have."""
    try:
        return PurePath(path).as_uri()
    except ValueError:  # relative, or a lone surrogate os.fsencode refuses (UnicodeEncodeError)
        return None


def _document_uri(params: Any) -> str | None:
    """params.textDocument.uri, if the params hold a string there."""
    document = params.get("textDocument") if isinstance(params, dict) else None
    uri = document.get("uri") if isinstance(document, dict) else None
    return uri if isinstance(uri, str) else None


def _notebook_uri(params: Any) -> str | None:
    """params.notebookDocument.uri, if the params hold a string there."""
    return _document_uri({"textDocument": params.get("notebookDocument")} if isinstance(params, dict) else None)


def _edited_cells(params: Any) -> list[str] | None:
    """The cells whose text a notebook change (params.change.cells.textContent) edits; None where it edits some
    whose URIs cannot be read."""
    change = params.get("change") if isinstance(params, dict) else None
    cells = change.get("cells") if isinstance(change, dict) else None
    edits = cells.get("textContent") if isinstance(cells, dict) else None
    if edits is None:
        return []
    uris = [_document_uri({"textDocument": edit.get("document")}) if isinstance(edit, dict) else None
            for edit in edits] if isinstance(edits, list) else [None]
    return None if None in uris else uris  # type: ignore[return-value]


def _dropped(method: Any, params: Any) -> DroppedNotification:
    """A notification whose params could not be read, with what it changed where they say."""
    if method == types.NOTEBOOK_DOCUMENT_DID_CHANGE:
        return DroppedNotification(method, _notebook_uri(params), _edited_cells(params))
    return DroppedNotification(str(method), _document_uri(params))


def _describe(exc: BaseException) -> str:
    cause = exc.__cause__ or exc
    if isinstance(cause, ClassValidationError):
        try:
            from cattrs import transform_error

            return "; ".join(transform_error(cause))[:500]
        except Exception:
            pass
    return str(cause)[:500] or type(cause).__name__


class CompleterProtocol(LanguageServerProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._sent_requests: dict[Any, Future[Any]] = {}  # ours to the client, by id; apart from the client's

    # -- deserialization ---------------------------------------------------------------------------
    def structure_message(self, data: dict[str, Any]) -> Any:
        if isinstance(data, dict) and "jsonrpc" in data and "method" not in data and "id" in data:
            msg_id = data["id"]
            if _valid_id(msg_id) is None or msg_id not in self._sent_requests:
                log.debug("dropping a response to id %r, which the server never sent", msg_id)
                return DroppedNotification("")
        if isinstance(data, dict) and "jsonrpc" in data and "method" in data:
            method, msg_id = data["method"], data.get("id")
            if not isinstance(method, str) or ("id" in data and _valid_id(msg_id) is None):
                what = "method must be a string" if not isinstance(method, str) else "id must be an integer or a string"
                log.warning("invalid request: %s", what)
                return UndeliverableRequest(_valid_id(msg_id), str(method)[:100], JsonRpcInvalidRequest(
                    message=f"Invalid Request: {what}"))
            if "id" in data and data["jsonrpc"] != self.VERSION:  # its params might not even be read
                log.warning("invalid request: jsonrpc %r", data["jsonrpc"])
                return UndeliverableRequest(msg_id, method, JsonRpcInvalidRequest(
                    message='Invalid Request: "jsonrpc" must be "2.0"'))
            if "id" in data and method in NOTIFICATIONS:  # carried out, it would leave a request unanswered
                log.warning("invalid request: %s is a notification, sent with an id", method)
                return UndeliverableRequest(msg_id, method, JsonRpcInvalidRequest(
                    message=f"Invalid Request: {method} is a notification; send it without an id"))
            if "params" not in data:
                data["params"] = None  # JSON-RPC lets params be omitted; pygls' fallback types require the key
        try:
            return super().structure_message(data)
        except Exception as exc:
            if not isinstance(data, dict):
                raise
            method = data.get("method")
            if "id" in data and isinstance(method, str):
                log.warning("invalid params for %s: %s", method, _describe(exc))
                return UndeliverableRequest(
                    _valid_id(data.get("id")), method,
                    JsonRpcInvalidParams(message=f"Invalid params for {method}: {_describe(exc)}"),
                )
            if "id" in data and "method" not in data:  # a response we cannot read: nothing to answer
                log.warning("dropping a malformed response: %s", _describe(exc))
                return DroppedNotification("")
            log.warning("dropping notification %s with invalid params: %s", method, _describe(exc))
            return _dropped(method, data.get("params"))

    def handle_message(self, message: Any) -> None:
        if isinstance(message, DroppedNotification):
            if message.method == types.TEXT_DOCUMENT_DID_CHANGE and message.uri is not None:
                change_lost = getattr(self._server, "change_lost", None)
                if change_lost is not None:
                    change_lost(message.uri)
            if message.method == types.NOTEBOOK_DOCUMENT_DID_CHANGE:
                cells_lost = getattr(self._server, "notebook_change_lost", None)
                if cells_lost is not None:
                    cells_lost(message.uri, message.cells)
            return
        if isinstance(message, UndeliverableRequest):
            self._send_error(message.id, message.error)
            return
        jsonrpc = getattr(message, "jsonrpc", _NOT_JSONRPC)  # None: a message whose "jsonrpc" is null
        if jsonrpc is _NOT_JSONRPC:  # not a JSON-RPC object at all: a number, a list (batch), a bare object
            msg_id = _valid_id(message.get("id")) if isinstance(message, dict) else None
            self._send_error(msg_id, JsonRpcInvalidRequest(
                message="Invalid Request: expected a JSON-RPC 2.0 message object"))
            return
        method = getattr(message, "method", None)
        is_request = method is not None and hasattr(message, "id")
        if jsonrpc != self.VERSION:
            if is_request:
                self._send_error(_valid_id(message.id), JsonRpcInvalidRequest(
                    message='Invalid Request: "jsonrpc" must be "2.0"'))
            return
        if is_request and method != types.INITIALIZE and self._workspace is None:
            self._send_error(message.id, JsonRpcServerNotInitialized(
                message="Server not initialized: send initialize first"))
            return
        if method is not None and not is_request and method != types.EXIT and self._workspace is None:
            log.warning("dropping notification %s sent before initialize", method)  # as LSP says
            return
        if is_request and self._shutdown:
            self._send_error(message.id, JsonRpcInvalidRequest(
                message="Invalid Request: the server is shutting down"))
            return
        document = getattr(getattr(message, "params", None), "text_document", None)
        searches = getattr(self._server, "searches", None)
        if not (is_request and method in SEARCH_REQUESTS and document is not None and searches is not None):
            super().handle_message(message)
            return
        position = getattr(message.params, "position", None)
        documents = getattr(self._server, "documents", None)
        open_ = documents is not None and documents.get(document.uri) is not None  # no cursor kept for another
        at = (position.line, position.character) if position is not None and open_ else None
        arrived = ARRIVAL.set(searches.arrived(document.uri, at))  # the handler's task copies it as it is made
        try:
            super().handle_message(message)
        finally:
            ARRIVAL.reset(arrived)

    # -- bookkeeping -------------------------------------------------------------------------------
    def _execute_handler(self, msg_id: Any, handler: Any, callback: Any, args: Any = None, kwargs: Any = None) -> None:
        """pygls files the future of every notification and generator step under a fresh id and
        never removes it: one leaked future per keystroke. Forget each future once it is done."""
        super()._execute_handler(msg_id, handler, callback, args, kwargs)
        future = self._request_futures.get(msg_id)
        if future is not None:
            future.add_done_callback(partial(self._forget_future, msg_id))

    def _forget_future(self, msg_id: Any, future: Any) -> None:
        if self._request_futures.get(msg_id) is future:
            del self._request_futures[msg_id]

    def send_request(self, method: str, params: Any | None = None, callback: Callable[[Any], None] | None = None,
                     msg_id: Any = None) -> Future[Any]:
        """pygls' send_request, with the future filed in `_sent_requests` instead of the table of the client's
        running requests, where it could displace one of the same id (and be settled by cancelling that)."""
        msg_id = str(uuid.uuid4()) if msg_id is None else msg_id
        running = self._request_futures.pop(msg_id, None)
        try:
            future = super().send_request(method, params, callback, msg_id)
        finally:
            self._request_futures.pop(msg_id, None)
            if running is not None:
                self._request_futures[msg_id] = running
        self._sent_requests[msg_id] = future
        return future

    def _handle_response(self, msg_id: Any, result: Any | None = None, error: Any | None = None) -> None:
        """A response settles only a request the server sent (structure_message drops the others)."""
        future = self._sent_requests.pop(msg_id, None)
        if future is None or future.done():
            log.debug("dropping a response to id %r, which the server is not waiting for", msg_id)
            return
        if error is not None:
            future.set_exception(JsonRpcException.from_error(error))
        else:
            future.set_result(result)

    def _handle_cancel_notification(self, msg_id: Any) -> None:
        """A cancel that arrives after its request was answered is routine while the user types; pygls logs a
        warning for each. Only a cancel for a request still running goes on to pygls."""
        if msg_id not in self._request_futures:
            log.debug("cancel for request %r, already answered", msg_id)
            return
        super()._handle_cancel_notification(msg_id)

    def _run_generator(self, future: Any, *, gen: Any, result_future: Any) -> None:
        """A handler step the loop's teardown cancelled (`shutdown` still stopping the worker when the `exit` right
        behind it ends the loop) ends its request quietly: pygls let the CancelledError out of this callback, and
        asyncio logged it as an error with a traceback."""
        if future is not None and future.cancelled():
            if not result_future.done():
                result_future.cancel()
            return
        super()._run_generator(future, gen=gen, result_future=result_future)

    @property
    def requests_in_flight(self) -> int:
        return len(self._request_futures)

    # -- responses ---------------------------------------------------------------------------------
    def _send_handler_result(self, future: Any, *, msg_id: Any) -> None:
        """pygls logs a traceback for every error a handler raised, the client's mistakes included."""
        exc = None if future.cancelled() else future.exception()
        if isinstance(exc, QUIET_ERRORS + CLIENT_ERRORS):
            if isinstance(exc, CLIENT_ERRORS):
                log.warning("request %r refused: %s", msg_id, exc.message)
            self._request_futures.pop(msg_id, None)
            self._send_response(msg_id, error=exc.to_response_error())
            return
        super()._send_handler_result(future, msg_id=msg_id)

    def send_parse_error(self, exc: BaseException) -> None:
        """Malformed JSON: the id is unknowable, so the error goes to id null (JSON-RPC 2.0 §5)."""
        self._send_error(None, JsonRpcParseError(message=f"Parse error: {exc}"[:300]))

    def _send_error(self, msg_id: Any, exc: JsonRpcException) -> None:
        if msg_id is None:  # lsprotocol's converter would drop a null id, which JSON-RPC requires
            error = {"code": exc.code, "message": exc.message}
            self._send_data({"jsonrpc": self.VERSION, "id": None, "error": error})
        else:
            self._send_response(msg_id, error=exc.to_response_error())

    # -- initialize: pick the position encoding we prefer among those offered --------------------
    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams) -> Any:
        if self._workspace is not None:  # LSP allows one: answered, it would name capabilities the server does not use
            raise JsonRpcInvalidRequest(message="Invalid Request: the server is already initialized; the first "
                                                "initialize's capabilities and settings stay")
        if params.root_uri is not None and not _readable_uri(params.root_uri):  # pygls' workspace would raise
            log.warning("ignoring a rootUri that is not a URI: %.200r", params.root_uri)
            params.root_uri = None
        if params.root_uri is None and params.root_path and not _utf8(params.root_path):  # pygls cannot quote it
            params.root_uri = _file_uri(params.root_path)
            if params.root_uri is None:
                log.warning("ignoring a rootPath that names no file: %.200r", params.root_path)
                params.root_path = None
        general = params.capabilities.general
        if general is not None and general.position_encodings:
            general.position_encodings = prefer_encodings(list(general.position_encodings))
        result = yield from super().lsp_initialize(params)
        if self._server.completion_items_registered_later():  # type: ignore[attr-defined]
            result.capabilities.completion_provider = None  # no suggest widget on every character
        return result

    @lsp_method(types.SHUTDOWN)
    def lsp_shutdown(self, *args: Any) -> Any:
        """Shut down from the moment the request is received, as LSP words it: pygls marked it once the handler had
        stopped the worker, and an `exit` sent right behind the request made the server exit with 1 meanwhile. Then
        cancel what still runs, from a copy of the table: cancelling a notification's future (`initialized` waiting
        for the client to take a registration) takes it off the table at once (`_forget_future`), and pygls, looping
        over the table itself, answered the shutdown with an internal error."""
        self._shutdown = True
        if (handler := self.fm.features.get(types.SHUTDOWN)) is not None:
            yield handler, args, None
        current = self.msg_id
        for msg_id, future in list(self._request_futures.items()):
            if msg_id != current and not future.done():
                future.cancel()
        return None

    # -- document sync: ours, not pygls' workspace ---------------------------------------------------
    def _own_handler(self, method: str, params: Any) -> Any:
        """The server's handler for `method` alone, without pygls' workspace bookkeeping of documents and
        notebooks, which the server keeps itself (lsp/documents.py, lsp/notebooks.py)."""
        if (handler := self.fm.features.get(method)) is not None:
            yield handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: types.DidOpenTextDocumentParams) -> Any:
        yield from self._own_handler(types.TEXT_DOCUMENT_DID_OPEN, params)

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams) -> Any:
        yield from self._own_handler(types.TEXT_DOCUMENT_DID_CHANGE, params)

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: types.DidCloseTextDocumentParams) -> Any:
        yield from self._own_handler(types.TEXT_DOCUMENT_DID_CLOSE, params)

    # -- notebook sync: ours too (lsp/notebooks.py); pygls' workspace raised for a change to a notebook never opened
    @lsp_method(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    def lsp_notebook_document__did_open(self, params: types.DidOpenNotebookDocumentParams) -> Any:
        yield from self._own_handler(types.NOTEBOOK_DOCUMENT_DID_OPEN, params)

    @lsp_method(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def lsp_notebook_document__did_change(self, params: types.DidChangeNotebookDocumentParams) -> Any:
        yield from self._own_handler(types.NOTEBOOK_DOCUMENT_DID_CHANGE, params)

    @lsp_method(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def lsp_notebook_document__did_close(self, params: types.DidCloseNotebookDocumentParams) -> Any:
        yield from self._own_handler(types.NOTEBOOK_DOCUMENT_DID_CLOSE, params)


def is_parse_error(exc: BaseException) -> bool:
    return isinstance(exc, (json.JSONDecodeError, UnicodeDecodeError, RecursionError))
