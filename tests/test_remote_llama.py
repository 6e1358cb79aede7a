"""The remote backend against a real OpenAI-compatible server: llama-cpp-python's, on loopback, serving our own
model's weights (scripts/gguf_export.py, scripts/llama_server.py), driven through the real language server."""
from __future__ import annotations

import asyncio
import json
import urllib.request

import pytest

pytest.importorskip("llama_cpp.server.app")  # the test extra installs llama-cpp-python[server]; CI fails on a skip

import pytest_lsp  # noqa: E402
from lsprotocol import types  # noqa: E402
from pygls.exceptions import JsonRpcException  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities  # noqa: E402

from completer.remote import RemoteAnswers  # noqa: E402
from completer.text import clean  # noqa: E402
from completer.types import CompletionResult  # noqa: E402
from llama_server import llama_server, our_gguf  # noqa: E402
from lsp_support import SAMPLE_LINES, SERVER_CMD, candidate_positions, info, inline_params, open_doc  # noqa: E402
from lsp_support import server_env  # noqa: E402

URI = "file:///work/sample.py"
PROMPT_CHARS = 2000  # llama.cpp's tokens of this many characters fit its 1,024-token context


@pytest.fixture(scope="module")
def llama_url(tmp_path_factory: pytest.TempPathFactory):
    gguf_path = our_gguf(tmp_path_factory.getbasetemp() / "gguf")
    with llama_server(gguf_path, n_ctx=1024, threads=2) as url:
        yield url


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER_CMD, server_env=server_env()))
async def client(lsp_client: LanguageClient, llama_url: str):
    options = {"backend": "openai", "endpoint": llama_url, "model": "python-small-f32", "fimTemplate": "none",
               "promptChars": PROMPT_CHARS, "requestTimeoutMs": 20000}
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), initialization_options=options))
    yield
    await asyncio.wait_for(lsp_client.shutdown_session(), 10)


def _direct_completion(url: str, prompt: str) -> dict:
    """What llama.cpp's server itself answers for the prompt the backend sends."""
    body = json.dumps({"model": "python-small-f32", "prompt": prompt, "max_tokens": 24, "temperature": 0,
                       "stop": ["\n"], "n": 1}).encode()
    request = urllib.request.Request(f"{url}/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as reply:
        return json.loads(reply.read())


async def test_inline_lines_are_the_llama_server_completions(client: LanguageClient, llama_url: str):
    text = "\n".join(SAMPLE_LINES)
    open_doc(client, URI, text)
    checked = 0
    for line, column in candidate_positions()[:12]:
        result = await client.text_document_inline_completion_async(inline_params(URI, line, column))
        if not result or not result.items:
            continue
        typed = SAMPLE_LINES[line][:column]
        before = clean("\n".join(SAMPLE_LINES[:line] + [typed]))
        request = RemoteAnswers().prepare(URI, before, SAMPLE_LINES[line][column:], "", (), None, PROMPT_CHARS)
        assert not isinstance(request, CompletionResult)
        direct = _direct_completion(llama_url, request.prompt)["choices"][0]
        assert result.items[0].insert_text == (typed + direct["text"]).rstrip()
        assert result.items[0].range.start == types.Position(line, 0)
        checked += 1
    assert checked >= 3, "llama.cpp's server offered a line at fewer than 3 of 12 positions"
    state = await info(client)
    assert state["remote"]["state"] == "ready" and state["remote"]["requests_failed"] == 0


async def test_a_cancelled_request_leaves_the_server_serving(client: LanguageClient):
    open_doc(client, URI, "\n".join(SAMPLE_LINES))
    line, column = candidate_positions()[0]
    pending = asyncio.ensure_future(client.protocol.send_request_async(
        types.TEXT_DOCUMENT_INLINE_COMPLETION, inline_params(URI, line, column), msg_id="llama-1"))
    await asyncio.sleep(0.01)
    client.cancel_request(types.CancelParams(id="llama-1"))
    try:
        await asyncio.wait_for(pending, 10)
    except JsonRpcException:
        pass  # cancelled in flight (or answered first: both are fine)
    for line, column in candidate_positions()[1:12]:
        result = await client.text_document_inline_completion_async(inline_params(URI, line, column))
        if result and result.items:
            break
    else:
        raise AssertionError("no line after a cancelled request")
    assert (await info(client))["remote"]["requests_failed"] == 0
