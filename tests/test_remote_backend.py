"""The OpenAI-compatible backend: its prompts, filters and typing through (completer/remote.py), its settings, and
the real server process in front of a loopback endpoint that answers well or misbehaves on purpose
(tests/fake_endpoint.py). tests/test_llama_server.py runs it against llama.cpp's server."""
from __future__ import annotations

import asyncio
import os
import shlex
import socket
import sys
import time
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from completer.fim import FIM_TEMPLATES, fim_prompt, template_for_model
from completer.remote import RemoteAnswers, clip_prompt, line_comment, snippet_head
from completer.repository import REPOSITORY_FORMATS, SNIPPET_CHARS, RepositoryContext, repository_head
from completer.types import SOURCE_REMOTE, CompletionResult
from fake_endpoint import Behaviour, FakeEndpoint
from lsp.remote_backend import (BACKOFF_S, LOOPBACK_BACKOFF_S, MAX_RETRY_AFTER_S, REFUSALS_IN_A_ROW, EndpointError,
                                OpenAIBackend, completion_texts, completions_url, retry_after)
from lsp.rawclient import RawClient
from lsp.settings import ServerSettings, apply_changes, check_endpoint
from lsp.worker_client import WorkerError
from lsp_support import (LOG_DIR, REPO, SERVER_CMD, apply_line_edit, change_doc, completion_params, info, inline_params,
                         open_doc, server_env)

URI = "file:///work/adder.py"
DOC = "import math\n\n\ndef add(a, b):\n\n\nprint(add(1, 2))\n"
CURSOR = (4, 0)  # the empty line of add's body
API_KEY = "test-key-7f3a9c"


# -- the prompt and the answer, without a server ----------------------------------------------------
def test_fim_prompt_holds_the_text_before_and_the_lines_below():
    answers = RemoteAnswers()
    request = answers.prepare(URI, "def add(a, b):\n    ", "", "print(add(1, 2))\n", fim_template="qwen")
    assert not isinstance(request, CompletionResult)
    assert request.prompt == "<|fim_prefix|>def add(a, b):\n    <|fim_suffix|>print(add(1, 2))\n<|fim_middle|>"
    plain = answers.prepare(URI, "def add(a, b):\n    ", "", "print(add(1, 2))\n")
    assert not isinstance(plain, CompletionResult) and plain.prompt == "def add(a, b):\n    "


@pytest.mark.parametrize("template", ["qwen", "starcoder2", "codellama"])
def test_markers_in_the_document_do_not_lay_the_prompt_out_again(template):
    """Code that builds FIM prompts holds the markers as text; the endpoint would read each as its special token,
    so the prompt would have two prefixes, or a middle before the cursor: the document adds no marker to it."""
    markers = [marker.strip() for marker in FIM_TEMPLATES[template]]
    markers += REPOSITORY_FORMATS[template].markers if template in REPOSITORY_FORMATS else []
    quoted = " + ".join(f'"{marker}"' for marker in markers)
    before, below, snippet = f"PROMPT = {quoted}\n", f"MARKERS = [{quoted}]\n", f"x = 1\ny = 2\nz = {quoted}\n"
    repository = RepositoryContext("shop", "shop/fim.py", (("shop/prices.py", "def total(items):\n    return 0\n"),))
    for context in (None, repository):
        def prompt(blank: bool) -> str:
            def text(code: str) -> str:
                return code.replace(quoted, '""') if blank else code

            request = RemoteAnswers().prepare(URI, text(before), "", text(below), [text(snippet)],
                                              fim_template=template, repository=context)
            assert not isinstance(request, CompletionResult)
            return request.prompt

        held, plain = prompt(False), prompt(True)
        assert [held.count(marker) for marker in markers] == [plain.count(marker) for marker in markers], held
        assert "PROMPT = " in held and "MARKERS = " in held


def test_templates_by_model_name():
    assert template_for_model("Qwen/Qwen2.5-Coder-1.5B") == "qwen"
    assert template_for_model("bigcode/starcoder2-3b") == "starcoder2"  # its repository format too
    assert template_for_model("bigcode/starcoderbase-1b") == "starcoder"
    assert template_for_model("bigcode/tiny_starcoder_py") == "starcoder"
    assert template_for_model("acme/starcoder-20b-custom") == "starcoder"  # not StarCoder2
    assert template_for_model("deepseek-coder-1.3b-base") == "deepseek"
    assert template_for_model("codellama/CodeLlama-7b-hf") == "codellama"
    assert template_for_model("Qwen2.5-0.5B-Instruct") is None  # not a code model: no FIM
    assert template_for_model("gpt-3.5-turbo-instruct") is None
    assert fim_prompt("codellama", "a", "b") == "<PRE> a <SUF>b <MID>"


def test_prompt_is_clipped_at_a_line_start_that_holds_still_while_typing():
    text = "".join(f"value_{i} = compute({i})\n" for i in range(2000))
    clipped = clip_prompt(text + "val", 4000)
    assert len(clipped) <= 4000 and clipped.startswith("value_") and clipped.endswith("val")
    assert clip_prompt(text + "value_2000 = comp", 4000).startswith(clipped[:-3])  # the same head
    assert clip_prompt("short", 4000) == "short"


