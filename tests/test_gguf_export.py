"""scripts/gguf_export.py: llama.cpp runs our own weights as our model does, and llama-cpp-python's server
(scripts/llama_server.py, what the remote backend's tests talk to) serves them over the OpenAI API."""
from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("llama_cpp")  # the test extra installs llama-cpp-python[server]; CI fails on a skip

import gguf  # noqa: E402
from gguf_export import DEFAULT_SOURCE, agreement  # noqa: E402
from llama_server import llama_server, our_gguf  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

MANIFEST = json.loads((DEFAULT_SOURCE.parent / "manifest.json").read_text())
HELD_OUT = Path(__file__).resolve().parent.parent / "completer" / "beam.py"  # our own code: not in the corpus


@pytest.fixture(scope="session")
def gguf_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder per session, so every test (and module) shares the GGUFs our_gguf writes there."""
    return tmp_path_factory.getbasetemp() / "gguf"


@pytest.fixture(scope="session")
def gguf_path(gguf_dir: Path) -> Path:
    return our_gguf(gguf_dir)


def _field(reader: gguf.GGUFReader, key: str):
    return reader.fields[key].contents()


def test_metadata_is_what_llama_cpp_gpt2_loads(gguf_path: Path) -> None:
    reader = gguf.GGUFReader(gguf_path)
    arch = MANIFEST["architecture"]
    assert _field(reader, "general.architecture") == "gpt2"
    assert _field(reader, "gpt2.block_count") == arch["n_layer"]
    assert _field(reader, "gpt2.context_length") == arch["context_length"]
    tokens = _field(reader, "tokenizer.ggml.tokens")
    assert len(tokens) == arch["vocab_size"]
    assert tokens[MANIFEST["newline_token_id"]] == "Ċ"  # byte-level "\n"
    end_of_text = MANIFEST["special_tokens"]["end_of_text"]
    assert _field(reader, "tokenizer.ggml.bos_token_id") == _field(reader, "tokenizer.ggml.eos_token_id") == end_of_text
    names = {t.name for t in reader.tensors}
    assert "output.weight" not in names  # tied head: llama.cpp reuses token_embd
    assert {f"blk.{arch['n_layer'] - 1}.{n}.bias" for n in ("attn_qkv", "attn_output", "ffn_up", "ffn_down")} <= names


@pytest.mark.parametrize("kind,least", [("f32", 0.95), ("q8_0", 0.90)])
def test_llama_cpp_predicts_our_next_tokens(gguf_dir: Path, kind: str, least: float) -> None:
    """Same ids in, same greedy token out
    (measured on 200/600/1024 positions: f32 99.0/99.7/99.6%, q8_0 95.0/97.3/97.8%; llama.cpp's GELU is tanh's)."""
    assert agreement(our_gguf(gguf_dir, kind), positions=200) >= least


def test_llama_cpp_tokenizes_unindented_lines_as_we_do(gguf_path: Path) -> None:
    """Vocabulary order and merges are ours: only a line's leading spaces split differently (llama.cpp's GPT-2
    pre-tokenizer gives "   " + " return" where ours gives "    " + "return")."""
    from llama_cpp import Llama

    ours = Tokenizer.from_file(str(DEFAULT_SOURCE.parent / "tokenizer.json"))
    llm = Llama(model_path=str(gguf_path), vocab_only=True, verbose=False)
    lines = [line for line in HELD_OUT.read_text().splitlines() if line.strip() and not line.startswith(" ")]
    assert len(lines) > 20
    for line in lines:
        assert llm.tokenize(line.encode(), add_bos=False) == ours.encode(line).ids, line
    assert llm.tokenize(b"a\n\nb", add_bos=False) == ours.encode("a\n\nb").ids  # newlines stay their own token


def _post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def test_server_answers_an_openai_completion(gguf_path: Path) -> None:
    pytest.importorskip("llama_cpp.server.app")
    with llama_server(gguf_path) as base_url:
        reply = _post(f"{base_url}/completions", {"prompt": "def add(a, b):\n    return", "max_tokens": 16,
                                                  "temperature": 0, "stop": ["\n"]})
    choice = reply["choices"][0]
    assert reply["object"] == "text_completion"
    assert choice["text"] and "\n" not in choice["text"]
    assert choice["finish_reason"] in ("stop", "length")
    assert 0 < reply["usage"]["completion_tokens"] <= 16


def test_server_that_cannot_start_says_why(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp.server.app")
    bogus = tmp_path / "not-a-model.gguf"
    bogus.write_bytes(b"not a gguf")
    with pytest.raises(RuntimeError, match="exited with"), llama_server(bogus, timeout_s=30):
        pass
