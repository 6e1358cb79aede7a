"""`completer convert FILE.gguf` (completer/gguf_source.py): tiny random checkpoints of each family, written here
as GGUF files in llama.cpp's layout (LLaMA's query and key rows permuted for its rotation, names, metadata, the
vocabulary and merges), checked first against llama.cpp itself (llama-cpp-python runs the file; its logits and
its tokenization must agree with transformers and the tokenizer the file came from), then converted and checked
against transformers' logits. No downloads: the models are built here."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")  # the test extra installs it; CI fails on a skip (scripts/test.sh)
gguf = pytest.importorskip("gguf")

from gguf_files import rewritten, write_gguf  # noqa: E402
from hf_models import checkpoint, logits  # noqa: E402

from completer.bundle import load_bundle  # noqa: E402
from completer.cli import main as cli_main  # noqa: E402
from completer.runtime import Runtime  # noqa: E402

CONTEXT = 128
CODE = ("def total(items, *, tax=0.2):\n    \"\"\"Sum the prices.\"\"\"\n"
        "    return sum(i.price for i in items) * (1 + tax)\n\n\nclass Cart:\n    def __init__(self):\n"
        "        self.items = []  # 12 items, 3.5 each\n")


def llama_cpp(path: Path):
    from llama_cpp import Llama

    return Llama(model_path=str(path), logits_all=True, n_ctx=CONTEXT, n_batch=CONTEXT, n_threads=2,
                 n_threads_batch=2, verbose=False)


FAMILIES = [("llama", False), ("llama_bias", True), ("qwen2", True), ("qwen3", True), ("starcoder2", True),
            ("gpt_bigcode", True), ("gpt2", True)]


@pytest.fixture(scope="module", params=FAMILIES, ids=[family for family, _ in FAMILIES])
def written(request, tmp_path_factory) -> tuple[str, Path, Path, object]:
    """A tiny checkpoint of a family (LLaMA with grouped-query attention and its own output head; Qwen2 with
    biases; StarCoder2 with LayerNorms and biases; StarCoder's gpt_bigcode, llama.cpp's `starcoder`, with learned
    positions and one key/value head), and that checkpoint as an F32 GGUF file."""
    family, tied = request.param
    root = tmp_path_factory.mktemp(f"gguf-{family}")
    model = checkpoint(root / "src", family, tied=tied)
    return family, root / "src", write_gguf(root / "src", root / f"{family}.gguf", family, quantized=False), model


def test_the_test_files_are_what_llama_cpp_reads(written):
    """The layout these tests write is llama.cpp's: it computes transformers' logits from the file, and it
    splits text into the tokens the checkpoint's tokenizer gives."""
    from tokenizers import Tokenizer

    _, src, path, model = written
    ids = Tokenizer.from_file(str(src / "tokenizer.json")).encode(CODE).ids[:40]
    llm = llama_cpp(path)
    try:
        assert llm.tokenize(CODE.encode(), add_bos=False, special=False)[:40] == ids
        llm.eval(ids)
        theirs = np.asarray(llm.scores[:len(ids)])
    finally:
        llm.close()
    expected = logits(model, ids)
    # llama.cpp keeps its KV cache in f16: close, where a misplaced row would differ everywhere
    np.testing.assert_allclose(theirs, expected, atol=5e-3 * max(1.0, np.abs(expected).max()))