def test_the_lines_above_are_read_for_the_filters_once_per_line_typed(monkeypatch):
    """Each keystroke the endpoint is asked anew read up to CONTEXT_LINES lines above the cursor's line for the
    filters, on the server's loop: 13 ms a keystroke in a JavaScript file of data arrays. They are read again only
    when they change (a new line, another language), and the filters see the same context."""
    from completer import filters, remote
    from completer.syntax import syntax_for

    reads: list[int] = []

    def counted(lines, syntax=filters.PYTHON):
        reads.append(len(lines))
        return filters.line_context(lines, syntax)

    monkeypatch.setattr(remote, "line_context", counted)
    head = "const DATA = [\n" + "  [[1, 2], [3, 4], {\"k\": [5, 6]}],\n" * 300
    answers = RemoteAnswers()
    typed = "  [[7, 8], [9"
    for end in range(1, len(typed) + 1):  # no answer between keystrokes: none is typed through
        request = answers.prepare("file:///w/data.js", head + typed[:end], "", language="javascript")
        expected = filters.line_context(head[:-1].rsplit("\n", filters.CONTEXT_LINES), syntax_for("javascript"))
        assert request.context == expected and request.context.start.stack == ["["]
    assert len(reads) == 1
    answers.prepare("file:///w/data.js", head + typed + "]],\n  [", "", language="javascript")  # the next line
    answers.prepare("file:///w/data.py", head + typed, "", language="python")  # another language
    assert len(reads) == 3


def test_snippets_go_in_commented_out():
    head = snippet_head(["def helper(x):\n    return x * 2\n"], "file:///w/a.py")
    assert head == ("# A similar part of the repository:\n# def helper(x):\n#     return x * 2\n")
    assert line_comment("file:///w/a.ts") == "// " and line_comment("file:///w/q.sql") == "-- "
    assert line_comment("file:///w/configure", "shellscript") == "# "  # no extension: the client's language
    assert line_comment("file:///w/a.py", "markdown") == "# "  # a language with no line comment: the file's
    request = RemoteAnswers().prepare("file:///w/configure", "set -e\n", "", snippets=["run_all() {\n"],
                                      language="shellscript")
    assert request.prompt.startswith("# A similar part of the repository:\n# run_all() {\n")
    assert snippet_head(["x" * 5000], "file:///w/a.py") == ""  # over the budget: left out
    cut = snippet_head(["a = 1\n" * 1000, "b = 2\n"], "file:///w/a.py")  # a long window: its first lines that fit
    assert cut.startswith("# A similar part of the repository:\n# a = 1\n") and len(cut) <= SNIPPET_CHARS
    assert "b = 2" not in cut  # and no room after it


def test_a_qwen_prompt_lays_the_snippets_out_as_files_of_the_repository():
    prices = "def total(items):\n    return 0\n"
    repository = RepositoryContext("shop", "shop/cart.py", (("shop/prices.py", prices),
                                                            ("shop/markers.py", "x = '<|file_sep|>'\n"),
                                                            ("shop/big.py", "x = 1\n" * 1000),
                                                            ("shop/late.py", "y = 2\n")))
    request = RemoteAnswers().prepare(URI, "def add(a, b):\n    ", "", "print(add(1, 2))\n", ["ignored"], "qwen",
                                      repository=repository)
    assert not isinstance(request, CompletionResult)
    head, fim = request.prompt.split("<|fim_prefix|>")
    assert fim == "def add(a, b):\n    <|fim_suffix|>print(add(1, 2))\n<|fim_middle|>"
    files = head.split("<|file_sep|>")
    assert files[0] == "<|repo_name|>shop\n" and files[1] == "shop/prices.py\n" + prices
    # a file holding a marker would lay out another file: left out; a long window is cut to the lines that fit,
    # and the snippets after it get no room
    assert files[2].startswith("shop/big.py\nx = 1\n") and files[2].endswith("x = 1\n")
    assert len(head) - len("<|file_sep|>shop/cart.py\n") - len("<|repo_name|>shop\n") <= SNIPPET_CHARS
    assert files[3] == "shop/cart.py\n" and len(files) == 4
    assert repository_head("qwen", RepositoryContext("shop", "a.py")) == "<|repo_name|>shop\n<|file_sep|>a.py\n"
    # a marker split by another is no marker once the inner one is gone
    nested = RepositoryContext("sh<file_<fim_prefix>sep>op", "a.py")
    assert repository_head("starcoder2", nested) == "<repo_name>shop<file_sep>"
    assert repository_head("qwen", RepositoryContext("s<|file_sep|>", "a\nb.py")) \
        == "<|repo_name|>s\n<|file_sep|>a b.py\n"
    # StarCoder2's format: no newline after the folder's name, the document's path inside the FIM prefix
    shop = RepositoryContext("shop", "shop/cart.py", (("shop/a.py", "A = 1\n"),))
    starcoder2 = RemoteAnswers().prepare(URI, "x = 1\n", "", "y\n", [], "starcoder2", repository=shop)
    assert not isinstance(starcoder2, CompletionResult)
    assert starcoder2.prompt == ("<repo_name>shop<file_sep>shop/a.py\nA = 1\n<file_sep>"
                                 "<fim_prefix>shop/cart.py\nx = 1\n<fim_suffix>y\n<fim_middle>")
    # a template without a repository format keeps the snippets commented out
    starcoder = RemoteAnswers().prepare(URI, "x = 1\n", "", "", ["y = 2\n"], "starcoder", repository=repository)
    assert not isinstance(starcoder, CompletionResult)
    assert starcoder.prompt.startswith("<fim_prefix># A similar part of the repository:\n# y = 2\n")


