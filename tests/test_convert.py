"""`completer convert`: tiny random checkpoints of each family, built here with transformers (no downloads),
converted and checked against transformers' own logits; a vocabulary that merges newlines; FIM; bad input."""
from __future__ import annotations

import contextlib
import json
import os
import shlex
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")  # the test extra installs it; CI fails on a skip (scripts/test.sh)

from hf_models import (STARCODER2_SPECIALS, STARCODER_SPECIALS, build_model, build_tokenizer, checkpoint,  # noqa: E402
                       json_edit, logits)
from lsp_support import SERVER_CMD, server_env  # noqa: E402

from completer.cli import main as cli_main  # noqa: E402
from completer.engine import Engine  # noqa: E402
from completer.graph import decoder_model  # noqa: E402
from completer.graph.huggingface import (Unsupported, architecture, canonical_weights, load_weights,  # noqa: E402
                                         read_config)
from completer.repository import RepositoryContext  # noqa: E402
from completer.runtime import KV_INPUTS, Runtime, with_group_axis, without_group_axis  # noqa: E402
from completer.types import EngineSettings  # noqa: E402
from lsp.rawclient import RawClient  # noqa: E402

FAMILIES = [("gpt2", True), ("llama", False), ("llama_bias", True), ("qwen2", True), ("qwen2", False),
            ("qwen3", True), ("gpt_bigcode", True), ("gpt_bigcode_mha", False), ("starcoder2", True),
            ("starcoder2_no_bias", False)]
CONTEXT = 128


def _feed(arch, ids: np.ndarray, position: int, prefix, past, slots: int = 1) -> dict:
    """The graph's inputs for one search: its rows in the first slot (the others empty), every row at the same
    positions."""
    rows, new = ids.shape
    feed = {"input_ids": ids, "position_ids": np.broadcast_to(np.arange(position, position + new), (rows, new)).copy(),
            "past_mask": np.zeros((rows, past[0][0].shape[2]), np.float32)}
    if slots > 1:
        feed["slot_rows"] = np.array([rows] + [0] * (slots - 1), np.int64)
    empty = (np.zeros((1, arch.n_kv_head, arch.head_dim, 0), np.float32),
             np.zeros((1, arch.n_kv_head, 0, arch.head_dim), np.float32))
    for layer in range(arch.n_layer):
        feed[f"prefix_key_{layer}_0"], feed[f"prefix_value_{layer}_0"] = prefix[layer]
        for slot in range(1, slots):
            feed[f"prefix_key_{layer}_{slot}"], feed[f"prefix_value_{layer}_{slot}"] = empty
        feed[f"past_key_{layer}"], feed[f"past_value_{layer}"] = past[layer]
    return with_group_axis(feed) if slots == 1 else feed  # the graph of one slot: KV with an axis of 1