def test_a_converted_gguf_file_computes_the_checkpoints_logits_and_tokenizes_as_it(written, tmp_path):
    from tokenizers import Tokenizer

    family, src, path, model = written
    assert cli_main(["convert", str(path), "--out", str(tmp_path / "bundle"), "--fp32", "--context", str(CONTEXT)]) == 0
    manifest = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    assert manifest["source"]["folder"] == path.name
    assert manifest["source"]["gguf_architecture"] == {"gpt_bigcode": "starcoder"}.get(family, family.removesuffix("_bias"))
    assert manifest["source"]["license"] == "apache-2.0" and manifest["source"]["gguf_types"] == ["F32"]
    assert manifest["fim"]["template"] == "qwen"  # the markers, found among the file's control tokens
    card = (tmp_path / "bundle" / "MODEL.md").read_text()
    assert f"completer convert {path} --out" in card and f"from the GGUF file `{path.name}`" in card
    assert "read from the GGUF file's metadata" in card and "Source files" not in card  # it has no config.json
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".gguf-")]  # the unpacked folder is gone
    rebuilt = Tokenizer.from_file(str(tmp_path / "bundle" / "tokenizer.json"))
    original = Tokenizer.from_file(str(src / "tokenizer.json"))
    assert rebuilt.encode(CODE).ids == original.encode(CODE).ids
    runtime = Runtime(load_bundle(tmp_path / "bundle"), device="cpu")
    ids = original.encode(CODE).ids[:30]
    expected = logits(model, ids)
    prefix, past = runtime.empty_prefix(), runtime.empty_past(1)
    for position, token in enumerate(ids):  # one beam along the text: the graph's best token is transformers'
        out = runtime.run(np.asarray([[token]]), position, prefix, past, num_beams=1)
        assert out.tokens[0] == expected[position].argmax(), position
        past = out.carried(np.zeros(1, np.int64))


def test_a_qwen3_file_whose_heads_are_hidden_size_over_heads_wide_keeps_that_head_size(tmp_path):
    """llama.cpp writes Qwen3's key_length; where it is hidden_size / heads, the unpacked config.json still names
    it: transformers' Qwen3 reads a config.json without head_dim as heads 128 wide."""
    from tokenizers import Tokenizer

    model = checkpoint(tmp_path / "src", "qwen3", tied=True, head_dim=16)  # 64 / 4 heads
    path = write_gguf(tmp_path / "src", tmp_path / "model.gguf", "qwen3", quantized=False)
    assert cli_main(["convert", str(path), "--out", str(tmp_path / "bundle"), "--fp32", "--context", str(CONTEXT)]) == 0
    runtime = Runtime(load_bundle(tmp_path / "bundle"), device="cpu")
    ids = Tokenizer.from_file(str(tmp_path / "src" / "tokenizer.json")).encode(CODE).ids[:20]
    expected = logits(model, ids)
    prefix, past = runtime.empty_prefix(), runtime.empty_past(1)
    for position, token in enumerate(ids):
        out = runtime.run(np.asarray([[token]]), position, prefix, past, num_beams=1)
        assert out.tokens[0] == expected[position].argmax(), position
        past = out.carried(np.zeros(1, np.int64))


def test_a_gguf_file_of_a_general_qwen_model_by_its_general_name_converts_without_fim(tmp_path):
    """llama.cpp names a file's model in general.name: a general Qwen2.5's file keeps the markers untrained."""
    checkpoint(tmp_path / "src", "qwen2", tied=True)
    base = write_gguf(tmp_path / "src", tmp_path / "base.gguf", "qwen2", quantized=False)
    path = rewritten(base, tmp_path / "model.gguf", **{"general.name": "Qwen2.5 0.5B Instruct"})
    assert cli_main(["convert", str(path), "--out", str(tmp_path / "bundle"), "--context", str(CONTEXT)]) == 0
    manifest = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    assert "fim" not in manifest and manifest["fim_declined"].startswith("Qwen2.5 0.5B Instruct is a general model")
    assert manifest["source"]["gguf_name"] == "Qwen2.5 0.5B Instruct"


LLAMA_CPP_NOISE = 0.5
"""How far below its best llama.cpp may score our next token: it quantizes the activations of a Q8_0 product to
8 bits too, and a tiny random model's best two logits often lie closer than that (its logits' spread is ~2.5)."""


