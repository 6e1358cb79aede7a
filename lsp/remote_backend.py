"""The OpenAI-compatible backend: whole lines from an inference server's `/completions` (vLLM, llama.cpp's server,
TGI, Ollama), in place of the local worker.

It answers the same jobs as lsp.worker_client.WorkerClient, on the server's event loop: the prompt, the filters
and typing through are completer/remote.py's; this module sends the prompt and reads the reply. Its rules:
- one request in flight per document: a newer one cancels the older, whose HTTP call is closed;
- an error (unreachable, a redirect, which is never followed, a 4xx or 5xx, a timeout, a malformed or huge reply)
  answers empty, is logged once per distinct kind, shows in completer/info's `remote.state`, and backs the backend
  off (no request is sent for a while, doubling up to a limit, or as long as its Retry-After asks) until one
  succeeds again;
- the API key is read from the environment variable the settings name, sent only in the Authorization header,
  and never logged.
"""
from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import socket
import time
import zlib
from email.utils import parsedate_to_datetime
from typing import Any, Callable
from urllib.parse import urlsplit, urlunsplit
from urllib.request import getproxies_environment, proxy_bypass_environment

from completer.convertible import extra_install
from completer.remote import PromptRequest, RemoteAnswers
from completer.repository import RepositoryContext
from completer.types import CompletionResult
from lsp.settings import ServerSettings, is_loopback
from lsp.worker_client import WorkerDied, WorkerError

log = logging.getLogger(__name__)
logging.getLogger("httpx").setLevel(logging.WARNING)  # it logs every request at INFO
logging.getLogger("httpcore").setLevel(logging.WARNING)

MAX_REPLY_BYTES = 1 << 20
"""A completion of one line is a few hundred bytes; a reply past this is not one, and is not read further."""
BACKOFF_S = (0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0)
"""Seconds without requests after the n-th failure in a row."""
LOOPBACK_BACKOFF_S = (0.5, 1.0, 2.0, 4.0)
"""The same for an endpoint on this machine: a request there costs next to nothing, and a server the user restarts
(a llama-server loading another model) is used again within seconds of answering, not half a minute later."""
REQUEST_REFUSED = frozenset({"status 400", "status 413", "status 422"})
"""Errors that say this one request was refused (a prompt past the model's context, a parameter it does not take),
not that the endpoint is down: the other documents' requests go on without a back-off."""
REFUSALS_IN_A_ROW = 4
"""Refused requests in a row, none answered between them, after which the endpoint refuses them all (a model name
it does not serve): they back off as other failures do."""
MAX_RETRY_AFTER_S = 60.0
"""The longest back-off a Retry-After header sets (a 429's or a 503's): one that asks for longer is read as this,
as OpenAI's Python client honours one only up to 60 s; completions that stop for an hour would look broken."""
SAMPLING_TEMPERATURE = 0.2
"""With endpointChoices above 1 the completions are sampled at this temperature: alike, but not all the same."""


class EndpointError(Exception):
    """A request the endpoint did not answer with completions; `kind` groups errors for the log."""

    def __init__(self, kind: str, message: str, retry_after_s: float = 0.0) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.retry_after_s = retry_after_s  # how long the endpoint asked to be left alone (its Retry-After)


def retry_after(value: str | None, now: float | None = None) -> float:
    """The seconds a Retry-After header asks to wait (delta-seconds or an HTTP date), at most MAX_RETRY_AFTER_S;
    0 when there is none or it cannot be read."""
    value = (value or "").strip()
    if value.isascii() and value.isdigit():  # not `²`, a digit to isdigit, but none to float: a ValueError
        return min(float(value), MAX_RETRY_AFTER_S)
    try:
        when = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return 0.0
    return min(max(0.0, when - (time.time() if now is None else now)), MAX_RETRY_AFTER_S)