def test_answer_cuts_at_the_line_end_filters_and_types_through():
    answers = RemoteAnswers()
    before = "def add(a, b):\n    "
    request = answers.prepare(URI, before, "", "")
    assert not isinstance(request, CompletionResult)
    result = answers.answer(URI, request, ["return a + b\n    # more", "return a + b", "   ", "return a + b)",
                                                  "def add(a, b):", "x" * 400], limit=3)
    assert [s.text for s in result.suggestions] == ["return a + b"]  # the filters' and overlong lines dropped
    assert result.suggestions[0].source == SOURCE_REMOTE and result.suggestions[0].line == "    return a + b"
    through = answers.prepare(URI, before + "ret", "", "")
    assert isinstance(through, CompletionResult) and [s.text for s in through.suggestions] == ["urn a + b"]
    finished = answers.prepare(URI, before + "return a + b", "", "")
    assert isinstance(finished, CompletionResult) and finished.suggestions == []  # a finished line is not extended
    answers.forget(URI)
    assert not isinstance(answers.prepare(URI, before + "ret", "", ""), CompletionResult)


def test_typing_through_trims_only_an_answer_of_the_settings_in_force():
    """An answer asked with other settings (another model or endpoint, more suggestions) is not trimmed as the user
    types on: the endpoint is asked again, as the local engine searches again."""
    answers = RemoteAnswers()
    before = "def add(a, b):\n    "
    request = answers.prepare(URI, before, "", "", answering=("qwen", 3))
    assert not isinstance(request, CompletionResult)
    answers.answer(URI, request, ["return a + b", "return b + a"], limit=3)
    same = answers.prepare(URI, before + "ret", "", "", answering=("qwen", 3))
    assert isinstance(same, CompletionResult) and [s.text for s in same.suggestions] == ["urn a + b", "urn b + a"]
    other = answers.prepare(URI, before + "retu", "", "", answering=("qwen", 1))
    assert not isinstance(other, CompletionResult)  # asked again, under the settings now in force


def test_an_endpoints_line_keeps_the_comment_after_the_cursor():
    """The endpoint writes the whole rest of the line without the text after the cursor: a closer there is written
    again, and the user's comment stays after it, unless the line brings a comment of its own."""
    answers = RemoteAnswers()
    request = answers.prepare(URI, "def add(a, b):\n    total = sum(", ")  # all of them", "")
    assert not isinstance(request, CompletionResult)
    result = answers.answer(URI, request, ["(a, b))", "[a, b])  # a list", ")  # all of them"], limit=3)
    assert [s.line for s in result.suggestions] == ["    total = sum((a, b))  # all of them",
                                                    "    total = sum([a, b])  # a list"]
    through = answers.prepare(URI, "def add(a, b):\n    total = sum((", ")  # all of them", "")
    assert isinstance(through, CompletionResult) and through.suggestions[0].text == "a, b))  # all of them"


def test_completion_texts_reads_choices_and_refuses_garbage():
    body = b'{"choices": [{"index": 1, "text": "b", "finish_reason": "stop"}, {"index": 0, "text": "a"},' \
           b' {"index": 2, "text": "cut", "finish_reason": "length"}]}'
    assert completion_texts(body) == ["a", "b"]
    for bad in (b"not json", b'{"error": "x"}', b'{"choices": [{"text": 3}]}', b"[]"):
        with pytest.raises(EndpointError):
            completion_texts(bad)


@pytest.mark.parametrize("body,quoted", [
    (b'{"error": {"message": "model \'m\' is still loading", "type": "unavailable"}}', "model 'm' is still loading"),
    (b'{"error": "out of memory\\nat layer 3"}', "out of memory at layer 3"),
    (b'{"error": {"code": 7}}', '{"code": 7}'),
])
def test_an_error_answered_with_status_200_quotes_the_endpoints_words(body, quoted):
    """Some servers answer an error with status 200: the status bar says what the endpoint said, not only that
    the reply has no choices; a key it echoes is taken out before the quote is cut."""
    with pytest.raises(EndpointError) as raised:
        completion_texts(body)
    assert raised.value.message == f"the endpoint answered an error: {quoted}"
    echoed = b'{"error": "' + b"x" * 190 + b' bad sk-SECRET123"}'  # the key across the 200-character cut
    with pytest.raises(EndpointError) as raised:
        completion_texts(echoed, lambda text: text.replace("sk-SECRET123", "<API key>"))
    assert raised.value.message == "the endpoint answered an error: " + "x" * 190 + " bad <API "


@pytest.mark.parametrize("endpoint,longest", [("http://127.0.0.1:8080/v1", LOOPBACK_BACKOFF_S[-1]),
                                              ("http://localhost:11434/v1", LOOPBACK_BACKOFF_S[-1]),
                                              ("https://completions.example.com/v1", BACKOFF_S[-1])])