def test_quantized_blocks_are_read_as_llama_cpp_reads_them(written, tmp_path):
    """A Q8_0 file: the converted fp32 graph's next tokens are llama.cpp's on the same file, but where llama.cpp's
    own best two lie within its activations' rounding (a block misread would score ours far below its best)."""
    from tokenizers import Tokenizer

    family, src, _, _ = written
    path = write_gguf(src, tmp_path / f"{family}-q8_0.gguf", family, quantized=True)
    assert cli_main(["convert", str(path), "--out", str(tmp_path / "bundle"), "--fp32", "--context", str(CONTEXT)]) == 0
    assert "Q8_0" in json.loads((tmp_path / "bundle" / "manifest.json").read_text())["source"]["gguf_types"]
    ids = Tokenizer.from_file(str(src / "tokenizer.json")).encode(CODE).ids[:40]
    llm = llama_cpp(path)
    try:
        llm.eval(ids)
        scores = np.asarray(llm.scores[:len(ids)], np.float32)
    finally:
        llm.close()
    runtime = Runtime(load_bundle(tmp_path / "bundle"), device="cpu")
    prefix, past, agree = runtime.empty_prefix(), runtime.empty_past(1), 0
    for position, token in enumerate(ids):
        out = runtime.run(np.asarray([[token]]), position, prefix, past, num_beams=1)
        ours, theirs = int(out.tokens[0]), scores[position]
        assert theirs[ours] >= theirs.max() - LLAMA_CPP_NOISE, (position, theirs.max() - theirs[ours])
        agree += int(ours == theirs.argmax())
        past = out.carried(np.zeros(1, np.int64))
    assert agree >= 0.8 * len(ids), f"agreed with llama.cpp on {agree} of {len(ids)} positions"


VARIED = ["def f(x):\r\n\treturn x  +  12345 * 3.14\n", "naïve = 'café' # 日本語 テスト 한국어 😀\n",
          "    \n\n\n        x=1\n   ", "class A( B ):\n    \"\"\"doc's\"\"\"\n    pass\n",
          "a  b   c\t\td 2024-11-28 99999999\n", "it's we're I'LL you've\n" + " " * 17 + "end"]


def test_every_pre_tokenizer_splits_text_as_llama_cpp_does(tmp_path):
    """For each pre-tokenizer name read here, the rebuilt tokenizer.json gives llama.cpp's own tokens on code
    with CRLF, tabs, digits, long runs of spaces, contractions, accents, CJK and emoji."""
    from llama_cpp import Llama
    from tokenizers import Tokenizer

    from completer.gguf_source import PRE_TOKENIZERS, unpack

    checkpoint(tmp_path / "src", "qwen2", tied=True)
    base = write_gguf(tmp_path / "src", tmp_path / "base.gguf", "qwen2", quantized=False)
    for pre in PRE_TOKENIZERS:
        path = rewritten(base, tmp_path / f"{pre}.gguf", **{"tokenizer.ggml.pre": pre})
        unpack(path, tmp_path / pre)
        ours = Tokenizer.from_file(str(tmp_path / pre / "tokenizer.json"))
        llm = Llama(model_path=str(path), vocab_only=True, verbose=False)
        try:
            for text in VARIED:
                assert ours.encode(text).ids == llm.tokenize(text.encode(), add_bos=False, special=False), (pre, text)
        finally:
            llm.close()


def test_a_gguf_file_is_known_by_its_first_bytes_without_its_suffix(tmp_path, capsys):
    """Ollama keeps its models as blobs named by digest, with no suffix."""
    checkpoint(tmp_path / "src", "qwen2", tied=True)
    blob = write_gguf(tmp_path / "src", tmp_path / "sha256-0123abcd", "qwen2", quantized=True)
    assert cli_main(["convert", str(blob), "--out", str(tmp_path / "bundle"), "--context", str(CONTEXT)]) == 0
    assert json.loads((tmp_path / "bundle" / "manifest.json").read_text())["source"]["gguf"] == "sha256-0123abcd"
    (tmp_path / "notes.txt").write_text("not a model")
    assert cli_main(["convert", str(tmp_path / "notes.txt"), "--out", str(tmp_path / "out")]) == 2
    assert "not a folder or a GGUF file" in capsys.readouterr().err