@pytest.mark.parametrize("slots", [1, 3])
@pytest.mark.parametrize("family,tied", FAMILIES)
def test_graph_logits_equal_transformers_on_a_prefix_then_beams_with_their_own_suffixes(tmp_path, family, tied,
                                                                                       slots):
    """The graph of one slot, which a search alone runs, and of several, here with the search in the first."""
    import onnxruntime as ort

    model = checkpoint(tmp_path, family, tied=tied)
    config = read_config(tmp_path)
    arch = architecture(config, CONTEXT)
    weights = canonical_weights(load_weights(tmp_path), arch, config)
    assert ("lm_head" in weights) == (not tied)
    graph = decoder_model(arch, weights, CONTEXT, slots=slots, logits_only=True)
    session = ort.InferenceSession(graph.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    kv, dim, layers = arch.n_kv_head, arch.head_dim, range(arch.n_layer)
    rng = np.random.default_rng(1)
    prompt = rng.integers(0, arch.vocab_size, 20)
    empty = lambda b: [(np.zeros((b, kv, 0, dim), np.float32),) * 2 for _ in layers]  # noqa: E731
    out = dict(zip(names, session.run(None, _feed(arch, prompt[None, :], 0, [
        (np.zeros((1, kv, dim, 0), np.float32), np.zeros((1, kv, 0, dim), np.float32)) for _ in layers], empty(1),
        slots))))
    expected = logits(model, prompt.tolist())
    scale = np.abs(expected).max()
    np.testing.assert_allclose(out["logits"][0], expected[-1], atol=1e-4 * max(1.0, scale))
    if slots == 1:
        out = without_group_axis(out)
    prefix = [(out[f"present_key_{i}"].transpose(0, 1, 3, 2), out[f"present_value_{i}"]) for i in layers]
    suffixes = rng.integers(0, arch.vocab_size, (3, 4))  # 3 beams, each 4 tokens of its own after the prefix
    past = empty(3)
    for step in range(suffixes.shape[1]):  # each beam's tokens sit at P, P+1, ... after the shared prefix
        out = dict(zip(names, session.run(None, _feed(arch, suffixes[:, step:step + 1], len(prompt) + step, prefix,
                                                      past, slots))))
        for beam in range(3):
            whole = prompt.tolist() + suffixes[beam, :step + 1].tolist()
            np.testing.assert_allclose(out["logits"][beam], logits(model, whole)[-1], atol=1e-4 * max(1.0, scale))
        if slots == 1:
            out = without_group_axis(out)
        past = [(out[f"present_key_{i}"], out[f"present_value_{i}"]) for i in layers]


def test_a_qwen3_config_json_without_head_dim_has_transformers_heads_of_128(tmp_path):
    """transformers' Qwen3Config reads a config.json that names no head_dim as heads 128 wide (its default), not
    hidden_size / num_attention_heads as LLaMA's does: the graph reads it so too."""
    from transformers import AutoModelForCausalLM

    checkpoint(tmp_path, "qwen3", tied=True, head_dim=128)  # 4 heads of 128 in a model 64 wide
    config = json.loads((tmp_path / "config.json").read_text())
    del config["head_dim"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    model = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert model.config.head_dim == 128
    _prompt_logits_equal_transformers(tmp_path, model, 12)


def _prompt_logits_equal_transformers(folder: Path, model, length: int) -> None:
    """The graph built from `folder`'s checkpoint gives transformers' `model`'s last logits on a random prompt of
    `length` tokens, run from an empty cache."""
    import onnxruntime as ort

    config = read_config(folder)
    arch = architecture(config, CONTEXT)
    graph = decoder_model(arch, canonical_weights(load_weights(folder), arch, config), CONTEXT, logits_only=True)
    session = ort.InferenceSession(graph.SerializeToString(), providers=["CPUExecutionProvider"])
    prompt = np.random.default_rng(1).integers(0, arch.vocab_size, length)
    empty = [(np.zeros((1, arch.n_kv_head, arch.head_dim, 0), np.float32),
              np.zeros((1, arch.n_kv_head, 0, arch.head_dim), np.float32)) for _ in range(arch.n_layer)]
    past = [(np.zeros((1, arch.n_kv_head, 0, arch.head_dim), np.float32),) * 2 for _ in range(arch.n_layer)]
    out = dict(zip([o.name for o in session.get_outputs()], session.run(None, _feed(arch, prompt[None, :], 0, empty,
                                                                                      past))))
    expected = logits(model, prompt.tolist())
    np.testing.assert_allclose(out["logits"][0], expected[-1], atol=1e-4 * max(1.0, np.abs(expected).max()))


@pytest.mark.parametrize("window", [
    {"max_window_layers": 2},  # the window from layer 2 on, of 2: no layer slides
    {"layer_types": ["full_attention", "full_attention"], "max_window_layers": 0},  # the list rules
])
def test_a_qwen2_window_that_no_layer_uses_converts_and_equals_transformers(tmp_path, capsys, window):
    """Qwen2's window is used only by the layers from max_window_layers on, or those layer_types calls sliding:
    a config that turns it on for none is full attention, as the graph is, and converts."""
    from transformers import AutoModelForCausalLM

    checkpoint(tmp_path / "src", "qwen2", tied=True)
    config = json.loads((tmp_path / "src" / "config.json").read_text())
    config.pop("layer_types", None)
    (tmp_path / "src" / "config.json").write_text(json.dumps({**config, "use_sliding_window": True,
                                                              "sliding_window": 8, **window}))
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "src").eval()
    _prompt_logits_equal_transformers(tmp_path / "src", model, 20)  # longer than the window
    capsys.readouterr()
    assert cli_main(["convert", str(tmp_path / "src"), "--out", str(tmp_path / "out"), "--context", "128"]) == 0


@pytest.mark.parametrize("window", [{"max_window_layers": 1}, {"layer_types": ["full_attention", "sliding_attention"]}])
def test_a_qwen2_window_some_layer_uses_is_refused(tmp_path, capsys, window):
    checkpoint(tmp_path / "src", "qwen2", tied=True)
    config = json.loads((tmp_path / "src" / "config.json").read_text())
    config.pop("layer_types", None)
    (tmp_path / "src" / "config.json").write_text(json.dumps({**config, "use_sliding_window": True,
                                                              "sliding_window": 64, **window}))
    capsys.readouterr()
    err = _refused(["convert", str(tmp_path / "src"), "--out", str(tmp_path / "out"), "--context", "128"], capsys)
    assert "sliding-window attention (64 tokens)" in err


@pytest.mark.parametrize("family,window", [
    ("mistral", {"layer_types": ["full_attention", "full_attention"]}),  # transformers warns, and slides all
    ("mistral", {"max_window_layers": 2}),
    ("starcoder2", {"max_window_layers": 2}),
    ("starcoder2", {"layer_types": ["full_attention", "full_attention"]}),
])
def test_a_window_only_qwen_configs_turn_off_by_layer_is_refused_in_other_families(family, window):
    """transformers reads layer_types and max_window_layers for Qwen2 and Qwen3 only: Mistral and StarCoder2 slide
    every layer whenever sliding_window is set, so a config naming them elsewhere is no full attention."""
    config = {"model_type": family, "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
              "intermediate_size": 128, "vocab_size": 100, "sliding_window": 64, **window}
    with pytest.raises(Unsupported, match="sliding-window attention"):
        architecture(config, CONTEXT)


@pytest.mark.parametrize("window", [{}, {"max_window_layers": 28.0}])
def test_a_qwen2_config_without_an_integer_max_window_layers_slides_from_transformers_default(window):
    """Qwen2Config's max_window_layers is 28 where the config names none (and a float compares as well): a model
    of fewer layers slides in none of them."""
    config = {"model_type": "qwen2", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
              "intermediate_size": 128, "vocab_size": 100, "sliding_window": 64, "use_sliding_window": True, **window}
    assert architecture(config, CONTEXT).n_layer == 2
    with pytest.raises(Unsupported, match="sliding-window attention"):
        architecture({**config, "num_hidden_layers": 29}, CONTEXT)


def test_own_model_graph_equals_its_pytorch_forward_on_the_shipped_weights():
    import onnxruntime as ort
    import torch
    from safetensors.numpy import load_file

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
    from model import GPT, GPTConfig

    from completer.graph import own_architecture, own_decoder

    training = Path(__file__).resolve().parent.parent / "models" / "python-small" / "training"
    config = json.loads((training / "config.json").read_text())
    weights = load_file(str(training / "model.safetensors"))
    fields = {k: config[k] for k in ("vocab_size", "context_length", "n_layer", "n_head", "n_embd", "mlp_width")
              if k in config}
    net = GPT(GPTConfig(**fields)).eval()
    net.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
    arch = own_architecture(config)
    session = ort.InferenceSession(own_decoder(weights, config, logits_only=True).SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    ids = np.random.default_rng(0).integers(0, arch.vocab_size, 64)
    layers = range(arch.n_layer)
    feed = _feed(arch, ids[None, :], 0, [(np.zeros((1, arch.n_kv_head, arch.head_dim, 0), np.float32),
                                          np.zeros((1, arch.n_kv_head, 0, arch.head_dim), np.float32)) for _ in layers],
                 [(np.zeros((1, arch.n_kv_head, 0, arch.head_dim), np.float32),) * 2 for _ in layers])
    graph = session.run(["logits"], feed)[0][0]
    with torch.no_grad():
        expected = net(torch.from_numpy(ids)[None])[0, -1].numpy()
    np.testing.assert_allclose(graph, expected, atol=1e-4 * max(1.0, np.abs(expected).max()))


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> tuple[Path, Path, object]:
    """A tiny Qwen2-shaped FIM checkpoint and its INT8 bundle."""
    root = tmp_path_factory.mktemp("qwen2")
    model = checkpoint(root / "src", "qwen2", tied=False)
    assert cli_main(["convert", str(root / "src"), "--out", str(root / "bundle"), "--context", str(CONTEXT)]) == 0
    return root / "src", root / "bundle", model


@pytest.fixture(scope="module")
def converted_starcoder2(tmp_path_factory) -> tuple[Path, Path, object]:
    """A tiny StarCoder2-shaped checkpoint with StarCoder2's FIM and repository markers, and its INT8 bundle with a
    512-token window: room for the workspace's files before a FIM prompt."""
    root = tmp_path_factory.mktemp("starcoder2")
    model = checkpoint(root / "src", "starcoder2", tied=True, specials=STARCODER2_SPECIALS)
    assert cli_main(["convert", str(root / "src"), "--out", str(root / "bundle"), "--context", "512"]) == 0
    return root / "src", root / "bundle", model


@pytest.fixture(scope="module")
def converted_bigcode(tmp_path_factory) -> tuple[Path, Path, object]:
    """A tiny StarCoder-shaped (gpt_bigcode, one key/value head) checkpoint with StarCoder's FIM markers, and its
    INT8 bundle."""
    root = tmp_path_factory.mktemp("gpt_bigcode")
    model = checkpoint(root / "src", "gpt_bigcode", tied=True, specials=STARCODER_SPECIALS)
    assert cli_main(["convert", str(root / "src"), "--out", str(root / "bundle"), "--context", str(CONTEXT)]) == 0
    return root / "src", root / "bundle", model


@pytest.fixture(scope="module")
def converted_qwen3(tmp_path_factory) -> tuple[Path, Path, object]:
    """A tiny Qwen3-shaped checkpoint (each query and key head normalized) and its INT8 bundle. Its heads are 48
    wide, so the norms' weights of every head together (6 x 48 floats) are a matrix the size the builder writes
    apart from the graph: onnxruntime's shape inference, which the residual norms' fusion needs, reads them."""
    root = tmp_path_factory.mktemp("qwen3")
    model = checkpoint(root / "src", "qwen3", tied=True, head_dim=48)
    assert cli_main(["convert", str(root / "src"), "--out", str(root / "bundle"), "--context", str(CONTEXT)]) == 0
    manifest = json.loads((root / "bundle" / "manifest.json").read_text())
    layers, fusions = manifest["architecture"]["n_layer"], manifest["graph_fusions"]
    assert fusions["SimplifiedLayerNormalization"] >= layers  # each layer's query and key norm, with weights of one
    assert fusions["SkipSimplifiedLayerNormalization"] >= layers  # the residual Adds with the norms after them
    return root / "src", root / "bundle", model


@pytest.mark.parametrize("which", ["converted", "converted_starcoder2", "converted_bigcode", "converted_qwen3"])
def test_the_int8_bundle_agrees_with_transformers_on_most_next_tokens(which, request):
    from completer.bundle import load_bundle

    src, bundle_dir, model = request.getfixturevalue(which)
    runtime = Runtime(load_bundle(bundle_dir), device="cpu")
    text = (Path(__file__).resolve().parent / "hf_models.py").read_text()[:1500]
    from tokenizers import Tokenizer

    ids = Tokenizer.from_file(str(src / "tokenizer.json")).encode(text).ids[:60]
    expected = logits(model, ids).argmax(axis=1)
    prefix, past, agree = runtime.empty_prefix(), runtime.empty_past(1), 0
    for position, token in enumerate(ids):  # one beam, stepping along the text: next_tokens[0] is the argmax
        out = runtime.run(np.asarray([[token]]), position, prefix, past, num_beams=1)
        agree += int(out.tokens[0] == expected[position])
        past = out.carried(np.zeros(1, np.int64))
    assert agree >= 0.8 * len(ids), f"INT8 top-1 agreed on {agree} of {len(ids)} positions"


def test_a_graph_of_one_slot_takes_one_softmax_per_layer_and_one_that_still_takes_slot_rows_runs_the_same(
        converted, tmp_path):
    """A bundle converted before the graph of one slot dropped `slot_rows` (an input of one entry it no longer
    needs) must keep working: the runtime feeds the input to the graphs that take it."""
    import onnx
    from onnx import TensorProto, helper

    _, bundle_dir, _ = converted
    graph = onnx.load(str(bundle_dir / "model.onnx"))
    layers = json.loads((bundle_dir / "manifest.json").read_text())["architecture"]["n_layer"]
    assert [n.op_type for n in graph.graph.node].count("Softmax") == layers
    assert "slot_rows" not in {i.name for i in graph.graph.input}
    graph.graph.input.insert(2, helper.make_tensor_value_info("slot_rows", TensorProto.INT64, [1]))
    older = _older_bundle(bundle_dir, tmp_path / "older", graph)
    new_steps, older_steps = _two_beam_steps(bundle_dir), _two_beam_steps(older)
    np.testing.assert_array_equal(new_steps[0], older_steps[0])
    np.testing.assert_allclose(new_steps[1], older_steps[1], rtol=1e-6)


def _older_bundle(bundle_dir: Path, older: Path, graph, format_version: int | None = None) -> Path:
    """A copy of the bundle with `graph` as its model.onnx, as an older converter would have written it."""
    import shutil

    import onnx

    from completer.bundle import sha256_file

    shutil.copytree(bundle_dir, older)
    onnx.save(graph, str(older / "model.onnx"))
    manifest = json.loads((older / "manifest.json").read_text())
    if format_version is not None:
        manifest["format_version"] = format_version
    manifest["files"]["model.onnx"] = {"sha256": sha256_file(older / "model.onnx"),
                                       "bytes": (older / "model.onnx").stat().st_size}
    (older / "manifest.json").write_text(json.dumps(manifest))
    return older


def _two_beam_steps(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    """A prefill, then two steps of two beams over it through the runtime: the last step's tokens and scores."""
    from completer.bundle import load_bundle

    runtime = Runtime(load_bundle(folder), device="cpu")
    prefix = runtime.run(np.arange(5)[None, :], 0, runtime.empty_prefix(), runtime.empty_past(1), num_beams=1)
    assert prefix.present[0][0].shape == (1, runtime.n_kv_head, 5, runtime.head_dim)  # as the engine keeps it
    shared = [(k.transpose(0, 1, 3, 2), v) for k, v in prefix.present]
    beams = runtime.run(np.asarray([[7], [9]]), 5, shared, runtime.empty_past(2), scores=np.zeros(2, np.float32),
                        num_beams=2)
    step = runtime.run(beams.tokens[:, None], 6, shared, beams.carried(np.arange(2)), scores=beams.scores,
                       num_beams=2)
    return step.tokens, step.scores


def test_a_graph_of_one_slot_whose_kv_lacks_the_axis_of_one_runs_the_same(converted, tmp_path):
    """A bundle of format 4 or earlier keeps its KV as [B, KV, T, D]; since format 5 the graph of one slot takes
    [B, KV, 1, T, D]. The runtime adds the axis only for graphs that take it. The older layout is made here from
    the new graph: each KV input gains an Unsqueeze, each KV output a Squeeze."""
    import onnx
    from onnx import helper

    _, bundle_dir, _ = converted
    graph = onnx.load(str(bundle_dir / "model.onnx"))
    axis = helper.make_tensor("group_axis", onnx.TensorProto.INT64, [1], [2])
    graph.graph.initializer.append(axis)
    del graph.graph.value_info[:]  # the shapes recorded inside are of the new layout
    renamed = 0
    for value in graph.graph.input:
        if value.name.startswith(KV_INPUTS):
            dims = value.type.tensor_type.shape.dim
            assert len(dims) == 5 and dims[2].dim_value == 1
            del dims[2]
            inner = value.name + "_grouped"
            for node in graph.graph.node:
                node.input[:] = [inner if name == value.name else name for name in node.input]
            graph.graph.node.insert(0, helper.make_node("Unsqueeze", [value.name, "group_axis"], [inner]))
            renamed += 1
    for value in graph.graph.output:
        if value.name.startswith("present_"):
            del value.type.tensor_type.shape.dim[2]
            inner = value.name + "_grouped"
            for node in graph.graph.node:
                node.input[:] = [inner if name == value.name else name for name in node.input]
                node.output[:] = [inner if name == value.name else name for name in node.output]
            graph.graph.node.append(helper.make_node("Squeeze", [inner, "group_axis"], [value.name]))
    layers = json.loads((bundle_dir / "manifest.json").read_text())["architecture"]["n_layer"]
    assert renamed == 4 * layers
    older = _older_bundle(bundle_dir, tmp_path / "older", graph, format_version=4)
    new_steps, older_steps = _two_beam_steps(bundle_dir), _two_beam_steps(older)
    np.testing.assert_array_equal(new_steps[0], older_steps[0])
    np.testing.assert_allclose(new_steps[1], older_steps[1], rtol=1e-6)


def test_the_manifest_records_the_source_the_template_and_the_padding(converted):
    src, bundle_dir, _ = converted
    manifest = json.loads((bundle_dir / "manifest.json").read_text())
    assert manifest["format_version"] == 5 and manifest["architecture"]["n_kv_head"] == 1
    assert manifest["kv_layout"]["past"] == "[B, KV, 1, T, D]"  # the graph of one slot's axis of 1
    assert manifest["vocab_size"] == manifest["tokenizer_vocab_size"] + 8
    assert manifest["fim"]["order"] == "psm" and manifest["fim"]["template"] == "qwen"
    assert manifest["source"]["license"] == "apache-2.0"
    assert manifest["graph_fusions"]["SkipSimplifiedLayerNormalization"] >= manifest["architecture"]["n_layer"]
    assert "completer convert" in (bundle_dir / "MODEL.md").read_text()
    assert not [p for p in bundle_dir.parent.iterdir() if "converting" in p.name]


def test_starcoder_bundles_record_their_template_starcoder2_by_its_repository_markers(converted_starcoder2,
                                                                                     converted_bigcode):
    for (_, bundle_dir, _), family, template, kv_heads in ((converted_starcoder2, "starcoder2", "starcoder2", 2),
                                                          (converted_bigcode, "gpt2", "starcoder", 1)):
        manifest = json.loads((bundle_dir / "manifest.json").read_text())
        assert manifest["architecture"]["family"] == family and manifest["architecture"]["n_kv_head"] == kv_heads
        assert manifest["fim"]["template"] == template and manifest["fim"]["tokens"]["prefix"] == "<fim_prefix>"
        assert manifest["graph_fusions"]["SkipLayerNormalization"] >= manifest["architecture"]["n_layer"]
    engine = Engine(EngineSettings(model_path=str(converted_bigcode[1]), fill_in_the_middle=True, device="cpu"))
    assert engine.prompts.repository_markers is None  # StarCoder's tokenizer has no repository format
    assert engine.bundle.learned_positions  # gpt_bigcode's table of positions, as GPT-2's


PRICES = "def total(items):\n    return sum(item.price for item in items)\n\n\nTAX = 0.2\n"
SHOP = RepositoryContext("shop", "shop/cart.py", (("shop/prices.py", PRICES),))
SHOP_URI, SHOP_BELOW = "file:///shop/cart.py", "    return amount\n"
SHOP_BEFORE = "from shop.prices import total\n\n\ndef checkout(cart):\n    amount = tot"


def _completed_in_a_shop(bundle: Path) -> tuple[Engine, list[int]]:
    """An engine on `bundle` (whose template reads a repository) after a completion in shop/cart.py with
    shop/prices.py as the workspace's snippet, and the ids its prompt held."""
    engine = Engine(EngineSettings(model_path=str(bundle), fill_in_the_middle=True, device="cpu"))
    assert engine.prompts.repository_markers is not None
    engine.complete_text(SHOP_URI, SHOP_BEFORE, "", below=SHOP_BELOW, snippets=[PRICES], repository=SHOP)
    return engine, list(engine.cache.get(SHOP_URI).ids)


def test_a_starcoder2_bundle_reads_the_workspace_as_files_with_its_path_inside_the_fim_prefix(converted_starcoder2):
    """StarCoder2 was trained on repositories laid out as `<repo_name>name<file_sep>path\ncode...`, the file it
    fills in as `<file_sep><fim_prefix>path\ncode before<fim_suffix>...`: no newline after the folder's name,
    and the document's own path after the prefix marker (completer/repository.py)."""
    _, bundle_dir, _ = converted_starcoder2
    engine, ids = _completed_in_a_shop(bundle_dir)
    name_id, sep_id = engine.prompts.repository_markers
    pre, suf, mid = engine.bundle.fim_ids
    prices, repository, uri, below, before = PRICES, SHOP, SHOP_URI, SHOP_BELOW, SHOP_BEFORE
    files, rest = ids[:ids.index(pre)], ids[ids.index(pre) + 1:]
    decoded = [engine.tokens.decode_bytes(piece) for piece in _split_at(files, (name_id, sep_id))]
    assert decoded == [b"", b"shop", b"shop/prices.py\n" + prices.encode(), b""]
    fim_prefix = engine.tokens.decode_bytes(rest[:rest.index(suf)])
    assert fim_prefix.startswith(b"shop/cart.py\nfrom shop.prices import total\n")
    assert rest.count(mid) == 1 and engine.tokens.decode_bytes(rest[rest.index(mid) + 1:]).startswith(b"    amount")
    engine.typing_through = False
    typed = engine.complete_text(uri, before + "a", "", below=below, snippets=[prices], repository=repository)
    assert typed.cached_tokens >= len(ids) - 2 and typed.new_tokens <= 3, typed
    # no workspace: the FIM prompt alone, the path left out with the files
    engine.complete_text("file:///shop/alone.py", before, "", below=below)
    alone = list(engine.cache.get("file:///shop/alone.py").ids)
    assert alone[0] == pre and engine.tokens.decode_bytes(alone[1:alone.index(suf)]).startswith(b"from shop")


def _prompt(engine: Engine, uri: str) -> list[int]:
    state = engine.cache.get(uri)
    return list(state.ids)


def test_fim_prompt_is_prefix_suffix_middle_and_typing_within_a_line_only_extends_it(converted):
    _, bundle_dir, _ = converted
    engine = Engine(EngineSettings(model_path=str(bundle_dir), fill_in_the_middle=True, device="cpu"))
    tokens = engine.tokens
    pre, suf, mid = engine.bundle.fim_ids
    text = "import os\n\n\ndef main(argv):\n    for name in argv:\n        pri\n    return 0\n"
    engine.open("file:///a.py", text)
    first = engine.complete("file:///a.py", 5, len("        pri"))
    ids = _prompt(engine, "file:///a.py")
    assert ids[0] == pre and ids.count(suf) == 1 and ids.count(mid) == 1
    head = tokens.decode_bytes(ids[1:ids.index(suf)])
    below = tokens.decode_bytes(ids[ids.index(suf) + 1:ids.index(mid)])
    assert head == b"import os\n\n\ndef main(argv):\n    for name in argv:\n" and below.startswith(b"    return 0\n")
    assert b"        pri".startswith(tokens.decode_bytes(ids[ids.index(mid) + 1:]))  # the typed part, less the healed
    engine.update("file:///a.py", text.replace("        pri\n", "        prin\n"))
    engine.typing_through = False
    second = engine.complete("file:///a.py", 5, len("        prin"))
    assert second.cached_tokens >= len(ids) - 2 and second.new_tokens <= 3, (first, second)


def _crafted_gpt2(folder: Path, target: bytes) -> Path:
    """A GPT-2 checkpoint whose next token is always `target` (the final norm outputs one fixed vector, and only
    `target`'s head row reads it), with the merging tokenizer: a known answer for the line-end rules."""
    import torch
    from tokenizers import Tokenizer
    from transformers import GPT2Config, GPT2LMHeadModel

    from completer.tokens import Tokens

    build_tokenizer(folder)
    size = Tokenizer.from_file(str(folder / "tokenizer.json")).get_vocab_size()
    tokens = Tokens(folder / "tokenizer.json", vocab_size=size)
    token = tokens.token_bytes.index(target)
    model = GPT2LMHeadModel(GPT2Config(n_embd=32, n_layer=1, n_head=2, vocab_size=size, n_positions=256,
                                       tie_word_embeddings=False, bos_token_id=0, eos_token_id=0))
    with torch.no_grad():
        model.transformer.ln_f.weight.zero_()
        model.transformer.ln_f.bias.zero_()
        model.transformer.ln_f.bias[0] = 1.0
        model.lm_head.weight.zero_()
        model.lm_head.weight[token, 0] = 20.0
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def always_colon_newline(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("crafted")
    src = _crafted_gpt2(root / "src", b"):\n")
    assert cli_main(["convert", str(src), "--out", str(root / "bundle"), "--fp32"]) == 0
    return root / "bundle"


def test_a_line_ends_inside_a_token_that_merges_the_newline(always_colon_newline):
    engine = Engine(EngineSettings(model_path=str(always_colon_newline), device="cpu"))
    assert not engine.tokens.isolates_newlines
    engine.open("file:///b.py", "import os\n\n\ndef main(argv\n")
    result = engine.complete("file:///b.py", 3, len("def main(argv"))
    assert result.suggestions, result  # (the healed `argv` may be re-spelled by any token that starts with it)
    for suggestion in result.suggestions:  # each line ended inside `):\n`, keeping the text before its newline
        assert suggestion.line.startswith("def main(argv") and suggestion.text.endswith("):"), result
        assert suggestion.text.count(")") == 1 and "\n" not in suggestion.text


def test_healing_reaches_into_a_token_that_merges_the_newline(always_colon_newline):
    """The typed `)` is the start of `):\\n`: healing backs it off, and the model's token re-spells it and ends the line."""
    engine = Engine(EngineSettings(model_path=str(always_colon_newline), device="cpu"))
    engine.open("file:///c.py", "import os\n\n\ndef main(argv)\n")
    result = engine.complete("file:///c.py", 3, len("def main(argv)"))
    assert result.suggestions and result.suggestions[0].line == "def main(argv):", result
    assert result.suggestions[0].text == ":"


def test_a_converted_fim_model_answers_through_the_real_server(always_colon_newline):
    with RawClient(SERVER_CMD, env=server_env(COMPLETER_MODEL=str(always_colon_newline))) as client:
        client.initialize({"fillInTheMiddle": True})
        deadline = time.monotonic() + 60
        while not client.request("completer/info")["result"].get("model"):
            assert time.monotonic() < deadline, "the worker never loaded the converted bundle"
            time.sleep(0.1)
        uri = "file:///work/d.py"
        client.open(uri, "import os\n\n\ndef main(argv\n    return 0\n")
        items = client.completion(uri, 3, len("def main(argv"))["result"]
        items = items["items"] if isinstance(items, dict) else items
        assert any(item["textEdit"]["newText"] == "def main(argv):" or item.get("label") == "def main(argv):"
                   for item in items), items
        assert client.request("completer/info")["result"]["model"] == always_colon_newline.name


def _refused(argv: list[str], capsys) -> str:
    assert cli_main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err, err
    return err


@pytest.fixture
def source(tmp_path) -> Path:
    checkpoint(tmp_path / "src", "llama", tied=False)
    return tmp_path / "src"


@pytest.mark.parametrize("breakage,expected", [
    ("model_type", "model_type 'bert' is not supported"),
    ("no_config", "no config.json"),
    ("no_tokenizer", "no tokenizer.json"),
    ("bin_only", "pickle"),
    ("shape", "has shape"),
    ("corrupt", "truncated or corrupt"),
    ("extra_tensor", "does not use"),
    ("rope_yarn", "rope scaling 'yarn' is not supported"),
    ("sliding_window", "sliding-window attention"),
    ("wordpiece", "only byte-level BPE"),
    ("integer_weights", "not floating point"),
    ("missing_key", "config.json has no 'intermediate_size'"),
    ("rope_no_factor", "rope scaling 'linear' needs factor"),
    ("unreadable_tokenizer", "the tokenizers library cannot read it"),
    ("header_past_end", "runs past the end of the file"),
    ("shared_bytes", "share bytes (corrupt header)"),
    ("fifo_weights", "model.safetensors: not a regular file"),  # opening it would wait for a writer forever
    ("stale_shard", "is in both model.safetensors and zz-old.safetensors"),
    ("infinite_size", "config.json has a value a llama model cannot have (cannot convert float infinity"),
    ("nan_epsilon", "the norms' epsilon must be a finite number, not negative: nan"),
    ("zero_rope_factor", "rope scaling's factor must be a finite number above 0, not 0"),
    ("huge_vocabulary", "the config implies [1000000000000, 64]"),  # checked before a row per id is made
    ("id_past_vocabulary", "has id 100,000, past the model's"),
    ("nested_config", "config.json: not readable JSON (maximum recursion depth"),  # Python's parser recurses
    ("nested_header", "unreadable safetensors header (maximum recursion depth"),
    ("nan_weights", "tensor 'model.layers.1.mlp.up_proj.weight' holds NaN or infinite values (a corrupt file?)"),
])
def test_bad_input_is_one_line_and_leaves_nothing_in_out(source, tmp_path, capsys, breakage, expected):
    from safetensors.numpy import load_file, save_file

    weights = source / "model.safetensors"
    _break_weights(source, breakage)
    _break_config_or_tokenizer(source, breakage)
    if breakage == "model_type":
        json_edit(source / "config.json", model_type="bert")
    elif breakage == "no_config":
        (source / "config.json").unlink()
    elif breakage == "no_tokenizer":
        (source / "tokenizer.json").unlink()
    elif breakage == "bin_only":
        weights.rename(source / "pytorch_model.bin")
    elif breakage == "shape":
        json_edit(source / "config.json", intermediate_size=80)
    elif breakage == "corrupt":
        weights.write_bytes(weights.read_bytes()[:-1000])
    elif breakage == "extra_tensor":
        tensors = load_file(str(weights))
        tensors["model.layers.0.mystery.weight"] = np.zeros(4, np.float32)
        save_file(tensors, str(weights))
    elif breakage == "rope_yarn":
        json_edit(source / "config.json", rope_parameters={"rope_theta": 10000.0, "rope_type": "yarn", "factor": 4.0})
    elif breakage == "sliding_window":
        json_edit(source / "config.json", model_type="mistral", sliding_window=64)
    elif breakage == "integer_weights":
        tensors = load_file(str(weights))
        tensors["lm_head.weight"] = tensors["lm_head.weight"].astype(np.int32)
        save_file(tensors, str(weights))
    elif breakage == "missing_key":
        config = json.loads((source / "config.json").read_text())
        del config["intermediate_size"]
        (source / "config.json").write_text(json.dumps(config))
    elif breakage == "rope_no_factor":
        json_edit(source / "config.json", rope_parameters={"rope_theta": 10000.0, "rope_type": "linear"})
    elif breakage == "unreadable_tokenizer":
        spec = json.loads((source / "tokenizer.json").read_text())
        spec["model"]["merges"] = [[1, 2, 3]]
        (source / "tokenizer.json").write_text(json.dumps(spec))
    elif breakage == "wordpiece":
        spec = json.loads((source / "tokenizer.json").read_text())
        spec["model"]["type"] = "WordPiece"
        (source / "tokenizer.json").write_text(json.dumps(spec))
    err = _refused(["convert", str(source), "--out", str(tmp_path / "out"), "--context", "128"], capsys)
    assert expected in err
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if "converting" in p.name]


def _break_weights(source: Path, breakage: str) -> None:
    """The safetensors file damaged as `breakage` names, where it names a damage of the weights."""
    from safetensors.numpy import load_file, save_file

    weights = source / "model.safetensors"
    if breakage == "header_past_end":
        weights.write_bytes(struct.pack("<Q", weights.stat().st_size) + weights.read_bytes()[8:])
    elif breakage == "shared_bytes":  # the output head described as the embeddings' bytes
        data = weights.read_bytes()
        size = struct.unpack("<Q", data[:8])[0]
        header = json.loads(data[8:8 + size])
        header["lm_head.weight"]["data_offsets"] = header["model.embed_tokens.weight"]["data_offsets"]
        text = json.dumps(header).encode()
        weights.write_bytes(struct.pack("<Q", len(text)) + text + data[8 + size:])
    elif breakage == "fifo_weights":
        weights.unlink()
        os.mkfifo(weights)
    elif breakage == "nested_header":
        text = b"[" * 100_000 + b"]" * 100_000
        weights.write_bytes(struct.pack("<Q", len(text)) + text)
    elif breakage == "nan_weights":  # flipped bits: converted, every output of the model would be NaN
        tensors = load_file(str(weights))
        tensors["model.layers.1.mlp.up_proj.weight"][3, 5] = np.nan
        save_file(tensors, str(weights))
    elif breakage == "stale_shard":  # a file of another download beside the checkpoint's, which sorts after it
        head = load_file(str(weights))["lm_head.weight"]
        save_file({"lm_head.weight": np.zeros_like(head)}, str(source / "zz-old.safetensors"))


def _break_config_or_tokenizer(source: Path, breakage: str) -> None:
    """config.json or tokenizer.json damaged as `breakage` names, where it names a damage of those."""
    config = source / "config.json"
    if breakage == "nested_config":
        config.write_text("[" * 100_000 + "]" * 100_000)
    elif breakage == "infinite_size":  # Python's json reads 1e999 as infinity
        config.write_text(config.read_text().replace('"hidden_size": 64', '"hidden_size": 1e999'))
    elif breakage == "nan_epsilon":
        json_edit(config, rms_norm_eps=float("nan"))
    elif breakage == "zero_rope_factor":
        json_edit(config, rope_parameters={"rope_theta": 10000.0, "rope_type": "linear", "factor": 0})
    elif breakage == "huge_vocabulary":
        json_edit(config, vocab_size=10**12)
    elif breakage == "id_past_vocabulary":
        spec = json.loads((source / "tokenizer.json").read_text())
        spec["model"]["vocab"]["ĠĠzz"] = 100_000  # the tokenizers library counts it as one more token
        (source / "tokenizer.json").write_text(json.dumps(spec))


@pytest.mark.parametrize("family,change,says", [
    ("starcoder2", {"sliding_window": 64}, "sliding-window attention (64 tokens)"),
    ("starcoder2", {"sliding_window": 64, "use_sliding_window": False}, "sliding-window attention (64 tokens)"),
    ("starcoder2", {"use_bias": False}, "does not use"),  # transformers would leave the biases out
    ("starcoder2_no_bias", {"use_bias": True}, "the weights have no tensor"),
    ("starcoder2", {"use_bias": "yes"}, "use_bias must be true or false"),
    ("starcoder2", {"hidden_act": "relu"}, "activation 'relu' is not supported"),
    ("gpt_bigcode", {"add_cross_attention": True}, "cross-attention is not supported"),
    ("gpt_bigcode", {"n_head": 3}, "has shape"),
])
def test_starcoder_checkpoints_the_graph_cannot_run_are_refused_in_one_line(tmp_path, capsys, family, change, says):
    checkpoint(tmp_path / "src", family, specials=STARCODER_SPECIALS)
    json_edit(tmp_path / "src" / "config.json", **change)
    capsys.readouterr()  # what saving the checkpoint printed
    err = _refused(["convert", str(tmp_path / "src"), "--out", str(tmp_path / "out"), "--context", "128"], capsys)
    assert says in err
    assert not (tmp_path / "out").exists()


def test_an_existing_out_is_kept_unless_it_is_a_bundle_and_forced(source, tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    assert "exists and is not empty" in _refused(["convert", str(source), "--out", str(out)], capsys)
    assert "--force replaces only a bundle" in _refused(["convert", str(source), "--out", str(out), "--force"], capsys)
    assert (out / "keep.txt").read_text() == "mine"
    for named in (tmp_path / "notes.txt", tmp_path / "empty.txt"):  # said as it is: a file, empty or not
        named.write_text("mine" if named.stem == "notes" else "")
        for force in ([], ["--force"]):
            said = _refused(["convert", str(source), "--out", str(named), *force], capsys)
            assert said.endswith(f"--out {named} exists and is not a folder; choose a new folder for the bundle"), said
        assert named.read_text() == ("mine" if named.stem == "notes" else "")
    bundle = tmp_path / "bundle"
    assert cli_main(["convert", str(source), "--out", str(bundle), "--context", "64"]) == 0
    (bundle / "extra.txt").write_text("old")
    assert cli_main(["convert", str(source), "--out", str(bundle), "--force", "--context", "64"]) == 0
    assert (bundle / "manifest.json").is_file() and not (bundle / "extra.txt").exists()
    for target in (source, tmp_path):  # the checkpoint, or a folder that holds it: never replaced
        assert "holds the checkpoint folder" in _refused(["convert", str(source), "--out", str(target), "--force"],
                                                         capsys)
    monkeypatch.chdir(source / "..")
    assert "holds" in _refused(["convert", str(source), "--out", ".", "--force"], capsys)
    assert (source / "config.json").is_file()


def test_an_out_no_bundle_can_be_moved_to_is_refused_before_converting(source, tmp_path, capsys):
    """A symbolic link (to nothing, in a loop, or to a folder, which the bundle could not take the place of), or a
    path through a file: refused at once by name, not after the whole conversion with the errno of a hidden
    staging folder or "Cannot call rmtree on a symbolic link"."""
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "a-file").write_text("mine")
    (tmp_path / "empty").mkdir()
    (tmp_path / "to-empty").symlink_to(tmp_path / "empty")
    for out, says in (("dangling", "is a symbolic link to nothing"), ("loop", "is a symbolic link to nothing"),
                      ("a-file/bundle", "a-file is not a folder"), ("loop/bundle", "loop is not a folder"),
                      ("to-empty", f"is a symbolic link; give the folder it names, {tmp_path / 'empty'}")):
        assert says in _refused(["convert", str(source), "--out", str(tmp_path / out), "--context", "64"], capsys)
    assert not [p for p in tmp_path.iterdir() if "converting" in p.name]


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="/proc: a folder no user, root included, writes in")
@pytest.mark.parametrize("as_gguf", [False, True])
def test_an_out_in_a_folder_that_cannot_be_written_is_refused_by_its_name_before_converting(source, tmp_path, capsys,
                                                                                              monkeypatch, as_gguf):
    """Not with the errno of a hidden folder made beside it (the staging folder, or a GGUF file's unpacked config),
    a name the user never gave, and not after reading the weights."""
    import completer.convert as convert_module
    from gguf_files import write_gguf

    def no_weights(*args, **kwargs):
        raise AssertionError("the weights were read before --out was checked")

    named = write_gguf(source, tmp_path / "model.gguf", "llama", quantized=False) if as_gguf else source
    monkeypatch.setattr(convert_module, "_ReadOnce", no_weights)
    said = _refused(["convert", str(named), "--out", "/proc/bundle", "--context", "64"], capsys)
    assert said.startswith("completer convert: --out /proc/bundle: cannot write in /proc (") and "/proc/." not in said


def _converter_paused_in_its_staging_folder(source: Path, out: Path) -> tuple[subprocess.Popen, Path]:
    """A `completer convert` into `out`, stopped (SIGSTOP) once its staging folder holds a file (the folder made
    to check that --out's is writable never does)."""
    import signal

    before = set(out.parent.glob(f".{out.name}.converting-*"))
    process = subprocess.Popen([sys.executable, "-m", "completer", "convert", str(source), "--out", str(out),
                                "--context", "64"], env=server_env(), stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while True:
        with contextlib.suppress(OSError):
            made = [path for path in set(out.parent.glob(f".{out.name}.converting-*")) - before if any(path.iterdir())]
            if made:
                process.send_signal(signal.SIGSTOP)
                return process, made[0]
        assert process.poll() is None and time.monotonic() < deadline, "no staging folder seen"
        time.sleep(0.002)


@pytest.mark.skipif(os.name != "posix", reason="SIGSTOP, and flock")
def test_what_a_converter_killed_outright_left_is_cleared_by_the_next_and_a_live_ones_is_not(source, tmp_path):
    """A converter killed outright (SIGKILL, out of memory) cannot remove its staging folder: a partial bundle, as
    large as the model's weights, was left hidden beside --out for good. The next conversion there now removes it,
    but not the folder of a conversion still running (here stopped) into the same --out."""
    import signal

    out = tmp_path / "bundle"
    live, running = _converter_paused_in_its_staging_folder(source, out)
    try:
        killed, abandoned = _converter_paused_in_its_staging_folder(source, out)
        killed.kill()
        killed.wait()
        assert abandoned.is_dir() and running.is_dir()
        assert cli_main(["convert", str(source), "--out", str(out), "--context", "64"]) == 0
        assert not abandoned.exists() and running.is_dir()
    finally:
        live.send_signal(signal.SIGCONT)
        assert live.wait(60) == 0  # it replaces the bundle, as a second --out of the same model always did
    assert (out / "manifest.json").is_file() and not list(tmp_path.glob(".bundle.converting-*"))


@pytest.mark.skipif(os.name != "posix", reason="SIGSTOP, SIGTERM and SIGHUP")
@pytest.mark.parametrize("name", ["SIGTERM", "SIGHUP"])
def test_a_converter_terminated_removes_its_staging_folder_and_dies_of_the_signal(source, tmp_path, name):
    """`timeout`, a service stopping or a closed terminal (SIGTERM, SIGHUP) killed the converter outright, which left
    its half-written staging folder, as large as the model, hidden beside --out until another conversion into that
    --out: now it stops as on Ctrl-C, removing what it had begun, and dies of the signal it got."""
    import signal

    out = tmp_path / "bundle"
    process, staging = _converter_paused_in_its_staging_folder(source, out)
    process.send_signal(getattr(signal, name))
    process.send_signal(signal.SIGCONT)
    assert process.wait(60) == -getattr(signal, name)
    assert not staging.exists() and not out.exists() and not list(tmp_path.glob(".bundle.converting-*"))


def test_a_bundle_folder_is_made_with_the_users_umask_as_mkdir_makes_one(source, tmp_path):
    """A bundle written where others load it (`sudo completer convert ... --out /opt/models/x`) is readable by them
    as any folder the user makes there, not private to its maker as a scratch folder is."""
    old = os.umask(0o022)
    try:
        assert cli_main(["convert", str(source), "--out", str(tmp_path / "shared"), "--context", "64"]) == 0
        os.umask(0o077)
        assert cli_main(["convert", str(source), "--out", str(tmp_path / "private"), "--context", "64"]) == 0
    finally:
        os.umask(old)
    assert (tmp_path / "shared").stat().st_mode & 0o777 == 0o755
    assert (tmp_path / "private").stat().st_mode & 0o777 == 0o700
    assert all(path.stat().st_mode & 0o077 == 0 for path in (tmp_path / "private").iterdir())


def _interrupt() -> None:
    """Interrupt the main thread as the converter's stop-with-parent thread does, and give the interrupt a place
    to land at once unless it is held off."""
    import _thread

    _thread.interrupt_main()
    for _ in range(1000):  # backward jumps: where the main thread takes a pending interrupt
        pass


def test_an_interrupt_while_the_scratch_folder_is_made_or_removed_leaves_nothing_behind(tmp_path, monkeypatch):
    """An interrupt that comes while the staging folder is made (the stop-with-parent thread's, at any moment), or
    while it is removed after a failure or a first interrupt (Ctrl-C reaches the CLI's converter from the terminal,
    then from the CLI stopping it): the folder is removed all the same, then the interrupt stops the converter."""
    import shutil
    import tempfile

    from completer.convert import _scratch_folder

    real_mkdtemp, real_rmtree = tempfile.mkdtemp, shutil.rmtree

    def made_then_interrupted(**kwargs) -> str:
        made = real_mkdtemp(**kwargs)
        _interrupt()
        return made

    def interrupted_then_removed(path, **kwargs) -> None:
        _interrupt()
        real_rmtree(path, **kwargs)

    monkeypatch.setattr(tempfile, "mkdtemp", made_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        with _scratch_folder(".made-", tmp_path):
            pytest.fail("an interrupt held off while the folder was made came after the block began")
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setattr(tempfile, "mkdtemp", real_mkdtemp)
    monkeypatch.setattr(shutil, "rmtree", interrupted_then_removed)
    with pytest.raises(KeyboardInterrupt):
        with _scratch_folder(".removed-", tmp_path) as folder:
            (folder / "model.onnx.data").write_bytes(b"weights")
            raise RuntimeError("the conversion failed")
    assert list(tmp_path.iterdir()) == []


def test_the_stderr_of_a_converter_whose_parent_is_gone_drops_lines_rather_than_raise():
    """The parent's death closes the converter's stdin, whose interrupt stops it: a broken pipe raised by the next
    line of progress would be a second way out, racing the interrupt into the removal of what was begun."""
    from completer.convert import _ParentsStderr

    read, write = os.pipe()
    os.close(read)  # the parent is gone
    pipe = open(write, "w", buffering=1)
    stderr = _ParentsStderr(pipe)
    print("layers [###...] 3/24", file=stderr, flush=True)
    assert stderr.write("optimizing the graph\n") == len("optimizing the graph\n")
    with pytest.raises(BrokenPipeError):  # as the pipe itself does
        print("optimizing the graph", file=pipe, flush=True)
    with contextlib.suppress(BrokenPipeError):  # what is left in its buffer cannot be written as it closes
        pipe.close()


def test_fifos_beside_the_checkpoint_are_passed_over_and_paths_are_quoted(source, tmp_path, capsys):
    """A FIFO blocks whoever opens it until a writer comes: the model card and tokenizer_config.json are read only
    when they are regular files. A bundle's path with a space is one shell word in the commands it is named in."""
    (source / "README.md").unlink()
    os.mkfifo(source / "README.md")
    os.mkfifo(source / "tokenizer_config.json")  # read for the end-of-text token: the vocabulary has no <|endoftext|>
    spec = json.loads((source / "tokenizer.json").read_text())
    for token in spec["added_tokens"]:
        token["content"] = "</s>" if token["content"] == "<|endoftext|>" else token["content"]
    (source / "tokenizer.json").write_text(json.dumps(spec).replace('"<|endoftext|>"', '"</s>"'))
    out = tmp_path / "my bundles" / "tiny"
    assert cli_main(["convert", str(source), "--out", str(out), "--context", "64"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["end_of_text_token"] == "</s>" and manifest["source"]["license"].startswith("unknown (no README")
    assert f"--out {shlex.quote(str(out))} " in manifest["conversion"]["command"]
    assert f"use it with --model {shlex.quote(str(out))} " in capsys.readouterr().out


def test_the_bundles_default_window_and_beams_apply_unless_the_user_sets_them(source, tmp_path, capsys):
    """A large model's whole context costs seconds of prefill on a small CPU: the bundle names the window and the
    beam width the engine uses when the settings say 0 (their defaults), and the user's own values win."""
    out = tmp_path / "bundle"
    assert cli_main(["convert", str(source), "--out", str(out), "--context", "256", "--default-context", "96",
                     "--default-beams", "2"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["defaults"] == {"beams": 2, "context_tokens": 96}
    assert "--default-context 96 --default-beams 2" in manifest["conversion"]["command"]
    long_text = "".join(f"value_{i} = compute(value_{i - 1}, {i})\n" for i in range(1, 200)) + "result = "
    engine = Engine(EngineSettings(model_path=str(out)))
    assert (engine.info()["beams"], engine.info()["context_window"]) == (2, 96)
    engine.complete_text("file:///long.py", long_text, "")
    assert len(engine.cache.get("file:///long.py").ids) <= 96
    rows = []
    run = engine.runtime.run_call
    engine.runtime.run_call = lambda call: rows.append(call.rows) or run(call)
    engine.complete_text("file:///other.py", long_text.replace("value", "item"), "")
    assert max(rows) == 2, "the search keeps the bundle's 2 beams"
    engine.configure(EngineSettings(model_path=str(out), beams=3, context_tokens=200))
    assert (engine.info()["beams"], engine.info()["context_window"]) == (3, 200)
    engine.complete_text("file:///long.py", long_text, "")
    assert 96 < len(engine.cache.get("file:///long.py").ids) <= 200


@pytest.mark.parametrize("flags,says", [
    (["--default-context", "300"], "--default-context 300 must be between 88 and the bundle's context, 256"),
    (["--default-context", "10"], "--default-context 10 must be between 88 and the bundle's context, 256"),
    (["--default-beams", "0"], "--default-beams 0 must be between 1 and 16"),
])
def test_defaults_outside_the_bundle_are_refused_in_one_line(source, tmp_path, capsys, flags, says):
    out = tmp_path / "bundle"
    assert cli_main(["convert", str(source), "--out", str(out), "--context", "256", *flags]) == 2
    assert capsys.readouterr().err.strip() == f"completer convert: {says}"
    assert not out.exists()


def test_the_command_line_converts_and_completes(source, tmp_path):
    out = tmp_path / "bundle"
    done = subprocess.run([sys.executable, "-m", "completer", "convert", str(source), "--out", str(out),
                           "--context", "64"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "wrote" in done.stdout, done.stderr
    sample = tmp_path / "s.py"
    sample.write_text("import os\n\n\ndef main():\n    return os.get\n")
    done = subprocess.run([sys.executable, "-m", "completer", "complete", f"{sample}:5:17", "--model", str(out),
                           "--json"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "suggestions" in json.loads(done.stdout), done.stderr


def test_merged_vocabulary_encodes_as_the_whole_text_while_typing(converted):
    """The text up to the last line that starts with code is encoded once and kept: the tokens must still be
    exactly the whole text's, at every cut, as the cursor moves through a file."""
    import argparse

    from completer.cache import DocumentState

    _, bundle_dir, _ = converted
    engine = Engine(EngineSettings(model_path=str(bundle_dir), device="cpu"))
    assert not engine.tokens.isolates_newlines
    text = Path(argparse.__file__).read_text()[:12000]
    state = DocumentState()
    for cut in [*range(0, len(text), 331), *range(5000, 5200, 7)]:
        ids, head_count = engine.prompts.encode(state, text[:cut])
        assert ids == engine.tokens.encode(text[:cut]), cut
        head = text[:cut][:text[:cut].rfind("\n") + 1]
        assert head.encode().startswith(engine.tokens.decode_bytes(ids[:head_count]))


def test_a_prefilled_fim_document_runs_only_the_cursors_line_and_what_follows_its_head(converted):
    """Released FIM models always get the prefix-suffix-middle prompt, so every cursor's prompt starts with
    the same head, which the prefill runs ahead of the first keystroke."""
    _, bundle_dir, _ = converted
    engine = Engine(EngineSettings(model_path=str(bundle_dir), fill_in_the_middle=True, device="cpu"))
    text = "import os\n\n\ndef main(argv):\n    for name in argv:\n        pri\n    return 0\n"
    cursor = (5, len("        pri"))
    engine.open("file:///cold.py", text)
    cold = engine.complete("file:///cold.py", *cursor)
    engine.open("file:///warm.py", text)
    assert engine.prefill("file:///warm.py", text) > 0
    warm = engine.complete("file:///warm.py", *cursor)
    head = len(engine.tokens.encode("import os\n\n\ndef main(argv):\n    for name in argv:\n"))
    assert warm.cached_tokens >= head and warm.new_tokens <= cold.new_tokens - head + 1, (cold, warm)
    engine.open("file:///end.py", "import os\n\n\ndef main(argv):\n    for na")
    engine.complete("file:///end.py", 4, len("    for na"))  # nothing below: the same template, an empty suffix
    ids = list(engine.cache.get("file:///end.py").ids)
    pre, suf, mid = engine.bundle.fim_ids
    assert ids[0] == pre and ids[ids.index(suf) + 1] == mid


def test_searching_the_next_line_ahead_keeps_this_lines_fim_prompt(converted):
    """A FIM prompt for the line after Enter is no extension of this line's: the search ahead puts this line's
    cached prompt back, so the next keystroke in the line still costs one token."""
    _, bundle_dir, _ = converted
    engine = Engine(EngineSettings(model_path=str(bundle_dir), fill_in_the_middle=True, device="cpu", max_tokens=8))
    before, below = "import os\n\n\ndef main(argv):\n    for name in arg", "    return 0\n"
    engine.complete_text("file:///a.py", before, "", below=below)
    engine.search_next_line("file:///a.py", before, below)
    result = engine.complete_text("file:///a.py", before + "v", "", below=below)
    assert result.new_tokens <= 2, result


@pytest.fixture(scope="module")
def converted_wide(converted) -> Path:
    """The same checkpoint with a 512-token window: room for the workspace's files before a FIM prompt."""
    src, bundle_dir, _ = converted
    out = bundle_dir.parent / "wide"
    assert cli_main(["convert", str(src), "--out", str(out), "--context", "512"]) == 0
    return out


def _split_at(ids: list[int], markers: tuple[int, ...]) -> list[list[int]]:
    """`ids` cut at each marker (the markers dropped): the pieces between them."""
    pieces: list[list[int]] = [[]]
    for token in ids:
        if token in markers:
            pieces.append([])
        else:
            pieces[-1].append(token)
    return pieces


def test_a_qwen_bundle_reads_the_workspace_as_files_before_its_fim_prompt_and_typing_only_extends_it(
        converted_wide):
    """Qwen2.5-Coder was trained on repositories laid out as `<|repo_name|>name <|file_sep|>path code ...`: the
    workspace's snippets go first, under their paths, then the document's own path and its FIM prompt."""
    engine, ids = _completed_in_a_shop(converted_wide)
    name_id, sep_id = engine.prompts.repository_markers
    pre, suf, mid = engine.bundle.fim_ids
    prices, repository, uri, below, before = PRICES, SHOP, SHOP_URI, SHOP_BELOW, SHOP_BEFORE
    files = ids[:ids.index(pre)]
    assert files[0] == name_id and files.count(sep_id) == 2 and files.count(name_id) == 1
    decoded = [engine.tokens.decode_bytes(piece) for piece in _split_at(files, (name_id, sep_id))]
    assert decoded == [b"", b"shop\n", b"shop/prices.py\n" + prices.encode(), b"shop/cart.py\n"]
    window = engine.prompts.window_tokens() - engine.settings.max_tokens - 1
    assert len(files) <= window // 4 and ids[len(files) + 1:].count(suf) == 1
    engine.typing_through = False
    typed = engine.complete_text(uri, before + "a", "", below=below, snippets=[prices], repository=repository)
    assert typed.cached_tokens >= len(ids) - 2 and typed.new_tokens <= 3, typed
    # the document's prefill (an edit while idle) keeps the files its prompts start with
    engine.prefill(uri, before + "al(cart)\n    amount *= 2\n")
    assert list(engine.cache.get(uri).ids[:len(files) + 1]) == files + [pre]
    # no workspace: the FIM prompt alone, as before
    engine.complete_text("file:///shop/alone.py", before, "", below=below)
    assert engine.cache.get("file:///shop/alone.py").ids[0] == pre


def test_other_snippets_replace_the_files_only_where_the_prompt_is_run_again_anyway(converted_wide):
    """New files before the prompt run the whole prompt again (seconds for a large model on a small CPU): a
    document whose cache holds much after its files keeps them until an edit far above runs it again anyway."""
    engine = Engine(EngineSettings(model_path=str(converted_wide), fill_in_the_middle=True, device="cpu"))
    engine.typing_through = False
    first = RepositoryContext("shop", "shop/cart.py", (("shop/prices.py", "TAX = 0.2\nRATE = 3\nBASE = 1\n"),))
    other = RepositoryContext("shop", "shop/cart.py", (("shop/stock.py", "COUNT = 7\nSIZE = 2\nLEFT = 0\n"),))
    uri, body = "file:///shop/cart.py", "".join(f"value_{i} = compute({i})\n" for i in range(30))
    before = body + "def checkout(cart):\n    amount = tot"

    def files_of(repository: RepositoryContext, text: str) -> bytes:
        result = engine.complete_text(uri, text, "", snippets=[repository.files[0][1]], repository=repository)
        assert result.suggestions is not None
        ids = list(engine.cache.get(uri).ids)
        return engine.tokens.decode_bytes(ids[:ids.index(engine.bundle.fim_ids[0])])

    assert b"shop/prices.py" in files_of(first, before)
    kept = files_of(other, before + "a")  # the cache holds the whole document after the files: they stay
    assert b"shop/prices.py" in kept and b"shop/stock.py" not in kept
    assert engine.complete_text(uri, before + "al", "", snippets=["x"], repository=other).new_tokens <= 3
    edited = files_of(other, "import os\n" + before)  # an edit at the top runs the prompt again: the new files
    assert b"shop/stock.py" in edited and b"shop/prices.py" not in edited


CART = ("from prices import total, TAX\n\n\ndef checkout(cart):\n    amount = total(cart.items)\n"
        "    amount = amount * (1 + TAX)\n    return amount\n")


def _context_tokens_beside_a_workspace(bundle: Path, folder: Path, on: bool) -> int:
    """How many tokens the model read for a completion in cart.py, in the real server on `folder`."""
    with RawClient(SERVER_CMD, env=server_env(COMPLETER_MODEL=str(bundle))) as client:
        client.request("initialize", {"processId": None, "rootUri": folder.as_uri(), "capabilities": {},
                                      "initializationOptions": {"completer": {"fillInTheMiddle": True,
                                                                              "workspaceContext": on}}})
        client.notify("initialized", {})
        deadline = time.monotonic() + 60
        while not client.request("completer/info")["result"].get("model"):
            assert time.monotonic() < deadline, "the worker never loaded the converted bundle"
            time.sleep(0.1)
        time.sleep(0.5)  # the index is built on a thread; two files take milliseconds
        uri = (folder / "cart.py").as_uri()
        client.open(uri, CART)
        client.completion(uri, 4, len("    amount = tot"))  # a new line's snippets are picked after its search
        time.sleep(0.5)
        assert client.completion(uri, 5, len("    amount = amo"))["result"] is not None
        return client.request("completer/info")["result"]["server"]["last_context_tokens"]


@pytest.mark.parametrize("which", ["converted_wide", "converted_starcoder2"])
def test_the_real_server_sends_a_bundle_with_a_repository_format_the_workspace_files(which, request, tmp_path):
    bundle = request.getfixturevalue(which)
    converted_wide = bundle if isinstance(bundle, Path) else bundle[1]
    (tmp_path / "prices.py").write_text("TAX = 0.2\n\n\ndef total(items):\n    return sum(i.price for i in items)\n")
    (tmp_path / "cart.py").write_text(CART)
    alone = _context_tokens_beside_a_workspace(converted_wide, tmp_path, on=False)
    beside = _context_tokens_beside_a_workspace(converted_wide, tmp_path, on=True)
    assert beside >= alone + 20, (alone, beside)  # the folder's name, both paths and prices.py's lines


def test_bundles_whose_template_has_no_repository_format_read_no_files():
    from completer.bundle import load_bundle
    from completer.prompt import Prompts
    from completer.tokens import Tokens

    bundle = load_bundle(None)  # the embedded model: no FIM template of a released family
    prompts = Prompts(bundle, Tokens(bundle.tokenizer_path), EngineSettings())
    assert prompts.repository_markers is None
    assert prompts.repository_ids(RepositoryContext("shop", "a.py"), 500) == []


def test_markers_the_tokenizer_does_not_call_special_are_found_and_never_generated(tmp_path):
    """deepseek-coder's FIM tokens are added tokens but not special ones."""
    from tokenizers import AddedToken, Tokenizer

    checkpoint(tmp_path / "src", "llama", tied=True, fim=False)
    tokenizer = Tokenizer.from_file(str(tmp_path / "src" / "tokenizer.json"))
    tokenizer.add_tokens([AddedToken(m, special=False) for m in ("<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>")])
    tokenizer.save(str(tmp_path / "src" / "tokenizer.json"))
    build_model(tmp_path / "src", "llama", tokenizer.get_vocab_size() + 8)  # the model's vocabulary grows too
    assert cli_main(["convert", str(tmp_path / "src"), "--out", str(tmp_path / "bundle"), "--context", "64"]) == 0
    engine = Engine(EngineSettings(model_path=str(tmp_path / "bundle"), device="cpu"))
    assert engine.bundle.manifest["fim"]["template"] == "deepseek"
    for marker in engine.bundle.fim_ids:
        assert not engine.tokens.generable[marker] and engine.tokens.token_bytes[marker] == b""
    assert cli_main(["convert", str(tmp_path / "src"), "--out", str(tmp_path / "plain"), "--context", "64",
                     "--no-fim"]) == 0
    assert "fim" not in json.loads((tmp_path / "plain" / "manifest.json").read_text())


@pytest.mark.parametrize("card, folder, fills_in", [
    ("---\nlicense: apache-2.0\n---\n# Qwen2.5-0.5B-Instruct\n", "src", False),
    ("---\nlicense: apache-2.0\n---\n", "Qwen2.5-1.5B", False),
    ("---\nlicense: apache-2.0\nbase_model:\n- Qwen/Qwen2.5-0.5B\ntags:\n- code\n- qwen-coder\n---\n# q\n", "qwen",
     True),
    ("---\nlicense: apache-2.0\n---\n# Qwen2.5-Coder-0.5B\n", "qwen-0.5b", True),
    ("---\nlicense: apache-2.0\n---\n# tiny test model\n", "my-model", True),
    # Unsloth's card for a Qwen2.5-Coder fine-tune: `qwen2` is the architecture's tag (config.json's model_type),
    # no name of a model
    ("---\nbase_model: unsloth/qwen2.5-coder-1.5b-bnb-4bit\ntags:\n- text-generation-inference\n- transformers\n"
     "- unsloth\n- qwen2\n- trl\nlicense: apache-2.0\n---\n\n# Uploaded  model\n", "merged", True),
    ("---\nlicense: apache-2.0\ntags: [code, 'qwen-coder']\n---\n# Qwen2.5-1.5B-autocomplete\n", "ft", True),  # inline
    ("\ufeff---\r\nlicense: apache-2.0\r\ntags:\r\n  - qwen-coder\r\n---\r\n# Qwen2.5-1.5B-sft\r\n", "ft", True),
])
def test_a_general_qwen_model_whose_tokenizer_has_the_fim_markers_completes_without_them(tmp_path, capsys, card, folder,
                                                                                        fills_in):
    """Qwen2.5's general models carry Qwen2.5-Coder's FIM markers untrained: their names (the folder, the model
    card's title and tags, never its base_model, which names a Coder model's general parent) turn FIM off unless
    --fim asks; a name saying nothing leaves the markers their word."""
    src = tmp_path / folder
    checkpoint(src, "qwen2", tied=True)
    (src / "README.md").write_text(card)
    assert cli_main(["convert", str(src), "--out", str(tmp_path / "bundle"), "--context", "64"]) == 0
    manifest = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    card_text = (tmp_path / "bundle" / "MODEL.md").read_text()
    assert ("fim" in manifest) == fills_in and ("fim_declined" in manifest) != fills_in
    assert ("no fill-in-the-middle: Qwen2.5-" in capsys.readouterr().err) != fills_in
    assert ("is a general model, not one trained to fill in" in card_text) != fills_in
    engine = Engine(EngineSettings(model_path=str(tmp_path / "bundle"), fill_in_the_middle=True, device="cpu"))
    assert (engine.bundle.fim_ids is not None) == fills_in
    if not fills_in:
        assert cli_main(["convert", str(src), "--out", str(tmp_path / "asked"), "--context", "64", "--fim"]) == 0
        asked = json.loads((tmp_path / "asked" / "manifest.json").read_text())
        assert asked["fim"]["template"] == "qwen" and "--fim" in asked["conversion"]["command"].split()


def test_a_folder_converted_as_dot_is_named_by_its_own_name(tmp_path, monkeypatch):
    """`completer convert .` inside Qwen2.5-0.5B/: the folder's name is still one of the model's names."""
    src = tmp_path / "Qwen2.5-0.5B"
    checkpoint(src, "qwen2", tied=True)
    (src / "README.md").write_text("---\nlicense: apache-2.0\n---\n")
    monkeypatch.chdir(src)
    assert cli_main(["convert", ".", "--out", str(tmp_path / "bundle"), "--context", "64"]) == 0
    manifest = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    assert "fim" not in manifest and manifest["fim_declined"].startswith("Qwen2.5-0.5B is a general model")


def test_fim_asked_of_a_tokenizer_without_markers_is_refused_and_no_fim_is_kept_in_the_command(tmp_path, capsys):
    checkpoint(tmp_path / "src", "qwen2", tied=True, fim=False)
    assert cli_main(["convert", str(tmp_path / "src"), "--out", str(tmp_path / "b"), "--context", "64", "--fim"]) == 2
    assert "--fim: the tokenizer has no fill-in-the-middle markers" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()
    checkpoint(tmp_path / "fim", "qwen2", tied=True)
    assert cli_main(["convert", str(tmp_path / "fim"), "--out", str(tmp_path / "c"), "--context", "64",
                     "--no-fim"]) == 0
    assert "--no-fim" in json.loads((tmp_path / "c" / "manifest.json").read_text())["conversion"]["command"].split()


def test_a_form_feed_line_is_no_place_to_split_and_a_carriage_return_ends_the_text(converted):
    from completer.prompt import code_line_start

    text = "import os\n\x0c\nx = 1\n  y\n"
    assert code_line_start(text, text.index("\x0c")) == 0  # the form feed line starts with white space
    assert code_line_start(text, text.index("x =")) == text.index("x =")
    assert code_line_start(text, text.index("  y")) == text.index("x =")
    _, bundle_dir, _ = converted
    engine = Engine(EngineSettings(model_path=str(bundle_dir), device="cpu"))
    tokens = engine.tokens
    ids = tokens.encode("foo\rbar")
    assert tokens.after_healed(ids, b"") == "foo"


def test_a_bundle_converted_with_search_slots_runs_several_searches_in_one_call(source, tmp_path, capsys,
                                                                               monkeypatch):
    """--batch-slots 3 builds the one graph with three search slots: searches submitted together share its calls,
    and in fp32 each gets exactly the answer it gets alone. The filters are off: a random model's lines, which
    they would mostly refuse (all of them with the weights another build of torch initialised), are the answers
    compared."""
    from bench_batch import recorded_calls
    from completer import filters
    from completer.scheduler import Priority, Scheduler, Task

    # the answers' filter step (filters.kept_insertion) reads keep_suggestion from its module
    monkeypatch.setattr(filters, "keep_suggestion", lambda line, inserted, after, context: bool(inserted.strip()))

    assert cli_main(["convert", str(source), "--out", str(tmp_path / "slots"), "--context", "96", "--fp32",
                     "--batch-slots", "3"]) == 0
    manifest = json.loads((tmp_path / "slots" / "manifest.json").read_text())
    assert manifest["search_slots"] == 3 and "--batch-slots 3" in manifest["conversion"]["command"]
    texts = ["import os\n\ndef main():\n    return os.", "class A:\n    def f(self):\n        ", "x = [1, 2,"]
    alone = Engine(EngineSettings(model_path=str(tmp_path / "slots")))
    expected = [[s.line for s in alone.complete_text(f"file:///a{k}.py", text, "").suggestions]
                for k, text in enumerate(texts)]
    engine = Engine(EngineSettings(model_path=str(tmp_path / "slots")))
    assert engine.runtime.batch_slots == 3 and engine.runtime.batched_model is None
    scheduler = Scheduler()
    tasks = [scheduler.submit(Task(engine.complete_steps(f"file:///b{k}.py", text, ""), Priority.LIVE, f"b{k}",
                                   engine.runtime)) for k, text in enumerate(texts)]
    calls_before = engine.runtime.calls
    with recorded_calls(engine.runtime) as calls:
        while scheduler.busy:
            scheduler.iterate()
    assert max(call.searches for call in calls) == 3
    assert engine.runtime.calls - calls_before < sum(t.result.model_runs for t in tasks)
    assert any(expected) and [[s.line for s in t.result.suggestions] for t in tasks] == expected
    assert _refused(["convert", str(source), "--out", str(tmp_path / "bad"), "--batch-slots", "0"], capsys) \
        .startswith("completer convert: --batch-slots 0 must be between 1 and")