def test_an_endpoint_on_this_machine_is_tried_again_within_seconds_however_long_it_was_down(endpoint, longest):
    """A local server the user restarts (a llama-server loading another model) was left alone up to 30 s after it
    answered again; on this machine a request costs next to nothing, so its back-off stops growing at 4 s."""
    settings, warnings, _ = apply_changes(ServerSettings(), {"backend": "openai", "endpoint": endpoint})
    assert not warnings, warnings
    backend = OpenAIBackend(lambda: settings)
    waits = []
    for _ in range(len(BACKOFF_S) + 2):  # each failure sent after the one before: one more in a row
        sent = time.monotonic()
        backend._failed(EndpointError("unreachable", "Connection refused"), sent)
        waits.append(backend._retry_at - time.monotonic())
    assert longest - 0.5 < max(waits) <= longest and waits[0] <= BACKOFF_S[0], waits


def test_a_reply_that_breaks_the_server_is_backed_off_and_logged_once_not_a_traceback_per_keystroke(caplog):
    """An unforeseen error while handling a reply (the superscript digit of a Retry-After was one) went up as a
    traceback on every keystroke, and the next requests were sent as if the endpoint were well."""
    settings, _, _ = apply_changes(ServerSettings(), {"backend": "openai", "endpoint": "http://127.0.0.1:9/v1"})
    backend = OpenAIBackend(lambda: settings)
    posted = []

    async def broken(prepared, settings):
        posted.append(prepared)
        raise KeyError("retry-after")

    backend._post = broken  # type: ignore[method-assign]
    backend._client = object()  # configured: requests are prepared and posted

    async def ask(line: str) -> str:
        try:
            await backend._result(URI, f"def add(a, b):\n    {line}", "", "", [])
        except WorkerError as exc:
            return exc.kind
        return "answered"

    async def scenario() -> list[str]:
        return [await ask("total = "), await ask("total = s")]

    assert asyncio.run(scenario()) == ["unavailable", "unavailable"]
    assert len(posted) == 1, "the second keystroke, within the back-off, is not sent"
    assert backend.state == "error" and "KeyError" in backend.last_error
    assert sum(record.exc_info is not None for record in caplog.records) == 1


def test_retry_after_reads_seconds_or_a_date_and_caps_them():
    now = 1_700_000_000.0  # Tue, 14 Nov 2023 22:13:20 GMT
    assert retry_after("7") == 7.0 and retry_after(" 0 ") == 0.0
    assert retry_after("Tue, 14 Nov 2023 22:13:30 GMT", now) == 10.0
    assert retry_after("Tue, 14 Nov 2023 22:13:00 GMT", now) == 0.0  # past
    assert retry_after("86400") == retry_after("Wed, 15 Nov 2023 22:13:20 GMT", now) == MAX_RETRY_AFTER_S
    for unreadable in (None, "", "-5", "1.5", "soon", "9" * 400):
        assert retry_after(unreadable) in (0.0, MAX_RETRY_AFTER_S)
    assert retry_after("soon") == retry_after("-5") == retry_after(None) == 0.0


@pytest.mark.parametrize("endpoint", ["http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1/",
                                      "http://127.0.0.1:8080/v1/completions",
                                      "http://127.0.0.1:8080/v1/chat/completions/"])
def test_an_endpoint_pasted_with_its_api_path_is_sent_to_that_api_once(endpoint):
    assert completions_url(endpoint) == "http://127.0.0.1:8080/v1/completions"
    assert completions_url("https://x.openai.azure.com/openai/deployments/c/completions?api-version=2024-02-01") == \
        "https://x.openai.azure.com/openai/deployments/c/completions?api-version=2024-02-01"


@pytest.mark.parametrize("url", ["http://example.com/v1", "http://10.0.0.2:8000/v1", "ftp://127.0.0.1/v1",
                                 "https:///v1", "https://user:pw@example.com/v1", "http://127.0.0.1:99999/v1", 3,
                                 "http://127.0.0.1:8080/v\t1", "https://bücher.example/v1", "http://0.0.0.0:80/v1",
                                 "https://example.com/v1?api_key=sk-1", "https://e.com/v1?a=1&Subscription-Key=k"])
def test_endpoints_that_would_leak_code_are_refused(url):
    with pytest.raises(ValueError):
        check_endpoint(url)


def test_loopback_http_and_remote_https_are_allowed():
    assert check_endpoint("http://127.0.0.1:8080/v1/") == "http://127.0.0.1:8080/v1"
    assert check_endpoint("http://localhost:8080/v1") == "http://localhost:8080/v1"
    assert check_endpoint("http://[::1]:8080/v1") == "http://[::1]:8080/v1"
    assert check_endpoint("https://gpu.example.com/v1") == "https://gpu.example.com/v1"
    assert check_endpoint("https://x.openai.azure.com/openai/deployments/c?api-version=2024-02-01").endswith(
        "?api-version=2024-02-01")