@pytest.mark.parametrize("breakage,says", [
    ("architecture", "GGUF architecture 'phi3' is not supported"),
    ("tokenizer", "tokenizer 'llama' is not supported"),
    ("pre", "pre-tokenizer 'chatglm-bpe' is not supported"),
    ("truncated", "not a GGUF file gguf can read"),
    ("extra_tensor", "does not use: rope_freqs.weight"),
    ("infinite_width", "metadata 'qwen2.embedding_length' is missing or not a number"),  # int(inf) would raise
    ("nan_layers", "metadata 'qwen2.block_count' is missing or not a number"),
    ("no_heads", "metadata 'qwen2.attention.head_count' must be a whole number above 0, not 0"),  # divides sizes
    ("nan_weights", "tensor 'blk.1.ffn_up.weight' holds NaN or infinite values (a corrupt file?)"),
    ("shared_bytes", "tensors 'token_embd.weight' and 'output_norm.weight' share bytes (corrupt header)"),
    ("unaligned", "tensor 'output_norm.weight' does not start on the file's 32-byte alignment (corrupt header)"),
])
def test_a_gguf_file_the_graph_cannot_run_is_one_line_and_leaves_nothing(tmp_path, capsys, breakage, says):
    """Written with the gguf package's own writer, then broken one way each."""
    checkpoint(tmp_path / "src", "qwen2", tied=True)
    if breakage == "nan_weights":  # flipped bits: converted, every output of the model would be NaN
        from safetensors.numpy import load_file, save_file

        weights = load_file(str(tmp_path / "src" / "model.safetensors"))
        weights["model.layers.1.mlp.up_proj.weight"][3, 5] = np.inf
        save_file(weights, str(tmp_path / "src" / "model.safetensors"))
    path = write_gguf(tmp_path / "src", tmp_path / "model.gguf", "qwen2", quantized=False)
    if breakage == "truncated":
        path.write_bytes(path.read_bytes()[:5000])
    elif breakage in ("shared_bytes", "unaligned"):  # a corrupt offset: the norm read from the embeddings' bytes
        import gguf

        norm = next(t for t in gguf.GGUFReader(str(path), "r+").tensors if t.name == "output_norm.weight")
        norm.field.parts[-1][0] = 64 if breakage == "shared_bytes" else 3
        norm.field.parts[-1].flush()
    elif breakage != "nan_weights":
        broken = {"architecture": {"architecture": "phi3"}, "tokenizer": {"tokenizer.ggml.model": "llama"},
                  "pre": {"tokenizer.ggml.pre": "chatglm-bpe"},
                  "extra_tensor": {"extra": {"rope_freqs.weight": np.ones(8, np.float32)}},
                  "infinite_width": {"drop": ("qwen2.embedding_length",),
                                     "floats": {"qwen2.embedding_length": float("inf")}},
                  "nan_layers": {"drop": ("qwen2.block_count",), "floats": {"qwen2.block_count": float("nan")}},
                  "no_heads": {"qwen2.attention.head_count": 0},
                  }[breakage]
        path = rewritten(path, tmp_path / "broken.gguf", **broken)
    capsys.readouterr()
    assert cli_main(["convert", str(path), "--out", str(tmp_path / "out"), "--context", str(CONTEXT)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("completer convert: ") and says in err[-1] and "Traceback" not in "\n".join(err), err
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".gguf-") or "converting" in p.name]


def test_a_vocabulary_shorter_than_the_embedding_rows_is_padded_as_the_model_is(tmp_path):
    """Files whose token list stops at the tokenizer's own tokens, with the model's rows running past them."""
    checkpoint(tmp_path / "src", "qwen2", tied=True)  # eight rows past the tokenizer's (hf_models' `pad`)
    path = write_gguf(tmp_path / "src", tmp_path / "model.gguf", "qwen2", quantized=False)
    reader = gguf.GGUFReader(str(path))
    own = [t for t in reader.fields["tokenizer.ggml.tokens"].contents() if not t.startswith("[PAD")]
    kinds = reader.fields["tokenizer.ggml.token_type"].contents()[:len(own)]
    changes = {"tokenizer.ggml.tokens": own, "tokenizer.ggml.token_type": kinds}
    short = rewritten(path, tmp_path / "short.gguf", **changes)
    assert cli_main(["convert", str(short), "--out", str(tmp_path / "bundle"), "--context", str(CONTEXT)]) == 0
    manifest = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    assert manifest["vocab_size"] == manifest["tokenizer_vocab_size"] + 8 == len(own) + 8


