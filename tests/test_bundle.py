"""The committed bundle verifies; damaged copies are refused with a message naming the file."""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from completer.bundle import load_bundle
from completer.engine import Engine
from completer.types import EngineSettings, ModelError


def test_committed_bundle_verifies(model_dir: Path):
    bundle = load_bundle(model_dir)
    manifest = bundle.manifest
    assert set(manifest["files"]) >= {"model.onnx", "tokenizer.json"}
    assert bundle.runtime_bytes <= 25 * 1024 * 1024
    assert manifest["files"]["model.onnx"]["bytes"] <= 0.27 * manifest["fp32_onnx_bytes"]
    assert (model_dir / "training" / "model.safetensors").exists(), "fp32 weights ship beside the bundle"
    assert (model_dir / "MODEL.md").exists()


@pytest.fixture
def copy(model_dir: Path, tmp_path: Path) -> Path:
    target = tmp_path / "bundle"
    target.mkdir()
    for name in (*json.loads((model_dir / "manifest.json").read_text())["files"], "manifest.json"):
        shutil.copyfile(model_dir / name, target / name)
    return target


def test_flipped_byte_is_refused(copy: Path):
    data = bytearray((copy / "model.onnx").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (copy / "model.onnx").write_bytes(bytes(data))
    with pytest.raises(ModelError, match=r"model\.onnx.*sha256"):
        load_bundle(copy)


def test_truncated_file_is_refused(copy: Path):
    data = (copy / "tokenizer.json").read_bytes()
    (copy / "tokenizer.json").write_bytes(data[: len(data) // 3])
    with pytest.raises(ModelError, match=r"tokenizer\.json.*truncated"):
        load_bundle(copy)


def test_missing_file_and_manifest(copy: Path, tmp_path: Path):
    (copy / "model.onnx").unlink()
    with pytest.raises(ModelError, match=r"missing.*model\.onnx"):
        load_bundle(copy)
    with pytest.raises(ModelError, match="not found"):
        load_bundle(tmp_path / "nowhere")
    (copy / "manifest.json").write_text("{not json")
    with pytest.raises(ModelError, match="manifest"):
        load_bundle(copy)
    (copy / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)  # Python's parser recurses: RecursionError
    with pytest.raises(ModelError, match="unreadable manifest, not JSON"):
        load_bundle(copy)


def test_engine_refuses_corrupt_model_and_keeps_old_one(copy: Path, engine: Engine):
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["files"]["model.onnx"]["sha256"] = "0" * 64
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ModelError):
        Engine(EngineSettings(model_path=str(copy)))
    before = engine.bundle.path
    with pytest.raises(ModelError):
        engine.configure(EngineSettings(model_path=str(copy)))
    assert engine.bundle.path == before and engine.settings.model_path is None


def test_a_wheel_installs_every_file_the_manifest_lists(model_dir: Path):
    """A non-editable install finds the model in <prefix>/share/completer/models: each file the manifest
    checks must be among pyproject.toml's data files, or that install would refuse to load."""
    import tomllib

    pyproject = tomllib.loads((model_dir.parent.parent / "pyproject.toml").read_text())
    installed = {Path(p).name for p in pyproject["tool"]["setuptools"]["data-files"][
        "share/completer/models/python-small"]}
    manifest = json.loads((model_dir / "manifest.json").read_text())
    assert {*manifest["files"], "manifest.json"} <= installed


@pytest.mark.parametrize("change, says", [
    ({"files": "model.onnx"}, '"files" must map'),
    ({"files": ["model.onnx", "tokenizer.json"]}, '"files" must map'),
    ({"files": {"model.onnx": "abc", "tokenizer.json": {}}}, '"files" must map'),
    ({"context_length": "abc"}, '"context_length" must be an integer, not "abc"'),
    ({"context_length": 0}, '"context_length" must be at least 2'),
    ({"newline_token_id": None}, '"newline_token_id" must be an integer'),
    ({"architecture": []}, '"architecture" must be an object'),
    ({"defaults": [4]}, '"defaults" must be an object'),
    ({"defaults": {"beams": 0}}, '"defaults"."beams" must be an integer from 1 to 16, not 0'),
    ({"defaults": {"beams": True}}, '"defaults"."beams" must be an integer'),
    ({"defaults": {"context_tokens": 1025}}, '"defaults"."context_tokens" must be an integer from 2 to 1024'),
    ({"architecture": {}}, '"architecture"."n_layer" must be a whole number above 0, not null'),
    ({"architecture": {"n_layer": 8, "n_head": 0, "n_embd": 192, "vocab_size": 8192}}, '"architecture"."n_head"'),
    ({"architecture": {"n_layer": 8, "n_head": 6, "n_embd": 192, "vocab_size": None}}, '"architecture"."vocab_size"'),
    ({"architecture": {"n_layer": 8, "n_head": 6, "n_embd": 192, "vocab_size": 8192, "n_kv_head": 0}},
     '"architecture"."n_kv_head" must be a whole number above 0, not 0'),
    ({"tokenizer_vocab_size": "8192"}, '"tokenizer_vocab_size" must be a whole number above 0, not "8192"'),
    ({"files": {"model.onnx": {}, "tokenizer.json": {}, "/etc/hostname": {}}},
     '"files" must name files in the bundle\'s folder, not "/etc/hostname"'),
    ({"files": {"model.onnx": {}, "tokenizer.json": {}, "../model.onnx": {}}}, 'folder, not "../model.onnx"'),
])
def test_a_manifest_of_the_wrong_shape_is_refused_naming_the_field(copy: Path, change: dict, says: str):
    manifest = json.loads((copy / "manifest.json").read_text())
    (copy / "manifest.json").write_text(json.dumps({**manifest, **change}))
    with pytest.raises(ModelError, match="manifest.json: incomplete or malformed manifest") as refused:
        load_bundle(copy)
    assert says in str(refused.value)


@pytest.mark.parametrize("key, value", [("n_layer", 10**12), ("vocab_size", 10**12), ("n_kv_head", 3),
                                        ("n_layer", 4)])
def test_a_manifest_whose_architecture_is_not_the_graphs_is_refused_and_the_old_model_kept(
        copy: Path, engine: Engine, key: str, value: int):
    """The manifest is not checksummed: edited, or another model's, the sizes it gives would shape caches and masks
    that fail every call once the model is taken up, or fill the memory before (a trillion layers or ids)."""
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["architecture"][key] = value
    (copy / "manifest.json").write_text(json.dumps(manifest))
    before = engine.bundle.path
    with pytest.raises(ModelError, match=f"manifest.json: its architecture says {key} {value}, but model.onnx has"):
        engine.configure(EngineSettings(model_path=str(copy)))
    assert engine.bundle.path == before and engine.settings.model_path is None


def test_a_manifest_naming_a_file_the_system_cannot_look_up_is_refused_naming_it(copy: Path):
    """A name longer than the file system allows makes the lookup itself fail (ENAMETOOLONG): that is a bad
    bundle, said in one line, not an OSError the server reports as its own failure with a traceback."""
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["files"]["x" * 300] = {"sha256": "0" * 64, "bytes": 1}
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ModelError, match=r"model file .*x{300} cannot be read \(File name too long\)"):
        load_bundle(copy)


def test_a_manifest_claiming_more_context_than_the_graph_holds_is_refused_and_the_old_model_kept(
        copy: Path, engine: Engine):
    """context_length edited upwards (to read more context): the graph's position table still holds 1,024, so
    every call past it would fail, each keystroke of a long file an error in the log and no suggestion."""
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["context_length"] = 2 * manifest["context_length"]
    (copy / "manifest.json").write_text(json.dumps(manifest))
    before = engine.bundle.path
    with pytest.raises(ModelError, match="manifest.json: its context_length is 2,048, but model.onnx cannot run "
                                         "position 2,047"):
        engine.configure(EngineSettings(model_path=str(copy)))
    assert engine.bundle.path == before and engine.settings.model_path is None
    assert Engine(EngineSettings(model_path=str(before))).runtime.calls == 0  # the check is no model run


@pytest.mark.parametrize("slots", [9, 10**9])
def test_a_manifest_claiming_more_search_slots_than_the_batched_graph_holds_runs_searches_one_at_a_time(
        copy: Path, caplog: pytest.LogCaptureFixture, slots: int):
    """batched_model's slots, edited: the first call two searches shared built that many slots' inputs for every
    layer (a million: minutes and 10 GB before onnxruntime refused them; a billion: out of memory). The graph's own
    slots are checked when it is first loaded, and the searches run one at a time, as for any batched graph that
    fails."""
    import numpy as np

    from completer.calls import ModelCall
    from completer.runtime import Runtime

    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["batched_model"]["slots"] = slots
    (copy / "manifest.json").write_text(json.dumps(manifest))
    runtime = Runtime(load_bundle(copy), device="cpu")
    calls = [ModelCall(np.array([[5, 6, 7]]), 0, runtime.empty_prefix()) for _ in range(2)]
    assert len(runtime.run_batch(calls)) == 2 and runtime.batched_model is None and runtime.batch_slots == 1
    assert f"batched_model says {slots:,} search slots, but model_batched.onnx holds 8" in caplog.text


def test_info_still_answers_after_the_bundle_folder_is_moved_while_its_model_runs(copy: Path, tmp_path: Path):
    """The model runs from memory, so moving, deleting or converting again the folder it was loaded from leaves it
    answering; but info (completer/info, the server's refreshes) stat'ed every file again, and each call failed
    with a FileNotFoundError traceback in the log."""
    engine = Engine(EngineSettings(model_path=str(copy)))
    before = engine.info()["runtime_bundle_bytes"]
    copy.rename(tmp_path / "moved")
    manifest_bytes = (tmp_path / "moved" / "manifest.json").stat().st_size
    assert engine.info()["runtime_bundle_bytes"] == before - manifest_bytes  # each file as its manifest gives it
    assert engine.complete_text("file:///moved.py", "import os\nos.pa", "").suggestions


def test_a_tokenizer_that_passes_its_checksum_but_cannot_be_parsed_is_refused_naming_it(copy: Path):
    """A manifest rewritten to match a damaged tokenizer.json: the checksum passes, the parse must not crash."""
    (copy / "tokenizer.json").write_text("{garbage")
    manifest = json.loads((copy / "manifest.json").read_text())
    data = (copy / "tokenizer.json").read_bytes()
    manifest["files"]["tokenizer.json"] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ModelError, match=r"tokenizer\.json: not a tokenizer"):
        Engine(EngineSettings(model_path=str(copy)))