def test_settings_take_an_environment_variable_name_never_a_key():
    for pasted in ("sk-live-123", "hf_QzXwVbNmLkJhGfDsAaPoIuYtReWq12345678", "DEADBEEF0123456789ABCDEF0123"):
        settings, warnings, _ = apply_changes(ServerSettings(), {"backend": "openai", "apiKeyEnv": pasted,
                                                                  "endpoint": pasted, "fimTemplate": "qwen",
                                                                  "requestTimeoutMs": 50})
        assert settings.remote.backend == "openai" and settings.remote.api_key_env is None
        assert settings.remote.endpoint is None
        assert len(warnings) == 3 and not any(pasted in w for w in warnings)
    assert apply_changes(ServerSettings(), {"apiKeyEnv": "TEAM_COMPLETIONS_KEY"})[0].remote.api_key_env \
        == "TEAM_COMPLETIONS_KEY"
    assert settings.remote.template() == "qwen"


# -- the real server in front of a loopback endpoint --------------------------------------------------
@pytest.fixture
def endpoint():
    fake = FakeEndpoint().start()
    yield fake
    fake.stop()


def _options(url: str, **extra) -> dict:
    return {"backend": "openai", "endpoint": url, "model": "qwen2.5-coder-test", "apiKeyEnv": "COMPLETER_TEST_KEY",
            "requestTimeoutMs": 1000, **extra}


async def _start(client: LanguageClient, url: str, **extra) -> None:
    await client.initialize_session(types.InitializeParams(capabilities=client_capabilities("visual-studio-code"),
                                                           initialization_options=_options(url, **extra)))


async def _stop(client: LanguageClient) -> None:
    try:
        await asyncio.wait_for(client.shutdown_session(), 10)
    except Exception:
        if client._server is not None and client._server.returncode is None:
            client._server.kill()


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER_CMD,
                                              server_env=server_env(COMPLETER_TEST_KEY=API_KEY)))
async def client(lsp_client: LanguageClient):
    yield lsp_client
    await _stop(lsp_client)


async def _inline(client: LanguageClient, line: int, column: int) -> list[str]:
    result = await asyncio.wait_for(client.text_document_inline_completion_async(inline_params(URI, line, column)), 10)
    return [item.insert_text for item in result.items] if result else []


async def test_lines_come_from_the_endpoint_with_a_fim_prompt(client: LanguageClient, endpoint: FakeEndpoint):
    await _start(client, endpoint.url)
    open_doc(client, URI, DOC)
    assert await _inline(client, *CURSOR) == ["    return a + b"]
    items = await client.text_document_completion_async(completion_params(URI, *CURSOR))
    assert [item.text_edit.new_text for item in items.items] == ["    return a + b"]
    assert items.items[0].detail == "completer · from the configured endpoint"
    seen = endpoint.seen[0]
    assert seen.path == "/v1/completions" and len(endpoint.seen) == 1  # the second request typed through nothing new
    assert seen.body["prompt"] == ("<|fim_prefix|>import math\n\n\ndef add(a, b):\n<|fim_suffix|>\n"
                                   "print(add(1, 2))\n<|fim_middle|>")
    assert seen.body["stop"] == ["\n"] and seen.body["max_tokens"] == 24 and seen.body["temperature"] == 0
    assert seen.body["model"] == "qwen2.5-coder-test" and seen.body["n"] == 1
    assert seen.headers["authorization"] == f"Bearer {API_KEY}"
    # typing the start of the line types through the answer: no second request
    change_doc(client, URI, 2, CURSOR, CURSOR, "    ret")
    assert await _inline(client, 4, 7) == ["    return a + b"]
    assert len(endpoint.seen) == 1
    state = await info(client)
    assert state["backend"] == "openai" and state["model"] == "qwen2.5-coder-test"
    assert state["remote"]["endpoint"] == endpoint.url and state["remote"]["state"] == "ready"
    assert state["server"]["worker_pid"] is None  # no local model was loaded
    logged = "\n".join(m.message for m in client.log_messages)
    assert "the code around the cursor is sent there" in logged
    assert API_KEY not in logged
    assert not any(API_KEY in p.read_text(errors="replace") for p in Path(LOG_DIR).rglob("*") if p.is_file())


@pytest.mark.parametrize("language, text, column, expected", [
    ("ruby", "  next if line =~ /^\\s*#/", len("  next if "), "  next if line.empty?"),  # a regex the scan skips
    ("ruby", "  x = text =~ /#{name}/", len("  x = "), "  x = line.empty?"),
    ("haskell", "  let y = a --> b", len("  let y = "), "  let y = line.empty?"),  # an operator, no comment
    ("haskell", "  let y = a --> b  -- c", len("  let y = "), "  let y = line.empty?  -- c"),
])
async def test_what_only_looks_like_a_comment_after_the_cursor_is_not_kept(client: LanguageClient,
                                                                          endpoint: FakeEndpoint, language: str,
                                                                          text: str, column: int, expected: str):
    """A suggestion keeps a comment after the cursor, as the language's scan finds it: where that text was no
    comment (a `#` in a Ruby regular expression, Haskell's `-->`), the line offered ended in it: `next if x #/`."""
    endpoint.behaviour = Behaviour(line=lambda prompt: "line.empty?")
    await _start(client, endpoint.url)
    uri = f"file:///work/code.{language[:2]}"
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=uri, language_id=language, version=1, text=f"def f\n{text}\nend\n")))
    items = await client.text_document_completion_async(completion_params(uri, 1, column))
    assert [apply_line_edit(["def f", text], i.text_edit)[1] for i in items.items] == [expected]


