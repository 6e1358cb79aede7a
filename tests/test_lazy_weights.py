"""Converting without holding the model whole: tensors read from the checkpoint only when the graph builder takes
them (completer/graph/lazy.py), quantized a block of rows at a time, and written to the bundle's weights file as
they are made. The graph built so must be the graph built from every weight read first."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")  # the test extra installs it; CI fails on a skip (scripts/test.sh)
torch = pytest.importorskip("torch")
gguf = pytest.importorskip("gguf")

import onnx  # noqa: E402
from gguf_files import write_gguf  # noqa: E402
from hf_models import checkpoint  # noqa: E402
from onnx import numpy_helper  # noqa: E402
from onnx.external_data_helper import load_external_data_for_model  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

from completer.gguf_source import read_tensors  # noqa: E402
from completer.graph import decoder_model, int8, lazy, safetensors_reader  # noqa: E402
from completer.graph.huggingface import architecture, canonical_weights, load_weights, read_config  # noqa: E402

CONTEXT = 64


def _stored_as(path: Path, dtype) -> None:
    """The checkpoint's tensors stored again in `dtype` (released checkpoints are mostly bf16)."""
    save_file({name: value.to(dtype).contiguous() for name, value in load_file(str(path)).items()}, str(path))


def _initializers(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    return {tensor.name: numpy_helper.to_array(tensor) for tensor in model.graph.initializer}


@pytest.mark.parametrize("family,tied", [("llama", False), ("qwen2", True), ("gpt2", True), ("gpt_bigcode_mha", False),
                                         ("starcoder2", True)])
def test_the_int8_graph_built_from_tensors_read_when_taken_is_the_one_built_from_arrays_read_first(
        tmp_path, monkeypatch, family, tied):
    checkpoint(tmp_path, family, tied=tied)
    _stored_as(tmp_path / "model.safetensors", torch.bfloat16)
    monkeypatch.setattr(int8, "BLOCK_VALUES", 1000)  # many blocks per weight, as a released model's
    config = read_config(tmp_path)
    arch = architecture(config, CONTEXT)
    read_first = {name: np.asarray(value) for name, value in canonical_weights(load_weights(tmp_path), arch,
                                                                                 config).items()}
    assert all(isinstance(value, np.ndarray) for value in read_first.values())
    kept = {name: value.copy() for name, value in read_first.items()}
    for value in read_first.values():
        value.setflags(write=False)  # a caller's arrays are read, never written (nor refused when read-only)
    expected = decoder_model(arch, read_first, CONTEXT, quantized=True)
    assert all(np.array_equal(read_first[name], value) for name, value in kept.items())

    data = tmp_path / "graph.onnx.data"
    built = decoder_model(arch, canonical_weights(load_weights(tmp_path), arch, config), CONTEXT, quantized=True,
                          weights_file=data)
    apart = [t for t in built.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    assert apart and not any(len(t.dims) >= 2 and len(t.raw_data) >= 1024 for t in built.graph.initializer)
    assert data.stat().st_size == sum(int(t.external_data[2].value) for t in apart)
    load_external_data_for_model(built, str(tmp_path))

    assert [(n.op_type, list(n.input)) for n in built.graph.node] == [(n.op_type, list(n.input))
                                                                     for n in expected.graph.node]
    ours, theirs = _initializers(built), _initializers(expected)
    assert ours.keys() == theirs.keys()
    for name, value in theirs.items():
        assert ours[name].dtype == value.dtype and np.array_equal(ours[name], value), name


def test_a_tied_head_stored_anyway_is_compared_by_blocks_and_kept_only_where_it_differs(tmp_path, monkeypatch):
    checkpoint(tmp_path, "qwen2", tied=True)
    path = tmp_path / "model.safetensors"
    tensors = load_file(str(path))
    embed = tensors["model.embed_tokens.weight"]
    monkeypatch.setattr(lazy, "EQUAL_BLOCK_ROWS", 7)
    config = read_config(tmp_path)
    arch = architecture(config, CONTEXT)
    save_file({**tensors, "lm_head.weight": embed.clone()}, str(path))
    assert "lm_head" not in canonical_weights(load_weights(tmp_path), arch, config)
    changed = embed.clone()
    changed[-1, -1] += 1.0  # in the last block only
    save_file({**tensors, "lm_head.weight": changed}, str(path))
    head = canonical_weights(load_weights(tmp_path), arch, config)["lm_head"]
    np.testing.assert_array_equal(np.asarray(head), changed.numpy().T)


def test_safetensors_rows_read_from_the_file_are_the_rows_of_the_whole_tensor(tmp_path):
    rng = np.random.default_rng(0)
    values = {"f32": torch.tensor(rng.normal(size=(9, 5)), dtype=torch.float32),
              "f16": torch.tensor(rng.normal(size=(9, 5)), dtype=torch.float16),
              "bf16": torch.tensor(rng.normal(size=(9, 2, 3)), dtype=torch.bfloat16),
              "i64": torch.arange(12, dtype=torch.int64).reshape(4, 3),
              "scalar": torch.tensor(2.5, dtype=torch.bfloat16)}
    path = tmp_path / "t.safetensors"
    save_file(values, str(path))
    found = safetensors_reader.tensors(path)
    for name, value in values.items():
        whole = value.float().numpy() if value.is_floating_point() else value.numpy()
        assert found[name].shape == whole.shape and found[name].dtype == whole.dtype, name
        np.testing.assert_array_equal(found[name].read(), whole)
        if whole.ndim:
            np.testing.assert_array_equal(found[name].rows(2, 4), whole[2:4])
            np.testing.assert_array_equal(found[name].rows(3, 99), whole[3:])


def test_a_shape_whose_size_wraps_around_64_bits_is_no_empty_tensor(tmp_path):
    """numpy's product of [2**32, 2**32] wraps to 0: a header claiming 2**64 values in no bytes passed the size
    check, and the tensor went on with that shape (to be read as 2**64 values, or sized into the graph)."""
    import json
    import struct

    path = tmp_path / "wrapped.safetensors"
    header = json.dumps({"w": {"dtype": "F32", "shape": [2**32, 2**32], "data_offsets": [0, 0]}}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header)
    with pytest.raises(safetensors_reader.SafetensorsError, match="tensor 'w' lies outside the file or has the wrong "
                                                                  "size"):
        safetensors_reader.tensors(path)


def test_gguf_rows_of_quantized_blocks_are_the_rows_of_the_whole_dequantized_tensor(tmp_path):
    checkpoint(tmp_path / "src", "qwen2")
    path = write_gguf(tmp_path / "src", tmp_path / "q8.gguf", "qwen2", quantized=True)
    reader = gguf.GGUFReader(str(path))
    quantized = [t for t in reader.tensors if t.tensor_type == gguf.GGMLQuantizationType.Q8_0]
    assert quantized
    found = read_tensors(path)
    checked = 0
    for tensor in quantized:
        if tensor.name.endswith(("attn_q.weight", "attn_k.weight")):
            continue  # permuted back on reading; test_gguf_source checks those against llama.cpp
        name = next(n for n, t in found.items() if t.shape == tuple(reversed([int(d) for d in tensor.shape]))
                    and np.array_equal(t.read(), gguf.quants.dequantize(tensor.data, tensor.tensor_type)))
        np.testing.assert_array_equal(found[name].rows(1, 3), found[name].read()[1:3])
        checked += 1
    assert checked


def test_a_checkpoint_cut_short_while_it_is_read_is_refused_by_file_and_tensor(tmp_path):
    checkpoint(tmp_path / "src", "qwen2")
    gguf_path = write_gguf(tmp_path / "src", tmp_path / "q8.gguf", "qwen2", quantized=True)
    path = tmp_path / "src" / "model.safetensors"
    found = safetensors_reader.tensors(path)  # the header is whole
    with open(path, "r+b") as handle:
        handle.truncate(path.stat().st_size // 2)
    last = max(found, key=lambda name: safetensors_reader.read_header(path)[0][name]["data_offsets"][1])
    with pytest.raises(safetensors_reader.SafetensorsError, match=f"{last}.* is cut short"):
        found[last].read()

    described = read_tensors(gguf_path)
    with open(gguf_path, "r+b") as handle:
        handle.truncate(gguf_path.stat().st_size - 100)
    cut = [name for name, tensor in described.items() if _cut_short(tensor)]
    assert cut


def _cut_short(tensor) -> bool:
    from completer.gguf_source import GGUFError

    try:
        tensor.read()
    except GGUFError as exc:
        return "is cut short" in str(exc)
    return False