def test_the_opt_in_bundle_is_found_by_name_and_reads_the_lines_below():
    """modelPath "python-base" names the bundle beside the default one; it verifies, prompts in SPM order,
    and its lines take the lines below the cursor into account (the FIM prompt runs more tokens)."""
    bundle = load_bundle("python-base")
    assert bundle.path.name == "python-base" and bundle.fim_ids == (8192, 8193, 8194)
    assert bundle.runtime_bytes <= 30 * 1024 * 1024, "the issue's limit for an INT8 bundle"
    assert bundle.manifest["fim"]["order"] == "spm"
    before = "import json\n\n\ndef load(path):\n    with open(path) as handle:\n        data = "
    below = "    return data\n"
    fim = Engine(EngineSettings(model_path="python-base")).complete_text("file:///a.py", before, "", below=below)
    plain = Engine(EngineSettings(model_path="python-base", fill_in_the_middle=False)).complete_text(
        "file:///a.py", before, "", below=below)
    assert fim.suggestions and plain.suggestions
    assert fim.new_tokens > plain.new_tokens, "the lines below are in the FIM prompt"
    assert all(s.line.startswith("        data = ") for s in fim.suggestions)


def test_a_bare_name_that_is_no_bundle_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModelError, match="no-such-bundle is not a directory"):
        load_bundle("no-such-bundle")