@pytest.mark.parametrize("language, above, typed, answer, expected", [
    # the second line of a string: the line that ends it is kept
    ("php", ["<?php", '$sql = "SELECT id'], "    FROM users WHERE ", 'name = ?";', ['    FROM users WHERE name = ?";']),
    ("ruby", ["def f", "  msg = 'Usage: tool [options]"], "  -h  this help (", "or -? ]'",
     ["  -h  this help (or -? ]'"]),
    ("r", ["f <- function() {", '  cat("a (]'], "  b", '")', ['  b")']),
    ("elixir", ["def f do", '  IO.puts "a (]'], "  b", '"', ['  b"']),
    ("julia", ["function f()", '    s = "a (]'], "  b", '"', ['  b"']),
    # the `(` in the string's second line opens nothing that the function's `}` or `end` must close
    ("rust", ["fn main() {", '    let help = "usage: tool', '  -v  more (repeat it";'], "", "}", ["}"]),
    # nor does it close what a stray `)` closes
    ("ruby", ["def f", '  msg = "Usage: tool', '  (see the docs"'], "  puts ", "msg)", []),
])
async def test_the_lines_of_a_string_that_goes_on_over_lines_are_read_as_the_strings(
        client: LanguageClient, endpoint: FakeEndpoint, language: str, above: list[str], typed: str, answer: str,
        expected: list[str]):
    """In these languages a string in plain quotes may go on over lines: read as ending on its first line, its
    second line was code, where its own closing quote opened a string never closed (the line that ended the
    string was dropped) and its brackets were open or broken (the function's `}` was dropped, a stray `)` kept)."""
    endpoint.behaviour = Behaviour(line=lambda prompt: answer)
    await _start(client, endpoint.url)
    uri = f"file:///work/code.{language}"
    lines = [*above, typed]
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=uri, language_id=language, version=1, text="\n".join(lines) + "\n")))
    items = await client.text_document_completion_async(completion_params(uri, len(above), len(typed)))
    assert [apply_line_edit(lines, i.text_edit)[len(above)] for i in items.items] == expected


async def _answered_empty(client: LanguageClient, column: int, within: float) -> None:
    started = time.monotonic()
    assert await _inline(client, CURSOR[0], column) == []
    assert time.monotonic() - started < within


async def _recover(client: LanguageClient, endpoint: FakeEndpoint, version: int) -> None:
    """Wait out the back-off and see the endpoint answer again (which resets it)."""
    endpoint.behaviour = Behaviour()
    change_doc(client, URI, version, (4, 0), (4, 100), "")
    deadline = time.monotonic() + 10
    while not await _inline(client, *CURSOR):
        assert time.monotonic() < deadline, "the backend never asked the endpoint again"
        await asyncio.sleep(0.3)
    assert (await info(client))["remote"]["state"] == "ready"


async def test_a_qwen_endpoint_is_sent_the_workspace_laid_out_as_files(client: LanguageClient,
                                                                       endpoint: FakeEndpoint, tmp_path: Path):
    root = tmp_path / "shop"
    root.mkdir()
    (root / "prices.py").write_text("def add_with_tax(a, b):\n    return (a + b) * 1.2\n")  # never opened

    @client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def registered(params: types.RegistrationParams) -> None:  # the server asks to watch the indexed files
        return None

    await client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), root_uri=root.as_uri(),
        initialization_options=_options(endpoint.url)))
    uri = (root / "cart.py").as_uri()
    text = "from prices import add_with_tax\n\n\ndef add(a, b):\n    return add_with_tax(a, b)\n\n\n"
    deadline = time.monotonic() + 10
    while True:  # the index is built on a thread: ask until the prompt holds the other file
        open_doc(client, uri, text, version=len(endpoint.seen) + 1)
        await asyncio.wait_for(client.text_document_inline_completion_async(inline_params(uri, 7, 0)), 10)
        if "<|file_sep|>prices.py" in endpoint.seen[-1].body["prompt"]:
            break
        assert time.monotonic() < deadline, endpoint.seen[-1].body["prompt"]
        client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))
        await asyncio.sleep(0.2)
    assert endpoint.seen[-1].body["prompt"] == (
        "<|repo_name|>shop\n<|file_sep|>prices.py\ndef add_with_tax(a, b):\n    return (a + b) * 1.2\n"
        f"<|file_sep|>cart.py\n<|fim_prefix|>{text}<|fim_suffix|><|fim_middle|>")


async def test_errors_answer_empty_back_off_and_are_logged_once(client: LanguageClient, endpoint: FakeEndpoint):
    await _start(client, endpoint.url)
    open_doc(client, URI, DOC)
    version = 2
    for mode in ("status", "garbage", "huge", "trickle", "slow"):
        endpoint.behaviour = Behaviour(mode=mode, delay_s=3.0)
        change_doc(client, URI, version, (4, 0), (4, 100), "    q")  # not typed through the last answer
        await _answered_empty(client, 5, within=3.0)  # the timeout is 1 s
        sent = len(endpoint.seen)
        change_doc(client, URI, version + 1, (4, 5), (4, 5), "u")
        await _answered_empty(client, 6, within=0.5)  # backing off: not sent
        assert len(endpoint.seen) == sent
        state = (await info(client))["remote"]
        assert state["state"] == "error" and state["last_error"], mode
        await _recover(client, endpoint, version + 2)
        version += 3
    warnings = [m.message for m in client.log_messages if "remote completion failed" in m.message]
    kinds = ("answered 500", "not JSON", "over 1,048,576", "within 1000 ms", "within 1000 ms")
    assert [next(kind for kind in kinds if kind in w) for w in warnings] == list(kinds)  # one line per failure