def completion_texts(body: bytes, said: Callable[[str], str] | None = None) -> list[str]:
    """The `choices[].text` of a /completions reply that are whole lines, in the endpoint's order: those cut off
    at max_tokens (finish_reason "length") are not. EndpointError when it is not such a reply; one that is the
    endpoint's error (`{"error": ...}` with status 200, as some servers answer) quotes it, through `said`."""
    try:
        reply = json.loads(body)
    except (ValueError, RecursionError) as exc:  # RecursionError: brackets nested past Python's stack
        raise EndpointError("malformed", f"the reply is not JSON ({_one_line(str(exc))[:120]})") from None
    choices = reply.get("choices") if isinstance(reply, dict) else None
    if choices is None and isinstance(reply, dict) and reply.get("error"):
        quoted = (said or _one_line)(_error_text(reply["error"]))[:200]  # the key out before the cut
        raise EndpointError("endpoint error", f"the endpoint answered an error: {quoted}")
    if not isinstance(choices, list) or not all(isinstance(c, dict) and isinstance(c.get("text"), str)
                                                for c in choices):
        raise EndpointError("malformed", "the reply has no choices[].text (is the endpoint an OpenAI-compatible "
                                         "/completions API?)")
    ordered = sorted(choices, key=lambda c: c.get("index") if isinstance(c.get("index"), int) else 0)
    return [c["text"] for c in ordered if c.get("finish_reason") != "length"]


def _error_text(error: Any) -> str:
    """The words of an OpenAI-style error (`{"message": ..., "type": ...}`), or of any other value as JSON."""
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return error["message"]
    return error if isinstance(error, str) else json.dumps(error)[:4096]


def completions_url(endpoint: str) -> str:
    """`<endpoint>/completions`, keeping a query the endpoint needs (Azure's ?api-version=...) at the end. An
    endpoint pasted whole, `.../v1/completions` or the chat API's `.../v1/chat/completions`, is the
    `/completions` beside it, not `.../completions/completions`."""
    parts = urlsplit(endpoint)
    path = parts.path.rstrip("/")
    path = path.removesuffix("/chat/completions").removesuffix("/completions")
    return urlunsplit(parts._replace(path=path + "/completions"))


def _why(exc: BaseException) -> str:
    """What an HTTP error says, in words a user can act on: httpx's own can be empty (a reset connection is
    ReadError('')) or vague (a refused one is 'All connection attempts failed'), while the socket error it wraps
    names the cause: 'Connection refused', 'Connection reset by peer', 'Name or service not known'."""
    cause: BaseException | None = exc
    seen: set[int] = set()
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, socket.gaierror) and cause.strerror:
            return cause.strerror
        if isinstance(cause, ConnectionError) and isinstance(cause.errno, int) and cause.errno > 0:
            return os.strerror(cause.errno)
        cause = cause.__cause__ or cause.__context__
    return str(exc) or (type(exc).__doc__ or type(exc).__name__).strip().split("\n")[0]


def _one_line(text: str) -> str:
    """Text for one log line: line breaks, control characters and terminal escapes become spaces."""
    return "".join(char if char.isprintable() else " " for char in text)


def _http_client(httpx: Any, endpoint: str, timeout_s: float) -> Any:
    """The HTTP client for `endpoint`: no redirects followed (code goes where the settings say, nowhere else),
    and a proxy from the environment only for another host: code for this machine stays on it."""
    loopback = is_loopback(httpx.URL(endpoint).host)
    return httpx.AsyncClient(timeout=httpx.Timeout(timeout_s), follow_redirects=False, trust_env=not loopback,
                             limits=httpx.Limits(max_keepalive_connections=8))


def environment_proxy(endpoint: str) -> str | None:
    """The proxy an https endpoint on another host is reached through, as the errors name it: its host and port
    (never a user:password it holds) and the variable that set it; None without one (NO_PROXY, or loopback)."""
    parts = urlsplit(endpoint)
    if is_loopback(parts.hostname or ""):
        return None
    proxies = getproxies_environment()
    scheme = parts.scheme if parts.scheme in proxies else "all"
    proxy = proxies.get(scheme)
    if not proxy or proxy_bypass_environment(parts.hostname or "", proxies):
        return None
    try:
        where = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        named = f"{where.hostname}:{where.port}" if where.port else f"{where.hostname}"
    except ValueError:  # a proxy URL urllib cannot read (httpx says what is wrong with it when it is used)
        named = "a proxy"
    return f"{named} ({scheme.upper()}_PROXY)"


