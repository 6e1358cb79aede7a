"""Models other tools downloaded, converted by the names those tools give them: `ollama:NAME` from Ollama's store
(completer/ollama_store.py), `tabby:ORG/NAME` from Tabby's (completer/tabby_store.py), ORG/NAME[:QUANT] from a
GGUF repository in the Hugging Face cache as llama.cpp's `-hf` lays it out (completer/hf_cache.py), and
`completer models` listing them with LM Studio's files (completer/local_models.py). The stores are built here,
as each tool lays its files out; nothing is downloaded."""
from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")  # the test extra installs it; CI fails on a skip (scripts/test.sh)
pytest.importorskip("gguf")

from gguf_files import rewritten, write_gguf  # noqa: E402
from hf_models import checkpoint  # noqa: E402

from completer.cli import main as cli_main  # noqa: E402
from completer.gguf_source import GGUFError, header  # noqa: E402
from completer.hf_cache import quant_tag  # noqa: E402
from completer.local_models import size_label  # noqa: E402
from completer.ollama_store import OllamaError, find, parse_name  # noqa: E402

COMMIT = "0123456789abcdef0123456789abcdef01234567"
CONTEXT = "128"
REPO = Path(__file__).resolve().parent.parent
PIP = f"{shlex.quote(sys.executable)} -m pip"  # the hints install into the interpreter that prints them


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    """A tiny Qwen2 checkpoint as GGUF files: F32, Q8_0, and one whose architecture the graph does not run."""
    root = tmp_path_factory.mktemp("gguf-stores")
    checkpoint(root / "src", "qwen2", tied=True)
    f32 = write_gguf(root / "src", root / "tiny-coder-f32.gguf", "qwen2", quantized=False)
    return {"f32": f32, "q8_0": write_gguf(root / "src", root / "tiny-coder-q8_0.gguf", "qwen2", quantized=True),
            "phi3": rewritten(f32, root / "other-phi3.gguf", architecture="phi3")}


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def ollama_store(root: Path, models: dict[str, Path | None]) -> Path:
    """An Ollama store: for each name (HOST/NAMESPACE/MODEL/TAG) a manifest naming its GGUF file's blob by digest,
    beside a template layer; None: a model Ollama keeps as tensors, with no GGUF layer."""
    for name, gguf_file in models.items():
        template = b"{{ .Prompt }}"
        template_digest = hashlib.sha256(template).hexdigest()
        layers = [{"mediaType": "application/vnd.ollama.image.template", "digest": f"sha256:{template_digest}",
                   "size": len(template)}]
        (root / "blobs").mkdir(parents=True, exist_ok=True)
        (root / "blobs" / f"sha256-{template_digest}").write_bytes(template)
        if gguf_file is None:
            layers.append({"mediaType": "application/vnd.ollama.image.tensor; name=w; dtype=BF16; shape=2,2",
                           "digest": "sha256:" + "0" * 64, "size": 8})
        else:
            digest = _digest(gguf_file)
            shutil.copyfile(gguf_file, root / "blobs" / f"sha256-{digest}")
            layers.insert(0, {"mediaType": "application/vnd.ollama.image.model", "digest": f"sha256:{digest}",
                              "size": gguf_file.stat().st_size})
        manifest = root / "manifests" / name
        manifest.parent.mkdir(parents=True, exist_ok=True)
        manifest.write_text(json.dumps({
            "schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
            "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "digest": "sha256:" + "1" * 64,
                       "size": 2},
            "layers": layers}))
    return root


def tabby_model(root: Path, model_id: str, gguf_file: Path, legacy: bool = False, sha256: str | None = None) -> Path:
    """A model folder as Tabby keeps it: the GGUF file in ggml/ (model-00001-of-00001.gguf, or before Tabby 0.11
    model.gguf) and tabby.json, its registry entry, naming the file's sha256 (under partition_urls, or `sha256`
    in the older entries)."""
    folder = root / "models" / model_id
    (folder / "ggml").mkdir(parents=True)
    target = folder / "ggml" / ("model.gguf" if legacy else "model-00001-of-00001.gguf")
    shutil.copyfile(gguf_file, target)
    digest = sha256 or _digest(gguf_file)
    entry = {"name": model_id.split("/")[1],
             "prompt_template": "<|fim_prefix|>{prefix}<|fim_suffix|>{suffix}<|fim_middle|>"}
    if legacy:
        entry.update(urls=["https://example.invalid/model.gguf"], sha256=digest)
    else:
        entry.update(partition_urls=[{"urls": ["https://example.invalid/model-00001-of-00001.gguf"], "sha256": digest}])
    (folder / "tabby.json").write_text(json.dumps(entry))
    return target