async def test_a_request_the_endpoint_refuses_backs_nothing_off(client: LanguageClient, endpoint: FakeEndpoint):
    """A 400 (a prompt past the model's context) is about that request: the next keystroke asks again at once."""
    await _start(client, endpoint.url)
    open_doc(client, URI, DOC)
    endpoint.behaviour = Behaviour(mode="status", status=400)
    for version, (column, typed) in enumerate(((0, "    q"), (5, "u"), (6, "o")), start=2):
        change_doc(client, URI, version, (4, column), (4, column), typed)  # each keystroke a new request
        await _answered_empty(client, column + len(typed), within=2.0)
    assert len(endpoint.seen) == 3
    state = (await info(client))["remote"]
    assert state["state"] == "error" and "answered 400" in state["last_error"]
    warnings = [m.message for m in client.log_messages if "remote completion failed" in m.message]
    assert len(warnings) == 1 and "next ones are sent as usual" in warnings[0]
    endpoint.behaviour = Behaviour()
    change_doc(client, URI, 5, (4, 0), (4, 100), "")
    assert await _inline(client, *CURSOR) == ["    return a + b"]


async def test_an_endpoint_that_refuses_every_request_is_backed_off(client: LanguageClient, endpoint: FakeEndpoint):
    """A wrong model name gets a 400 for every request: after REFUSALS_IN_A_ROW of them the backend backs off."""
    await _start(client, endpoint.url)
    open_doc(client, URI, DOC)
    endpoint.behaviour = Behaviour(mode="status", status=400)
    typed = ["    q", *"uotient"]
    column = 0
    for version, text in enumerate(typed[:REFUSALS_IN_A_ROW], start=2):
        change_doc(client, URI, version, (4, column), (4, column), text)
        column += len(text)
        await _answered_empty(client, column, within=2.0)
    assert len(endpoint.seen) == REFUSALS_IN_A_ROW
    change_doc(client, URI, REFUSALS_IN_A_ROW + 2, (4, column), (4, column), typed[REFUSALS_IN_A_ROW])
    await _answered_empty(client, column + 1, within=0.5)  # backing off: not sent
    assert len(endpoint.seen) == REFUSALS_IN_A_ROW
    assert any(f"refused {REFUSALS_IN_A_ROW} requests in a row" in m.message for m in client.log_messages)


async def test_unreachable_endpoint_answers_empty(client: LanguageClient):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    await _start(client, f"http://127.0.0.1:{port}/v1")
    open_doc(client, URI, DOC)
    await _answered_empty(client, 0, within=2.0)
    state = (await info(client))["remote"]
    assert state["state"] == "error" and "cannot connect" in state["last_error"]
    assert any("cannot connect" in m.message for m in client.log_messages)


async def test_a_cancelled_request_closes_its_http_call(client: LanguageClient, endpoint: FakeEndpoint):
    await _start(client, endpoint.url, requestTimeoutMs=10000)
    open_doc(client, URI, DOC)
    endpoint.behaviour = Behaviour(mode="slow", delay_s=8.0)
    pending = asyncio.ensure_future(client.protocol.send_request_async(
        types.TEXT_DOCUMENT_INLINE_COMPLETION, inline_params(URI, *CURSOR), msg_id="remote-1"))
    await _until(lambda: len(endpoint.seen) == 1)
    client.cancel_request(types.CancelParams(id="remote-1"))
    with pytest.raises(JsonRpcException):
        await asyncio.wait_for(pending, 5)
    await _until(lambda: endpoint.seen[0].closed_early)
    assert (await info(client))["remote"]["requests_closed"] == 1


async def test_one_request_at_a_time_per_document(client: LanguageClient, endpoint: FakeEndpoint):
    await _start(client, endpoint.url, requestTimeoutMs=10000)
    open_doc(client, URI, DOC)
    endpoint.behaviour = Behaviour(mode="slow", delay_s=1.5)
    first = asyncio.ensure_future(_inline(client, 3, 0))
    await _until(lambda: len(endpoint.seen) == 1)
    second = asyncio.ensure_future(_inline(client, *CURSOR))  # the cursor moved: the first is superseded
    assert await asyncio.wait_for(first, 5) == []  # answered empty at once, not after its call
    assert await asyncio.wait_for(second, 10) == ["    return a + b"]
    assert endpoint.most_in_flight == 1 and endpoint.seen[0].closed_early and len(endpoint.seen) == 2