def _refused(argv: list[str], capsys) -> str:
    capsys.readouterr()
    assert cli_main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("completer convert: ") and "Traceback" not in "\n".join(err), err
    return err[-1]


def test_a_gguf_file_inside_the_bundle_it_would_replace_is_never_deleted(tmp_path, capsys):
    checkpoint(tmp_path / "src", "qwen2", tied=True)
    path = write_gguf(tmp_path / "src", tmp_path / "model.gguf", "qwen2", quantized=True)
    assert cli_main(["convert", str(path), "--out", str(tmp_path / "bundle"), "--context", str(CONTEXT)]) == 0
    inside = path.rename(tmp_path / "bundle" / "model.gguf")
    err = _refused(["convert", str(inside), "--out", str(tmp_path / "bundle"), "--force"], capsys)
    assert "holds the checkpoint" in err and inside.is_file()


def test_a_file_that_declares_more_than_it_holds_is_refused_at_once(tmp_path, capsys):
    """An array whose length field is corrupt (2**40 entries) is refused, not read entry by entry into memory."""
    checkpoint(tmp_path / "src", "qwen2", tied=True)
    path = write_gguf(tmp_path / "src", tmp_path / "model.gguf", "qwen2", quantized=False)
    data = bytearray(path.read_bytes())
    key = b"tokenizer.ggml.token_type"
    at = data.index(key) + len(key) + 8  # after the key: the value's type and the items' type, 4 bytes each
    data[at:at + 8] = (2**40).to_bytes(8, "little")
    path.write_bytes(bytes(data))
    err = _refused(["convert", str(path), "--out", str(tmp_path / "out"), "--context", str(CONTEXT)], capsys)
    assert "not a GGUF file gguf can read" in err
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".gguf-")]


def test_one_part_of_a_split_file_is_refused_by_name(tmp_path, capsys):
    checkpoint(tmp_path / "src", "qwen2", tied=True)
    path = write_gguf(tmp_path / "src", tmp_path / "model.gguf", "qwen2", quantized=False)
    part = rewritten(path, tmp_path / "model-00001-of-00003.gguf", numbers={"split.count": 3})
    err = _refused(["convert", str(part), "--out", str(tmp_path / "out"), "--context", str(CONTEXT)], capsys)
    assert "one part of a GGUF split into 3" in err and "--merge" in err


def test_starcoder2_files_keep_the_window_their_attention_slides_over(tmp_path, capsys):
    """GGUF files of StarCoder2 rarely record its sliding window: it is taken as the released models' 4,096, so
    a longer context is refused as it is from a checkpoint folder; a recorded window counts."""
    from completer.gguf_source import unpack

    checkpoint(tmp_path / "src", "starcoder2", tied=True)
    path = write_gguf(tmp_path / "src", tmp_path / "sc2.gguf", "starcoder2", quantized=False)
    unpack(path, tmp_path / "unpacked")
    assert json.loads((tmp_path / "unpacked" / "config.json").read_text())["sliding_window"] == 4096
    narrow = rewritten(path, tmp_path / "narrow.gguf", architecture="starcoder2",
                        numbers={"starcoder2.attention.sliding_window": 64})
    err = _refused(["convert", str(narrow), "--out", str(tmp_path / "out"), "--context", str(CONTEXT)], capsys)
    assert "sliding-window attention (64 tokens)" in err


def test_a_starcoder_file_with_several_key_value_heads_is_refused(tmp_path, capsys):
    """llama.cpp reads a starcoder file's fused rows as [q | k | v] and its converter writes every StarCoder with one
    key/value head; gpt_bigcode's several heads are interleaved by head, so such a file is not guessed at."""
    checkpoint(tmp_path / "src", "gpt_bigcode", tied=True)
    path = write_gguf(tmp_path / "src", tmp_path / "model.gguf", "gpt_bigcode", quantized=False)
    several = rewritten(path, tmp_path / "mha.gguf", architecture="starcoder",
                        **{"starcoder.attention.head_count_kv": 4})
    says = _refused(["convert", str(several), "--out", str(tmp_path / "out")], capsys)
    assert "a starcoder file with 4 key/value heads" in says and not (tmp_path / "out").exists()