def gguf_repository(hub: Path, repository: str, gguf_files: list[Path]) -> Path:
    """A GGUF repository in the Hugging Face cache as llama.cpp's -hf and huggingface_hub lay it out: each file a
    symlink into blobs/ named by its sha256, refs/main naming the snapshot."""
    entry = hub / f"models--{repository.replace('/', '--')}"
    snapshot = entry / "snapshots" / COMMIT
    (entry / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot.mkdir(parents=True)
    for file in gguf_files:
        digest = _digest(file)
        shutil.copyfile(file, entry / "blobs" / digest)
        (snapshot / file.name).symlink_to(Path("..") / ".." / "blobs" / digest)
    (entry / "refs").mkdir()
    (entry / "refs" / "main").write_text(COMMIT)
    return snapshot


@pytest.fixture
def isolated(monkeypatch, tmp_path) -> Path:
    """Every store this test looks in lies under tmp_path: none of this machine's own models are listed."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "ollama"))
    monkeypatch.setenv("LLAMA_CACHE", str(tmp_path / "llama-cache"))
    monkeypatch.setenv("TABBY_ROOT", str(tmp_path / "tabby"))
    monkeypatch.delenv("TABBY_MODEL_CACHE_ROOT", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _convert(*argv: str) -> int:
    return cli_main(["convert", *argv, "--context", CONTEXT])


def _manifest(bundle: Path) -> dict:
    return json.loads((bundle / "manifest.json").read_text())


def _same_model(a: Path, b: Path) -> bool:
    files_a, files_b = _manifest(a)["files"], _manifest(b)["files"]
    return files_a == files_b  # every file's sha256 and size


def test_ollama_names_are_read_as_ollama_reads_them():
    assert parse_name("qwen2.5-coder") == ("registry.ollama.ai", "library", "qwen2.5-coder", "latest")
    assert parse_name("qwen2.5-coder:1.5b-base") == ("registry.ollama.ai", "library", "qwen2.5-coder", "1.5b-base")
    assert parse_name("someone/coder:v1") == ("registry.ollama.ai", "someone", "coder", "v1")
    assert parse_name("hf.co/org/Repo-GGUF:Q8_0") == ("hf.co", "org", "Repo-GGUF", "Q8_0")
    for bad in ("../../etc/passwd", "a/b/c/d", "coder:", "coder:../x", "", "/coder"):
        with pytest.raises(OllamaError, match="is not an Ollama model name"):
            parse_name(bad)


def test_an_ollama_model_converts_by_its_name_to_the_bundle_its_file_makes(files, isolated, capsys):
    ollama_store(isolated / "ollama", {"registry.ollama.ai/library/tiny-coder/0.5b": files["q8_0"],
                                       "hf.co/acme/Tiny-GGUF/Q8_0": files["q8_0"]})
    assert _convert("ollama:tiny-coder:0.5b", "--out", "by-name") == 0
    assert "checking" in capsys.readouterr().err  # its digest, before the conversion
    assert _convert(str(files["q8_0"]), "--out", "by-path") == 0
    assert _same_model(isolated / "by-name", isolated / "by-path")
    source = _manifest(isolated / "by-name")["source"]
    assert source["ollama"] == "tiny-coder:0.5b" and source["ollama_digest"] == _digest(files["q8_0"])
    card = (isolated / "by-name" / "MODEL.md").read_text()
    assert "Ollama's model `tiny-coder:0.5b`" in card and "completer convert ollama:tiny-coder:0.5b --out" in card
    assert _convert("ollama:hf.co/acme/Tiny-GGUF:Q8_0", "--out", "from-hf-co") == 0
    assert _same_model(isolated / "from-hf-co", isolated / "by-path")


def test_an_ollama_model_that_is_missing_damaged_or_not_gguf_is_one_line_and_writes_nothing(files, isolated, capsys):
    store = ollama_store(isolated / "ollama", {"registry.ollama.ai/library/tiny-coder/latest": files["q8_0"],
                                               "registry.ollama.ai/library/tensors/latest": None})
    blob = store / "blobs" / f"sha256-{_digest(files['q8_0'])}"
    with open(blob, "r+b") as handle:  # a bit flipped in the last tensor: a damaged download
        handle.seek(-3, 2)
        last = handle.read(1)
        handle.seek(-3, 2)
        handle.write(bytes([last[0] ^ 1]))
    for name, says in (("ollama:tiny-coder", "does not match its digest"), ("ollama:tensors", "has no GGUF layer"),
                       ("ollama:absent:7b", f"Ollama has no model absent:7b in {store}"),
                       ("ollama:../../x", "is not an Ollama model name")):
        assert _convert(name, "--out", "out") == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err[-1].startswith("completer convert: ") and says in err[-1], (name, err)
        assert len(err) <= 2 and not (isolated / "out").exists()
    assert _convert(str(blob), "--out", "out") == 2  # the blob by its path, as `ollama show --modelfile` names it
    assert "does not match the sha256 it is named by" in capsys.readouterr().err
    with pytest.raises(OllamaError, match="OLLAMA_MODELS"):
        find("absent")


def test_a_tabby_model_converts_by_its_id_after_its_file_is_checked(files, isolated, capsys):
    tabby_model(isolated / "tabby", "TabbyML/Tiny-Coder", files["q8_0"])
    tabby_model(isolated / "tabby", "acme/Old-Coder", files["f32"], legacy=True)
    tabby_model(isolated / "tabby", "acme/Damaged", files["q8_0"], sha256="ab" * 32)
    assert _convert("tabby:Tiny-Coder", "--out", "by-id") == 0  # TabbyML's, as Tabby reads an id without ORG/
    assert "checking it against the sha256" in capsys.readouterr().err
    assert _convert(str(files["q8_0"]), "--out", "by-path") == 0
    assert _same_model(isolated / "by-id", isolated / "by-path")
    assert _manifest(isolated / "by-id")["source"]["tabby"] == "TabbyML/Tiny-Coder"
    card = (isolated / "by-id" / "MODEL.md").read_text()
    assert "Tabby's model `TabbyML/Tiny-Coder`" in card and "completer convert tabby:TabbyML/Tiny-Coder --out" in card
    assert _convert("tabby:acme/Old-Coder", "--out", "legacy") == 0
    assert "F32" in _manifest(isolated / "legacy")["source"]["gguf_types"]
    for source, says in (("tabby:acme/Damaged", "does not match the sha256 its tabby.json names"),
                         ("tabby:StarCoder-1B", "tabby download --model TabbyML/StarCoder-1B"),
                         ("tabby:a/b/c", "is not a Tabby model id")):
        assert _convert(source, "--out", "out") == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err[-1].startswith("completer convert: ") and says in err[-1], (source, err)
        assert not (isolated / "out").exists()


def test_a_gguf_repository_in_the_cache_converts_by_its_id_and_quantization_tag(files, isolated, capsys):
    """As llama.cpp's `-hf ORG/NAME:QUANT` picks a file; with no tag, the widest file, since the bundle is INT8."""
    mmproj = isolated / "mmproj-tiny-f16.gguf"
    shutil.copyfile(files["f32"], mmproj)
    snapshot = gguf_repository(isolated / "hub", "acme/Tiny-Coder-GGUF", [files["q8_0"], files["f32"], mmproj])
    assert [quant_tag(path) for path in sorted(snapshot.iterdir())] == ["F16", "F32", "Q8_0"]
    assert _convert("acme/Tiny-Coder-GGUF:q8_0", "--out", "tagged") == 0
    assert "tiny-coder-q8_0.gguf of acme/Tiny-Coder-GGUF" in capsys.readouterr().err
    assert _convert(str(files["q8_0"]), "--out", "by-path") == 0
    assert _same_model(isolated / "tagged", isolated / "by-path")
    source = _manifest(isolated / "tagged")["source"]
    assert source["revision"] == COMMIT and source["folder"] == "acme/Tiny-Coder-GGUF/tiny-coder-q8_0.gguf"
    card = (isolated / "tagged" / "MODEL.md").read_text()
    assert f"completer convert acme/Tiny-Coder-GGUF:Q8_0 --revision {COMMIT} --out" in card
    assert "in the local Hugging Face cache" in card
    assert _convert("acme/Tiny-Coder-GGUF", "--out", "untagged") == 0
    assert "tiny-coder-f32.gguf" in capsys.readouterr().err
    assert "F32" in _manifest(isolated / "untagged")["source"]["gguf_types"]
    assert _convert("acme/Tiny-Coder-GGUF:Q4_K_M", "--out", "out") == 2
    assert "no cached GGUF file is tagged 'Q4_K_M' (cached: F32, Q8_0)" in capsys.readouterr().err
    # LLAMA_CACHE, where llama.cpp puts what -hf downloads when it is set, is read before the Hugging Face cache
    gguf_repository(isolated / "llama-cache", "acme/Other-GGUF", [files["q8_0"]])
    assert _convert("acme/Other-GGUF", "--out", "from-llama-cache") == 0
    assert _same_model(isolated / "from-llama-cache", isolated / "by-path")
    assert not (isolated / "out").exists()


def test_a_cached_gguf_file_cut_short_is_refused_before_anything_is_written(files, isolated, capsys):
    snapshot = gguf_repository(isolated / "hub", "acme/Tiny-Coder-GGUF", [files["q8_0"]])
    blob = (snapshot / files["q8_0"].name).resolve()
    blob.write_bytes(blob.read_bytes()[:-100])
    assert _convert("acme/Tiny-Coder-GGUF:Q8_0", "--out", "out") == 2
    assert "does not match the sha256 it is named by" in capsys.readouterr().err.strip().splitlines()[-1]
    assert not (isolated / "out").exists()


def test_models_lists_every_store_with_the_command_that_converts_each(files, isolated, capsys):
    weights = sum(p.numel() for p in checkpoint(isolated / "tiny", "qwen2", tied=True).parameters())
    from test_hf_cache import _cache_entry

    _cache_entry(isolated / "hub", "acme/tiny-coder", isolated / "tiny")
    gguf_repository(isolated / "hub", "acme/Tiny-Coder-GGUF", [files["q8_0"], files["f32"]])
    ollama_store(isolated / "ollama", {"registry.ollama.ai/library/tiny-coder/0.5b": files["q8_0"],
                                       "registry.ollama.ai/library/phi/latest": files["phi3"],
                                       "registry.ollama.ai/library/tensors/latest": None})
    lm_studio = isolated / "home" / ".lmstudio" / "models" / "acme" / "Tiny GGUF"
    lm_studio.mkdir(parents=True)
    shutil.copyfile(files["q8_0"], lm_studio / "tiny-coder-q8_0.gguf")
    tabby_model(isolated / "tabby", "TabbyML/Tiny-Coder", files["q8_0"])
    (isolated / "ollama" / "manifests" / "registry.ollama.ai" / "library" / "garbled").mkdir()
    (isolated / "ollama" / "manifests" / "registry.ollama.ai" / "library" / "garbled" / "latest").write_text("{oops")
    (isolated / "llama-cache").mkdir()
    (isolated / "llama-cache" / "broken.gguf").write_bytes(b"GGUF\x03\x00\x00\x00")
    assert cli_main(["models", "--json"]) == 0
    rows = {row["id"]: row for row in json.loads(capsys.readouterr().out)["models"]}
    lm_file = str(lm_studio / "tiny-coder-q8_0.gguf")
    broken = str(isolated / "llama-cache" / "broken.gguf")
    assert set(rows) == {"acme/tiny-coder", "acme/Tiny-Coder-GGUF:Q8_0", "acme/Tiny-Coder-GGUF:F32",
                         "ollama:tiny-coder:0.5b", "ollama:phi:latest", "ollama:tensors:latest",
                         "ollama:garbled:latest", "tabby:TabbyML/Tiny-Coder", lm_file, broken}
    convertible = {name for name, row in rows.items() if row["convertible"]}
    assert convertible == {"acme/tiny-coder", "acme/Tiny-Coder-GGUF:Q8_0", "acme/Tiny-Coder-GGUF:F32",
                           "ollama:tiny-coder:0.5b", "tabby:TabbyML/Tiny-Coder", lm_file}
    assert rows["ollama:tiny-coder:0.5b"]["model_type"] == "qwen2"
    assert rows["ollama:phi:latest"]["why_not"] == "GGUF architecture 'phi3' is not supported"
    assert "no GGUF layer" in rows["ollama:tensors:latest"]["why_not"]
    assert "cannot be read" in rows["ollama:garbled:latest"]["why_not"]
    assert "cannot be read" in rows[broken]["why_not"]
    sized = {name for name, row in rows.items() if row["parameters"] == weights}  # the files' tiny qwen2, too
    assert sized == convertible | {"ollama:phi:latest"} and rows[broken]["parameters"] is None
    assert cli_main(["models"]) == 0
    out = capsys.readouterr().out
    assert all(f"  qwen2         {size_label(weights):>6}  converts: completer convert" in line
               for line in out.splitlines() if "completer convert" in line)
    assert [line for line in out.splitlines() if not line.startswith(" ")] == [
        "Hugging Face cache:", "Ollama:", "Tabby:", "LM Studio:", "llama.cpp cache:"]
    assert f"completer convert '{lm_file}' --out BUNDLE" in out  # quoted: the folder's name has a space
    for name in convertible - {lm_file}:
        assert f"completer convert {name} --out BUNDLE" in out
    # each listed command converts
    for number, name in enumerate(["ollama:tiny-coder:0.5b", "tabby:TabbyML/Tiny-Coder", lm_file]):
        assert _convert(name, "--out", f"b{number}") == 0


def test_a_checkpoint_whose_download_did_not_finish_is_listed_as_not_converting(isolated, capsys):
    """A cached checkpoint missing a shard its index names, or whose weights link to a blob not there (a download
    cut short), was listed as converting, with the size of what was there; converting it then failed. Now the list
    says why not, as the converter does."""
    from test_hf_cache import _cache_entry

    checkpoint(isolated / "tiny", "qwen2", tied=True)
    sharded = _cache_entry(isolated / "hub", "acme/sharded", isolated / "tiny")
    (sharded / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        "model.embed_tokens.weight": "model.safetensors", "lm_head.weight": "model-00002-of-00002.safetensors"}}))
    cut = _cache_entry(isolated / "hub", "acme/cut-short", isolated / "tiny")
    (cut / "model.safetensors").resolve().unlink()
    assert cli_main(["models", "--json"]) == 0
    rows = {row["id"]: row for row in json.loads(capsys.readouterr().out)["models"]}
    unfinished = " missing (a download that did not finish?)"
    assert rows["acme/sharded"]["why_not"] == "model-00002-of-00002.safetensors" + unfinished
    assert rows["acme/cut-short"]["why_not"] == "model.safetensors" + unfinished
    assert not rows["acme/sharded"]["convertible"] and not rows["acme/cut-short"]["convertible"]
    assert rows["acme/sharded"]["parameters"] is None
    for name in ("acme/sharded", "acme/cut-short"):  # as the converter finds
        assert _convert(name, "--out", str(isolated / name.replace("/", "-"))) == 2
    assert "missing" in capsys.readouterr().err