def test_a_model_path_naming_another_tools_model_says_how_to_convert_it(tmp_path: Path):
    """A GGUF file, a Hugging Face checkpoint folder or an Ollama name set as modelPath is no bundle: the error
    gives the command that makes one of it."""
    (tmp_path / "model.gguf").write_bytes(b"GGUF\x03\x00\x00\x00")
    (tmp_path / "sha256-ab12").write_bytes(b"GGUF\x03\x00\x00\x00")  # Ollama's blobs have no suffix
    (tmp_path / "checkpoint").mkdir()
    (tmp_path / "checkpoint" / "config.json").write_text("{}")
    (tmp_path / "notes.txt").write_text("not a model")
    for named, says in ((tmp_path / "model.gguf", "is a GGUF file, not a bundle"),
                        (tmp_path / "sha256-ab12", "is a GGUF file, not a bundle"),
                        (tmp_path / "checkpoint", "is a Hugging Face checkpoint folder, not a bundle"),
                        ("ollama:qwen2.5-coder:1.5b", "names a model another tool keeps, not a bundle")):
        with pytest.raises(ModelError) as caught:
            load_bundle(named)
        assert says in str(caught.value)
        assert f"`completer convert {named} --out BUNDLE` and set modelPath to BUNDLE" in str(caught.value)
    with pytest.raises(ModelError, match="notes.txt is not a directory$"):
        load_bundle(tmp_path / "notes.txt")