async def test_an_edit_while_the_endpoint_answers_makes_the_request_content_modified(client: LanguageClient,
                                                                                      endpoint: FakeEndpoint):
    """As with the local worker: an edit of the document makes the request in flight ContentModified, which a
    client takes as stale, not RequestCancelled, which it did not ask for."""
    await _start(client, endpoint.url, requestTimeoutMs=10000)
    open_doc(client, URI, DOC)
    endpoint.behaviour = Behaviour(mode="slow", delay_s=8.0)
    pending = asyncio.ensure_future(_inline(client, *CURSOR))
    await _until(lambda: len(endpoint.seen) == 1)
    change_doc(client, URI, 2, (0, 0), (0, 0), "#")
    with pytest.raises(JsonRpcException) as raised:
        await asyncio.wait_for(pending, 5)
    assert raised.value.code == types.LSPErrorCodes.ContentModified
    await _until(lambda: endpoint.seen[0].closed_early)


async def test_backend_switches_at_run_time(client: LanguageClient, endpoint: FakeEndpoint):
    await _start(client, endpoint.url)
    open_doc(client, URI, DOC)
    assert await _inline(client, *CURSOR) == ["    return a + b"]
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"completer": {"backend": "local"}}))
    deadline = time.monotonic() + 30
    while not (state := await info(client))["server"]["worker_pid"]:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.1)
    assert state["backend"] == "local" and state["model"] == "python-small"
    change_doc(client, URI, 2, (4, 0), (4, 0), "    return")
    lines = await _inline(client, 4, 10)
    assert lines and all(line.startswith("    return") for line in lines)
    assert len(endpoint.seen) == 1  # the local model answered


async def test_a_missing_endpoint_is_one_clear_error(client: LanguageClient):
    await client.initialize_session(types.InitializeParams(capabilities=client_capabilities("visual-studio-code"),
                                                           initialization_options={"backend": "openai"}))
    open_doc(client, URI, DOC)
    assert await _inline(client, *CURSOR) == []
    await _until(lambda: any("needs completer.endpoint" in m.message for m in client.messages))
    assert "needs completer.endpoint" in (await info(client))["model_error"]


def test_without_httpx_the_error_gives_the_checkouts_install_command(tmp_path: Path):
    """An install without the remote extra (scripts/demo.sh installs the runtime alone) has no httpx: backend
    "openai" then says how to install the extra from this checkout, as the README does, never by a `completer`
    package name on PyPI, which this project does not publish (that name would install someone else's code)."""
    blocked = tmp_path / "blocked" / "httpx"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError('httpx is not installed here')\n")
    env = server_env(PYTHONPATH=os.pathsep.join([str(blocked.parent), str(REPO)]))
    with RawClient(SERVER_CMD, env=env) as raw:
        raw.initialize({"completer": {"backend": "openai", "endpoint": "http://127.0.0.1:9/v1", "model": "x"}})
        deadline = time.monotonic() + 10
        while not (error := raw.request("completer/info")["result"].get("model_error")):
            assert time.monotonic() < deadline, "no model_error"
            time.sleep(0.05)
    pip = f"{shlex.quote(sys.executable)} -m pip"  # into the interpreter that runs the server, not a bare `pip`
    assert error == f"backend \"openai\" needs the httpx package: {pip} install -e '{REPO}[remote]'"


async def _until(predicate, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.05)


async def test_a_line_that_finishes_the_word_as_a_known_name_comes_first(client: LanguageClient,
                                                                        endpoint: FakeEndpoint, tmp_path: Path):
    """Three lines from the endpoint, the first inventing a name: the server puts first the line whose name
    Python, the document or another file of the workspace has (completer/known_names.py), and drops none."""
    root = tmp_path / "shop"
    root.mkdir()
    (root / "codec.py").write_text("def tokenize_payload(data):\n    return data.split()\n")  # never opened

    @client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def registered(params: types.RegistrationParams) -> None:
        return None

    endpoint.behaviour = Behaviour(choices=lambda prompt: (
        ["ationError:", "eError:", "meError:"] if "except Valu<|fim_suffix|>" in prompt
        else ["th(data)", "yload(data)", "ck(data)"]))
    await client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), root_uri=root.as_uri(),
        initialization_options=_options(endpoint.url, endpointChoices=3)))
    uri = (root / "reader.py").as_uri()
    text = "def read(data):\n    try:\n        return int(data)\n    except Valu\n"
    open_doc(client, uri, text)
    result = await client.text_document_completion_async(completion_params(uri, 3, 15))
    assert [item.text_edit.new_text for item in result.items] == [
        "    except ValueError:", "    except ValuationError:", "    except ValumeError:"]
    # a name only another file of the workspace has: first once the index holds that file
    text = "def read(data):\n    words = tokenize_pa\n"
    deadline = time.monotonic() + 10
    for version in range(2, 1000):
        change_doc(client, uri, version, (0, 0), (5, 0), text)
        result = await client.text_document_completion_async(completion_params(uri, 1, 23))
        lines = [item.text_edit.new_text for item in result.items]
        if lines[0] == "    words = tokenize_payload(data)":
            break
        assert lines == ["    words = tokenize_path(data)", "    words = tokenize_payload(data)",
                         "    words = tokenize_pack(data)"], lines
        assert time.monotonic() < deadline, "the workspace's name never put its line first"
        await asyncio.sleep(0.2)
    assert sorted(lines) == ["    words = tokenize_pack(data)", "    words = tokenize_path(data)",
                             "    words = tokenize_payload(data)"]