def test_models_says_where_it_looked_when_it_finds_nothing(isolated, capsys):
    assert cli_main(["models"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("no models found") and str(isolated / "ollama") in out and str(isolated / "hub") in out


def test_the_header_reader_agrees_with_gguf_and_refuses_a_damaged_header(files, tmp_path):
    import gguf

    keys = ("general.architecture", "general.name", "tokenizer.ggml.model", "tokenizer.ggml.pre",
            "tokenizer.ggml.eos_token_id", "qwen2.block_count")
    reader = gguf.GGUFReader(str(files["q8_0"]))
    assert header(files["q8_0"], keys) == {key: reader.fields[key].contents() for key in keys}
    counted = header(files["q8_0"], ("general.architecture",), parameters=True)
    assert counted == {"general.architecture": "qwen2", "parameters": sum(int(t.n_elements) for t in reader.tensors)}
    data = files["q8_0"].read_bytes()
    tensors_start = min(int(t.field.offset) for t in reader.tensors)  # where the tensor descriptions begin
    for cut in (3, 30, 200, 5000, tensors_start + 5):
        (tmp_path / "cut.gguf").write_bytes(data[:cut])
        with pytest.raises(GGUFError):
            header(tmp_path / "cut.gguf", ("split.count",), parameters=True)  # the whole header is read


def test_sizes_are_labelled_as_model_names_give_them():
    assert [size_label(n) for n in (None, 98_304, 134_515_008, 494_032_768, 1_543_714_304, 7_241_732_096)] == [
        "?", "98K", "135M", "494M", "1.5B", "7.2B"]


def test_models_lists_without_the_convert_extra_and_says_what_converting_needs(files, isolated):
    """Listing reads only headers and configs: a Python without onnx and gguf lists the models as they will
    convert, and names the extra that `completer convert` needs."""
    import subprocess
    import sys

    ollama_store(isolated / "ollama", {"registry.ollama.ai/library/tiny-coder/0.5b": files["q8_0"]})
    blocked = ("import sys; sys.modules['onnx'] = sys.modules['gguf'] = None; from completer.cli import main; "
               "sys.exit(main(sys.argv[1:]))")
    for argv in (["models", "--json"], ["models"], ["convert", "ollama:tiny-coder:0.5b", "--out", "out"]):
        done = subprocess.run([sys.executable, "-c", blocked, *argv], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "PYTHONPATH": str(REPO)})  # this checkout's completer
        if argv == ["models", "--json"]:
            listed = json.loads(done.stdout)
            assert done.returncode == 0 and listed["convert_extra"] is False
            assert [(row["id"], row["convertible"]) for row in listed["models"]] == [("ollama:tiny-coder:0.5b", True)]
        elif argv == ["models"]:
            assert done.returncode == 0 and "converts: completer convert ollama:tiny-coder:0.5b" in done.stdout
            assert done.stdout.splitlines()[-1].startswith("completer convert needs the convert extra (onnx is missing)")
        else:
            assert done.returncode == 2 and "needs the convert extra" in done.stderr.strip().splitlines()[-1]
            assert "Traceback" not in done.stderr and not (isolated / "out").exists()
        if argv != ["models", "--json"]:  # no `completer` on a package index: the checkout it is installed from
            assert f"{PIP} install -e '{REPO}[convert]'" in done.stdout + done.stderr, done.stdout + done.stderr


def test_a_module_that_is_there_but_will_not_load_is_not_called_missing(files, tmp_path):
    """A gguf too old for the converter (no GGUFReader) is not 'missing': the one line says what failed to load
    and that upgrading the extra may help."""
    import subprocess
    import sys

    (tmp_path / "old" / "gguf").mkdir(parents=True)
    (tmp_path / "old" / "gguf" / "__init__.py").write_text("__version__ = '0.1'\n")  # no GGUFReader
    done = subprocess.run([sys.executable, "-m", "completer", "convert", str(files["q8_0"]), "--out",
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": f"{tmp_path / 'old'}{os.pathsep}{REPO}"})
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert last.startswith("completer convert: cannot import name 'GGUFReader' from 'gguf'") and "missing" not in last
    assert last.endswith(f"upgrading the convert extra may help: {PIP} install -e '{REPO}[convert]' --upgrade)")
    assert not (tmp_path / "out").exists()


def test_a_converter_without_sympy_says_so_in_one_line(tmp_path):
    """onnxruntime's transformer optimizer, which fuses the graph, needs sympy, which onnxruntime itself no
    longer installs: the convert extra brings it, and a Python without it gets one line, not a traceback."""
    import subprocess
    import sys

    checkpoint(tmp_path / "src", "llama")
    blocked = "import sys; sys.modules['sympy'] = None; from completer.cli import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run([sys.executable, "-c", blocked, "convert", str(tmp_path / "src"), "--out",
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last == f"completer convert: needs the convert extra (sympy is missing): {PIP} install -e '{REPO}[convert]'"
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()


def test_what_an_adversarial_review_found_on_real_disks(files, isolated, capsys):
    """A GGUF repository that carries a config.json too (TheBloke's do), an Ollama host with a port, a file
    whose own tag picks another, a FIFO named like a model, a symlink loop: each converts or is one line, and
    nothing hangs."""
    snapshot = gguf_repository(isolated / "hub", "acme/Bloke-GGUF", [files["q8_0"]])
    (snapshot / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
    assert _convert("acme/Bloke-GGUF", "--out", "bloke") == 0
    assert _convert(str(files["q8_0"]), "--out", "by-path") == 0
    assert _same_model(isolated / "bloke", isolated / "by-path")
    ollama_store(isolated / "ollama", {"localhost:5000/team/tiny/v1": files["q8_0"]})
    assert _convert("ollama:localhost:5000/team/tiny:v1", "--out", "ported") == 0
    # two files of one tag: the one picked by another word is recorded with that word, which picks it again
    twice = isolated / "twice"
    twice.mkdir()
    for name in ("a-tiny-q8_0.gguf", "b-tiny-q8_0.gguf"):
        shutil.copyfile(files["q8_0"], twice / name)
    gguf_repository(isolated / "hub", "acme/Twice-GGUF", sorted(twice.iterdir()))
    assert _convert("acme/Twice-GGUF:b-tiny", "--out", "second") == 0
    assert f"completer convert acme/Twice-GGUF:b-tiny --revision {COMMIT}" in (isolated / "second" / "MODEL.md").read_text()
    capsys.readouterr()
    fifo = gguf_repository(isolated / "hub", "acme/Fifo-GGUF", []) / "tiny-q8_0.gguf"
    os.mkfifo(fifo)
    loop = isolated / "loop.gguf"
    loop.symlink_to(isolated / "loop2.gguf")
    (isolated / "loop2.gguf").symlink_to(loop)
    for source, says in (("acme/Fifo-GGUF:Q8_0", "no config.json and no GGUF file"),
                         (str(loop), "not a folder or a GGUF file")):
        assert _convert(source, "--out", "out") == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and says in err[0], err
    assert cli_main(["models", "--json"]) == 0  # the FIFO is not opened, so this returns
    rows = {row["id"]: row for row in json.loads(capsys.readouterr().out)["models"]}
    assert rows["acme/Bloke-GGUF:Q8_0"]["convertible"] and "ollama:localhost:5000/team/tiny:v1" in rows
    assert rows["acme/Fifo-GGUF"]["why_not"] == "no config.json and no GGUF model file"


def test_models_lists_past_fifos_where_a_checkpoints_files_or_tabbys_entry_would_be(files, isolated, capsys):
    """A FIFO blocks whoever opens it until a writer comes: a cached checkpoint's config.json and safetensors
    files, and Tabby's tabby.json, are read only when they are regular files, so `completer models` returns."""
    for repository, fifo in (("acme/fifo-config", "config.json"), ("acme/fifo-weights", "model.safetensors")):
        snapshot = gguf_repository(isolated / "hub", repository, [])
        for name in ("config.json", "model.safetensors"):
            if name == fifo:
                os.mkfifo(snapshot / name)
            else:
                (snapshot / name).write_text(json.dumps({"model_type": "qwen2"}) if name == "config.json" else "")
        (snapshot / "tokenizer.json").write_text("{}")
    tabby_model(isolated / "tabby", "TabbyML/Fifo", files["q8_0"])
    (isolated / "tabby" / "models" / "TabbyML" / "Fifo" / "tabby.json").unlink()
    os.mkfifo(isolated / "tabby" / "models" / "TabbyML" / "Fifo" / "tabby.json")
    assert cli_main(["models", "--json"]) == 0
    rows = {row["id"]: row for row in json.loads(capsys.readouterr().out)["models"]}
    assert rows["acme/fifo-config"]["model_type"] is None and rows["acme/fifo-weights"]["parameters"] is None
    assert rows["tabby:TabbyML/Fifo"]["convertible"]  # its file is there; no sha256 to check it against


def test_a_file_that_names_no_pre_tokenizer_is_split_as_llama_cpp_splits_it_with_a_warning(files, isolated, capsys):
    """Files converted before llama.cpp recorded a pre-tokenizer: llama.cpp runs them with its default splits
    and warns; so does the converter, and the model card says so."""
    old = rewritten(files["f32"], isolated / "old.gguf", drop=("tokenizer.ggml.pre",))
    assert "tokenizer.ggml.pre" not in header(old, ("tokenizer.ggml.pre", "split.count"))
    assert _convert(str(old), "--out", "old-bundle") == 0
    assert "names no pre-tokenizer" in capsys.readouterr().err
    assert "text is split as llama.cpp splits it then" in (isolated / "old-bundle" / "MODEL.md").read_text()


def test_models_names_the_places_it_cannot_read_and_survives_names_that_are_not_utf8(files, isolated, capsys,
                                                                                     monkeypatch):
    import subprocess
    import sys

    lm_studio = isolated / "home" / ".lmstudio" / "models"
    lm_studio.mkdir(parents=True)
    shutil.copyfile(files["q8_0"], lm_studio / os.fsdecode(b"caf\xe9-q8_0.gguf"))
    done = subprocess.run([sys.executable, "-m", "completer", "models"], capture_output=True, timeout=120,
                          env={**os.environ, "PYTHONIOENCODING": "utf-8", "PYTHONPATH": str(REPO)})
    assert done.returncode == 0 and b"caf\\udce9-q8_0.gguf" in done.stdout, done.stderr
    store = str(isolated / "ollama")
    real_scandir = os.scandir

    def denied(path):  # as this user meets the Ollama service's store on Linux (root reads everything)
        if str(path) == store:
            raise PermissionError(13, "Permission denied")
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", denied)
    (isolated / "ollama").mkdir()
    assert cli_main(["models"]) == 0
    assert f"Ollama: cannot read {store} (Permission denied); its models are not listed" in capsys.readouterr().out
    assert cli_main(["models", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["unreadable"] == [f"{store} (Permission denied)"]


def test_models_lists_past_folders_this_user_may_list_but_not_enter(files, isolated, capsys, monkeypatch):
    """A folder with read but no search permission (what `chmod -R 644` leaves, or another user's 0744 folder):
    its names are listed, but looking at any of them fails. The PermissionError ended `completer models` with a
    traceback (an Ollama or Tabby folder hid the whole store); now each such file is listed, with the reason where
    its header cannot be read, and every other model is still listed."""
    lm_studio = isolated / "home" / ".lmstudio" / "models"
    for folder in ("pub/open", "pub/shut"):
        (lm_studio / folder).mkdir(parents=True)
        shutil.copyfile(files["q8_0"], lm_studio / folder / "tiny-q8_0.gguf")
    ollama_store(isolated / "ollama", {"registry.ollama.ai/shut/tiny/latest": files["q8_0"],
                                       "registry.ollama.ai/library/tiny/latest": files["q8_0"]})
    tabby_model(isolated / "tabby", "Shut/Tiny", files["q8_0"])
    tabby_model(isolated / "tabby", "TabbyML/Tiny", files["q8_0"])
    shut = [str(lm_studio / "pub" / "shut"), str(isolated / "ollama" / "manifests" / "registry.ollama.ai" / "shut"),
            str(isolated / "tabby" / "models" / "Shut")]
    real_stat = os.stat

    def denied(path, *args, **kwargs):  # as this user meets such a folder (root enters every folder)
        if any(str(path).startswith(folder + os.sep) for folder in shut):
            raise PermissionError(13, "Permission denied", str(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", denied)
    assert cli_main(["models", "--json"]) == 0
    rows = {row["id"]: row for row in json.loads(capsys.readouterr().out)["models"]}
    assert rows[str(lm_studio / "pub" / "open" / "tiny-q8_0.gguf")]["convertible"]
    assert "Permission denied" in rows[str(lm_studio / "pub" / "shut" / "tiny-q8_0.gguf")]["why_not"]
    assert rows["ollama:tiny:latest"]["convertible"] and "ollama:shut/tiny:latest" in rows  # not the store hidden
    assert rows["tabby:TabbyML/Tiny"]["convertible"] and "tabby:Shut/Tiny" not in rows


def test_models_shows_a_name_with_control_characters_escaped_on_its_own_line(files, isolated, capsys):
    """A file name may hold a newline or a terminal's escape sequence: printed as it is, it split its model's row
    in two, or drove the terminal (here: clear the screen). Such characters are shown as Python escapes."""
    lm_studio = isolated / "home" / ".lmstudio" / "models"
    lm_studio.mkdir(parents=True)
    shutil.copyfile(files["q8_0"], lm_studio / "tiny\n\x1b[2J-q8_0.gguf")
    assert cli_main(["models"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if "tiny" in line]
    assert "\x1b" not in out and len(rows) == 1, out
    assert "tiny\\n\\x1b[2J-q8_0.gguf" in rows[0] and "converts" in rows[0], out


def test_a_cached_checkpoint_whose_config_names_no_model_type_says_why(isolated, capsys):
    """A config.json cut short, without model_type, or a link to a blob never downloaded was listed as
    "model_type None is not supported", as if the model were of a kind the converter does not read."""
    says = {"acme/cut-short": "config.json is not readable JSON", "acme/no-type": "config.json names no model_type",
            "acme/dangling": "config.json is not a readable file"}
    for repository in says:
        snapshot = gguf_repository(isolated / "hub", repository, [])
        (snapshot / "model.safetensors").write_bytes(b"")
        (snapshot / "tokenizer.json").write_text("{}")
    (isolated / "hub" / "models--acme--cut-short" / "snapshots" / COMMIT / "config.json").write_text('{"model_ty')
    (isolated / "hub" / "models--acme--no-type" / "snapshots" / COMMIT / "config.json").write_text('{"n_layer": 2}')
    (isolated / "hub" / "models--acme--dangling" / "snapshots" / COMMIT / "config.json").symlink_to("../../blobs/x")
    assert cli_main(["models", "--json"]) == 0
    rows = {row["id"]: row for row in json.loads(capsys.readouterr().out)["models"]}
    assert {repository: rows[repository]["why_not"] for repository in says} == says


def test_a_damaged_header_says_so(files, tmp_path):
    import struct

    data = files["q8_0"].read_bytes()
    key = 24 + 8 + struct.unpack_from("<Q", data, 24)[0]  # general.architecture, a text value after its type
    first = key + 4 + 8 + struct.unpack_from("<Q", data, key + 4)[0]
    (tmp_path / "cut.gguf").write_bytes(data[:first])  # the file ends after its first value of many
    with pytest.raises(GGUFError, match="the header ends before its"):
        header(tmp_path / "cut.gguf", ("split.count",))