def test_a_model_path_naming_a_hugging_face_id_not_downloaded_says_to_download_it(tmp_path: Path, monkeypatch):
    """ORG/NAME converts from the local Hugging Face cache; one not there is not merely "not a directory"."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.delenv("LLAMA_CACHE", raising=False)
    monkeypatch.chdir(tmp_path)
    for named in ("Qwen/Qwen2.5-Coder-1.5B", "ggml-org/Qwen2.5-Coder-1.5B-Q8_0-GGUF:Q8_0"):
        with pytest.raises(ModelError) as caught:
            load_bundle(named)
        repository = named.partition(":")[0]
        assert str(caught.value) == (
            f"model bundle not found: {named} is not a folder, and no local Hugging Face cache ({tmp_path / 'hub'}) "
            f"holds {repository}; download it first (hf download {repository}), and it is converted the first time "
            f"it is used")
    with pytest.raises(ModelError, match="has no manifest.json"):
        load_bundle(tmp_path)


def _relist(copy: Path, *names: str) -> None:
    """Write the manifest's checksums of `names` as they now are (a bundle whose sender rewrote them)."""
    manifest = json.loads((copy / "manifest.json").read_text())
    for name in names:
        data = (copy / name).read_bytes()
        manifest["files"][name] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    (copy / "manifest.json").write_text(json.dumps(manifest))


def test_a_graph_reading_weights_the_manifest_does_not_list_is_refused_and_listing_them_loads_it(copy: Path):
    """A bundle someone sent whose model.onnx keeps its weights in a file beside it that the manifest names no
    checksum for: onnxruntime would load that file unchecked (whatever it was swapped for later)."""
    onnx = pytest.importorskip("onnx")
    from onnx.external_data_helper import convert_model_to_external_data

    model = onnx.load(str(copy / "model.onnx"))
    convert_model_to_external_data(model, all_tensors_to_one_file=True, location="weights.bin", size_threshold=1024)
    onnx.save(model, str(copy / "model.onnx"))
    _relist(copy, "model.onnx")
    with pytest.raises(ModelError, match=r'model\.onnx reads "weights\.bin", which .*manifest\.json lists no checksum'):
        Engine(EngineSettings(model_path=str(copy)))
    _relist(copy, "model.onnx", "weights.bin")
    loaded = Engine(EngineSettings(model_path=str(copy)))
    assert loaded.complete_text("file:///a.py", "import os\nos.pa", "").suggestions
    data = bytearray((copy / "weights.bin").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (copy / "weights.bin").write_bytes(bytes(data))
    with pytest.raises(ModelError, match=r"weights\.bin fails its sha256 check"):
        load_bundle(copy)


def _external_tensor(name: str, location: str):
    """A one-byte uint8 initializer whose data lies in `location`."""
    from onnx import TensorProto

    tensor = TensorProto(name=name, data_type=TensorProto.UINT8, dims=[1], data_location=TensorProto.EXTERNAL)
    for key, value in (("location", location), ("length", "1")):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    return tensor


def test_external_data_is_found_in_nested_graphs_constants_functions_and_after_unknown_groups(tmp_path: Path):
    """Every place onnx.proto holds a tensor is walked: a reference hidden in an If's branch, a Constant node's
    attribute or a function's node is seen, as is one after an unknown field of the group wire type (which the
    protobuf parser onnxruntime uses skips)."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from completer.onnx_files import NotAGraph, external_files

    out = helper.make_tensor_value_info("y", TensorProto.UINT8, [1])
    branch = helper.make_graph([helper.make_node("Constant", [], ["y"], value=_external_tensor("c", "branch.bin"))],
                               "branch", [], [out])
    condition = helper.make_tensor("cond", TensorProto.BOOL, [], [True])
    graph = helper.make_graph([helper.make_node("If", ["cond"], ["y"], then_branch=branch, else_branch=branch)],
                              "g", [], [out], [condition, _external_tensor("w", "top.bin")])
    function = helper.make_function("local", "f", [], ["z"], [helper.make_node(
        "Constant", [], ["z"], value=_external_tensor("d", "function.bin"))], [helper.make_opsetid("", 17)])
    model = helper.make_model(graph, functions=[function], opset_imports=[helper.make_opsetid("", 17)])
    unknown_group = bytes([(12 << 3) | 3, 8, 1, (12 << 3) | 4])  # field 12 (unused): a group holding a varint
    path = tmp_path / "model.onnx"
    path.write_bytes(unknown_group + model.SerializeToString())
    assert external_files(path) == {"top.bin", "branch.bin", "function.bin"}
    path.write_bytes(model.SerializeToString()[:-3] + b"\xff\xff")  # cut inside a field, then a broken varint
    with pytest.raises(NotAGraph):
        external_files(path)


def test_a_graph_whose_fields_cannot_be_walked_is_refused_before_onnxruntime_reads_it(copy: Path):
    (copy / "model.onnx").write_bytes(b"\x0a\xff\xff\xff\xff\x0f" + b"\0" * 64)  # a field longer than the file
    _relist(copy, "model.onnx")
    with pytest.raises(ModelError, match=r"model\.onnx is not an ONNX graph"):
        load_bundle(copy)