class OpenAIBackend:
    """Sends each completion job to `{endpoint}/completions`; the rest of the server sees a worker."""

    def __init__(self, settings: Callable[[], ServerSettings]) -> None:
        self._settings = settings
        self._client: Any = None  # httpx.AsyncClient, built by start()
        self._futures: dict[int, asyncio.Future[Any]] = {}  # the jobs not answered yet
        self._last_failure_at = float("-inf")
        self._answers = RemoteAnswers()
        self._ids = itertools.count(1)
        self._jobs: dict[int, asyncio.Task[Any]] = {}
        self._in_flight: dict[str, asyncio.Task[Any]] = {}  # the request of each document, at most one
        self._ready: asyncio.Event | None = None
        self._failures = 0
        self._refusals = 0  # REQUEST_REFUSED errors since the last answer
        self._retry_at = 0.0
        self._logged: set[str] = set()  # error kinds logged since the last success
        self._missing_key_noted = False
        self._secret: str | None = None  # the API key last sent: never in a message
        self._proxy: str | None = None  # the environment's proxy for the endpoint, as errors name it
        self.state = "not started"
        self.last_error: str | None = None
        self.info: dict[str, Any] = {}
        self.model_error: str | None = None
        self.model_runs_total = 0  # requests sent
        self.requests_failed = 0
        self.restarts = 0
        self.cancelled_in_worker = 0  # HTTP calls closed before their reply
        self.pid: int | None = None

    # -- lifecycle (WorkerClient's) ---------------------------------------------------------------
    def _event(self) -> asyncio.Event:
        if self._ready is None:
            self._ready = asyncio.Event()
        return self._ready

    async def start(self) -> str | None:
        """Check the settings and make the HTTP client; returns what is wrong, or None. Nothing is sent yet."""
        remote = self._settings().remote
        self._event().set()  # requests never wait: without a client they answer empty at once
        if not remote.endpoint:
            self.model_error = ("backend \"openai\" needs completer.endpoint, the API's base URL (for example "
                                "http://127.0.0.1:8080/v1)")
        else:
            try:
                import httpx
            except ImportError:
                self.model_error = f"backend \"openai\" needs the httpx package: {extra_install('remote')}"
            else:
                await self._close_client()
                try:
                    self._client = _http_client(httpx, remote.endpoint, remote.timeout_ms / 1000)
                    self._proxy = environment_proxy(remote.endpoint)
                    self.model_error = None
                except Exception as exc:  # an endpoint httpx cannot parse, or a proxy or CA setting it cannot use
                    why = _one_line(str(exc) or type(exc).__name__)
                    self.model_error = f"cannot use the endpoint {remote.endpoint}: {why}"
        self.state = "error" if self.model_error else "ready"
        self.last_error = self.model_error
        self._refresh_info()
        if self.model_error:
            log.error("%s", self.model_error)
        else:
            log.info("completions come from %s (model %r, fill-in-the-middle: %s); the code around the cursor is "
                     "sent there", remote.endpoint, remote.model, remote.template() or "none")
        return self.model_error

    async def configure(self, settings: dict[str, Any]) -> str | None:
        """Engine settings changed: they are read at each request (maxTokens, maxSuggestions), nothing to load,
        so nothing to refuse (a missing endpoint is the backend's model_error, not these settings')."""
        return None

    async def refresh_info(self, timeout: float) -> None:
        self._refresh_info()

    def _refresh_info(self) -> None:
        remote = self._settings().remote
        self.info = {
            "model": remote.model or "(the endpoint's default model)",
            "model_path": None,
            "languages": ["*"],  # an inference server's code model writes most languages
            "backend": remote.backend,
            "remote": {
                "endpoint": remote.endpoint,
                "model": remote.model,
                "fim_template": remote.template(),
                "state": self.state,
                "last_error": self.last_error,
                "requests": self.model_runs_total,
                "requests_failed": self.requests_failed,
                "requests_closed": self.cancelled_in_worker,
            },
        }

    async def stop(self, grace: float = 1.0) -> None:
        """The backend is replaced or the server stops: its jobs end as a dead worker's do (the server asks the
        next backend once), and their HTTP calls are closed."""
        self.kill()
        await self._close_client()

    def kill(self) -> None:
        """Answer every job still pending (a job cancelled before it ever ran answers nothing itself), then
        cancel them; the sockets close with the client, or with the process."""
        for future in list(self._futures.values()):
            if not future.done():
                future.set_exception(WorkerDied("the remote backend was replaced or stopped"))
        for task in list(self._jobs.values()):
            task.cancel()

    async def _close_client(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    # -- jobs -------------------------------------------------------------------------------------
    async def wait_ready(self, timeout: float) -> bool:
        return True

    def submit(self, op: str, **fields: Any) -> tuple[int, asyncio.Future[Any]]:
        """Start a completion job; the future resolves as the worker's reply would: {"result": {...}}."""
        if op != "complete":
            raise WorkerError("value", f"the remote backend has no {op!r} job")
        job_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        task = asyncio.ensure_future(self._complete(future, **fields))
        self._jobs[job_id] = task
        self._futures[job_id] = future

        def finished(_task: asyncio.Task[Any]) -> None:
            self._jobs.pop(job_id, None)
            self._futures.pop(job_id, None)

        task.add_done_callback(finished)
        return job_id, future

    def cancel(self, job_id: int) -> None:
        """The request was abandoned: its HTTP call is closed, and its job answers that it was cancelled."""
        future = self._futures.get(job_id)
        if future is not None and not future.done():
            future.set_exception(WorkerError("cancelled", "the request was cancelled"))
        task = self._jobs.get(job_id)
        if task is not None and not task.done():
            task.cancel()

    def notify_open(self, uri: str, text: str) -> None:
        """Nothing to prefill here: the endpoint keeps its own prefix cache."""

    def notify_close(self, uri: str) -> None:
        self._answers.forget(uri)

    def forget_searches_ahead(self) -> None:
        """Nothing is searched ahead here: each request's prompt holds the snippets it is sent with."""

    async def _complete(self, future: asyncio.Future[Any], uri: str, before: str, after: str, below: str = "",
                        others: list[str] | None = None, snippets: list[str] | None = None,
                        repository: RepositoryContext | None = None, language: str | None = None) -> None:
        started = time.perf_counter()
        previous = self._in_flight.get(uri)
        current = asyncio.current_task()
        assert current is not None
        self._in_flight[uri] = current
        try:
            if previous is not None and not previous.done():  # one request per document: the newer one wins
                previous.cancel()
                await asyncio.wait([previous])
            result = await self._result(uri, before, after, below, snippets or [], repository, language)
            result.latency_ms = (time.perf_counter() - started) * 1000
            if not future.done():
                future.set_result({"result": result.to_dict()})
        except asyncio.CancelledError:
            if not future.done():
                future.set_exception(WorkerError("cancelled", "the request was cancelled"))
            raise
        except WorkerError as exc:  # no answer to give: not one the server may keep for the same request
            if not future.done():
                future.set_exception(exc)
        except Exception as exc:  # a bug here must not leave the request unanswered
            log.exception("remote completion failed for %s", uri)
            if not future.done():
                future.set_exception(WorkerError("internal", str(exc)))
        finally:
            if self._in_flight.get(uri) is current:
                del self._in_flight[uri]

    async def _result(self, uri: str, before: str, after: str, below: str, snippets: list[str],
                      repository: RepositoryContext | None = None, language: str | None = None) -> CompletionResult:
        """The answer; WorkerError("unavailable") when the endpoint failed now or lately (an empty answer that
        the server does not keep: the same request may be answered once the endpoint is back)."""
        settings = self._settings()
        remote = settings.remote
        prepared = self._answers.prepare(uri, before, after, below, snippets, remote.template(), remote.prompt_chars,
                                         repository, language, answering=(remote, settings.engine))
        if isinstance(prepared, CompletionResult):  # typed through, or nothing to ask
            return prepared
        if self._client is None:
            raise WorkerError("nomodel", self.model_error or "the remote backend is not configured")
        wait = self._retry_at - time.monotonic()
        if wait > 0:
            raise WorkerError("unavailable", f"the endpoint failed ({self.last_error}); trying again in {wait:.1f} s")
        sent_at = time.monotonic()
        try:
            texts = await self._post(prepared, settings)
        except EndpointError as exc:
            self._failed(exc, sent_at)
            raise WorkerError("unavailable", exc.message) from None
        except Exception as exc:  # a reply that breaks this code (a header read wrongly): no traceback per keystroke
            if "internal" not in self._logged:  # nor requests sent on as if all were well: backed off as any failure
                log.error("a remote completion failed in the server", exc_info=True)
            error = EndpointError("internal", self._said(f"the server could not handle the reply: "
                                                         f"{type(exc).__name__}: {exc}")[:300])
            self._failed(error, sent_at)
            raise WorkerError("unavailable", error.message) from None
        self._succeeded()
        return self._answers.answer(uri, prepared, texts, settings.engine.max_suggestions)

    def _headers(self, settings: ServerSettings) -> dict[str, str]:
        name = settings.remote.api_key_env
        if not name:
            return {}
        key = (os.environ.get(name) or "").strip()  # a key read from a CRLF file keeps its \r
        if not key:
            if not self._missing_key_noted:
                self._missing_key_noted = True
                log.warning("the environment variable %s (completer.apiKeyEnv) is not set: sending no API key", name)
            return {}
        if not all("!" <= char <= "~" for char in key):
            raise EndpointError("key", f"the API key in the environment variable {name} has characters an HTTP "
                                       "header cannot carry (spaces, control or non-ASCII characters)")
        self._secret = key
        return {"Authorization": f"Bearer {key}"}

    async def _post(self, request: PromptRequest, settings: ServerSettings) -> list[str]:
        """The endpoint's completions of the prompt, each a line's rest; EndpointError for anything else."""
        import httpx

        remote = settings.remote
        body: dict[str, Any] = {
            "prompt": request.prompt,
            "max_tokens": settings.engine.max_tokens,
            "temperature": 0.0 if remote.choices == 1 else SAMPLING_TEMPERATURE,
            "n": remote.choices,
            "stop": ["\n"],
            "stream": False,
        }
        if remote.model:
            body["model"] = remote.model
        url = completions_url(remote.endpoint)
        headers = {**self._headers(settings), "Accept-Encoding": "identity"}  # the 1 MiB cap counts what is sent
        try:
            content = json.dumps(body, ensure_ascii=True).encode("ascii")  # lone surrogates become \u escapes
        except (ValueError, TypeError) as exc:
            raise EndpointError("prompt", f"the prompt cannot be sent as JSON: {exc}") from None
        self.model_runs_total += 1

        async def exchange() -> tuple[int, bytes, str | None]:
            async with self._client.stream("POST", url, content=content,
                                           headers={**headers, "Content-Type": "application/json"}) as reply:
                if 300 <= reply.status_code < 400:  # no answer, and following it would send the code elsewhere
                    location = self._said(reply.headers.get("location") or "no Location")[:200]
                    raise EndpointError("redirect", self._said(_redirect_message(url, reply.status_code, location)))
                return reply.status_code, await _read_capped(reply), reply.headers.get("retry-after")

        via = f" through the proxy {self._proxy}" if self._proxy else ""  # it may be the proxy that failed
        try:  # the whole exchange is bounded: httpx's timeouts bound each read, not a reply that trickles in
            status, data, wait = await asyncio.wait_for(exchange(), remote.timeout_ms / 1000)
        except asyncio.CancelledError:
            self.cancelled_in_worker += 1
            raise
        except EndpointError:
            raise
        except (TimeoutError, asyncio.TimeoutError, httpx.TimeoutException):
            raise EndpointError("timeout", f"no reply from {url}{via} within {remote.timeout_ms} ms") from None
        except httpx.ConnectError as exc:
            raise EndpointError("unreachable", self._said(f"cannot connect to {url}{via}: {_why(exc)}")) from None
        except (httpx.HTTPError, httpx.InvalidURL, ValueError, UnicodeError) as exc:
            raise EndpointError("http", self._said(f"{url}{via}: {type(exc).__name__}: {_why(exc)}")) from None
        if status >= 400:
            detail = self._said(data[:4096].decode("utf-8", "replace"))[:200]  # the key out before the cut
            hint = _no_key_hint(remote.api_key_env) if status in (401, 403) and "Authorization" not in headers else ""
            raise EndpointError(f"status {status}", self._said(f"{url} answered {status}{hint}: {detail}"),
                                retry_after(wait))
        return completion_texts(data, self._said)

    def _said(self, message: str) -> str:
        """A message with text from elsewhere (an error, the endpoint's reply) made safe to log: the API key
        taken out, and one line of printable characters. Cut such text only after this: a cut across the key
        would leave its head, which no longer matches."""
        if self._secret:
            message = message.replace(self._secret, "<API key>")
        return _one_line(message)

    def _failed(self, error: EndpointError, sent_at: float) -> None:
        """A request failed. Requests that were in flight together fail together: only one sent after the
        last failure makes the failures in a row one more, and the back-off twice as long. A request the
        endpoint refused as such (REQUEST_REFUSED) backs nothing off, unless it refused REFUSALS_IN_A_ROW."""
        self.requests_failed += 1
        self._refusals = self._refusals + 1 if error.kind in REQUEST_REFUSED else 0
        if 0 < self._refusals < REFUSALS_IN_A_ROW:
            self.state, self.last_error = "error", error.message
            if error.kind not in self._logged:
                self._logged.add(error.kind)
                log.warning("remote completion failed: %s; the endpoint refused this request, and the next ones "
                            "are sent as usual", error.message)
            self._refresh_info()
            return
        now = time.monotonic()
        if sent_at >= self._last_failure_at or not self._failures:
            self._failures += 1
        self._last_failure_at = now
        steps = LOOPBACK_BACKOFF_S if is_loopback(urlsplit(self._settings().remote.endpoint or "").hostname or "") \
            else BACKOFF_S
        delay = max(steps[min(self._failures, len(steps)) - 1], error.retry_after_s)  # a 429 says how long
        self._retry_at = max(self._retry_at, now + delay)
        self.state, self.last_error = "error", error.message
        kind = "refused in a row" if self._refusals else error.kind
        if kind not in self._logged:
            self._logged.add(kind)
            if self._refusals:
                log.warning("the endpoint refused %d requests in a row (the last: %s); no requests for %.1f s, then "
                            "trying again", self._refusals, error.message, delay)
            else:
                log.warning("remote completion failed: %s; no requests for %.1f s, then trying again",
                            error.message, delay)
        self._refresh_info()

    def _succeeded(self) -> None:
        if self._failures:
            log.info("the endpoint answers again after %d failed request(s)", self._failures)
        self._failures, self._retry_at, self._refusals = 0, 0.0, 0
        self._logged.clear()
        self.state, self.last_error = "ready", None
        self._refresh_info()


def _no_key_hint(api_key_env: str | None) -> str:
    """Why a 401 or 403 came, when no key was sent: the status bar shows the endpoint's "invalid API key", and the
    variable that VS Code, started from a dock rather than a shell, does not have is named only in the log."""
    if api_key_env:
        return (f" (no API key was sent: the environment variable {api_key_env}, which completer.apiKeyEnv names, "
                "is not set in the server's environment)")
    return " (no API key was sent: set completer.apiKeyEnv to the environment variable that holds it)"


def _redirect_message(url: str, status: int, location: str) -> str:
    """Why a redirect is an error: the endpoint must be named where it answers, not reached through another URL."""
    return (f"{url} answered {status}, a redirect to {location}; redirects are not followed (the "
            "code goes only where completer.endpoint says): set the endpoint to the URL that answers")


async def _read_capped(reply: Any) -> bytes:
    """The reply's body, refused past MAX_REPLY_BYTES (without reading the rest). The bytes are counted as they
    arrive, before any decoding: httpx would unpack a gzip chunk of 64 KiB into 64 MiB before the count saw it."""
    declared = reply.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_REPLY_BYTES:
        raise EndpointError("too large", f"the reply is {int(declared):,} bytes, over {MAX_REPLY_BYTES:,}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in reply.aiter_raw():
        size += len(chunk)
        if size > MAX_REPLY_BYTES:
            raise EndpointError("too large", f"the reply is over {MAX_REPLY_BYTES:,} bytes")
        chunks.append(chunk)
    return _decoded(b"".join(chunks), reply.headers.get("content-encoding", ""))


_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}
"""zlib's window bits for each Content-Encoding an endpoint may use though it was asked for none."""


def _decoded(data: bytes, encoding: str) -> bytes:
    """`data` unpacked as its Content-Encoding says, to at most MAX_REPLY_BYTES: a body a thousand times smaller
    than what it unpacks to is refused without unpacking it whole."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return data
    if encoding not in _WBITS:
        raise EndpointError("encoding", f"the reply is encoded as {_one_line(encoding)[:40]!r}, which was not "
                                        "asked for (Accept-Encoding: identity)")
    try:
        body = zlib.decompressobj(_WBITS[encoding]).decompress(data, MAX_REPLY_BYTES + 1)
    except zlib.error as exc:
        raise EndpointError("malformed", f"the reply's {encoding} body cannot be unpacked ({exc})") from None
    if len(body) > MAX_REPLY_BYTES:
        raise EndpointError("too large", f"the reply unpacks to over {MAX_REPLY_BYTES:,} bytes")
    return body
