"""Models already in the local Hugging Face cache (completer/hf_cache.py): `completer convert ORG/NAME` reads a
snapshot laid out as the Hugging Face libraries lay it out (refs, snapshots of symlinks into blobs), and
`completer models` lists what the cache holds. Nothing is downloaded: the cache is built here."""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("transformers")  # the test extra installs it; CI fails on a skip (scripts/test.sh)

from hf_models import checkpoint  # noqa: E402

from completer.cli import main as cli_main  # noqa: E402
from completer.hf_cache import cached_models, cached_snapshot, hub_cache  # noqa: E402

COMMIT = "0123456789abcdef0123456789abcdef01234567"
OLDER = "fedcba9876543210fedcba9876543210fedcba98"


def _cache_entry(hub: Path, repository: str, folder: Path, commit: str = COMMIT, ref: str | None = "main") -> Path:
    """`folder`'s files as the snapshot `commit` of `repository` in the cache at `hub`: each file a symlink into
    blobs/ named by its digest, and refs/`ref` naming the commit."""
    entry = hub / f"models--{repository.replace('/', '--')}"
    snapshot = entry / "snapshots" / commit
    (entry / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot.mkdir(parents=True)
    for file in folder.iterdir():
        digest = hashlib.sha256(file.read_bytes()).hexdigest()
        shutil.copyfile(file, entry / "blobs" / digest)
        (snapshot / file.name).symlink_to(Path("..") / ".." / "blobs" / digest)
    if ref is not None:
        (entry / "refs").mkdir(exist_ok=True)
        (entry / "refs" / ref).write_text(commit)
    return snapshot


@pytest.fixture(scope="module")
def hub(tmp_path_factory) -> Path:
    """A cache with a convertible tiny model (two snapshots, main naming the newer), one with only a pickle, and
    one of a model type the converter does not know."""
    root = tmp_path_factory.mktemp("hf")
    checkpoint(root / "tiny", "qwen2", tied=True)
    hub = root / "hub"
    _cache_entry(hub, "acme/tiny-coder", root / "tiny")
    _cache_entry(hub, "acme/tiny-coder", root / "tiny", commit=OLDER, ref=None)
    pickled = root / "pickled"
    pickled.mkdir()
    for name in ("config.json", "tokenizer.json"):
        shutil.copyfile(root / "tiny" / name, pickled / name)
    (pickled / "pytorch_model.bin").write_bytes(b"not loaded")
    _cache_entry(hub, "acme/pickled", pickled)
    encoder = root / "encoder"
    encoder.mkdir()
    (encoder / "config.json").write_text(json.dumps({"model_type": "bert"}))
    _cache_entry(hub, "acme/encoder", encoder)
    return hub


def test_the_cache_is_where_the_hugging_face_libraries_look(monkeypatch, tmp_path):
    for name in ("HF_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert hub_cache() == tmp_path / ".cache" / "huggingface" / "hub"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert hub_cache() == tmp_path / "xdg" / "huggingface" / "hub"
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert hub_cache() == tmp_path / "home" / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    assert hub_cache() == tmp_path / "cache"


def test_a_snapshot_is_found_by_its_branch_or_its_commit_and_never_by_a_path(hub):
    assert cached_snapshot("acme/tiny-coder", hub) == hub / "models--acme--tiny-coder" / "snapshots" / COMMIT
    assert cached_snapshot("acme/tiny-coder", hub, OLDER).name == OLDER
    assert cached_snapshot("acme/tiny-coder", hub, "v2") is None  # a tag the cache has no record of
    assert cached_snapshot("acme/pickled", hub).name == COMMIT
    for missing in ("acme/other", "../acme/tiny-coder", "acme/../tiny", "acme", "/etc/passwd"):
        assert cached_snapshot(missing, hub) is None


def test_models_lists_the_cache_and_says_which_convert(hub, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    for name in ("HOME", "OLLAMA_MODELS", "LLAMA_CACHE"):  # no other store of this machine's is listed
        monkeypatch.setenv(name, str(tmp_path / name))
    assert [m.repository for m in cached_models()] == ["acme/encoder", "acme/pickled", "acme/tiny-coder"]
    assert cli_main(["models", "--json"]) == 0
    rows = {row["id"]: row for row in json.loads(capsys.readouterr().out)["models"]}
    assert rows["acme/tiny-coder"]["convertible"] and rows["acme/tiny-coder"]["model_type"] == "qwen2"
    assert rows["acme/pickled"]["model_type"] == "qwen2" and not rows["acme/pickled"]["convertible"]
    assert "pickles" in rows["acme/pickled"]["why_not"]
    assert "'bert' is not supported" in rows["acme/encoder"]["why_not"]
    assert cli_main(["models"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "Hugging Face cache:" and len(lines) == 4
    assert "completer convert acme/tiny-coder --out BUNDLE" in lines[3]
    monkeypatch.setenv("HF_HUB_CACHE", str(hub / "nowhere"))
    assert cli_main(["models"]) == 0
    assert capsys.readouterr().out.startswith(f"no models found (Hugging Face cache: {tmp_path / 'LLAMA_CACHE'}, "
                                              f"{hub / 'nowhere'}")


def test_convert_reads_a_cached_model_by_its_id_and_names_it_in_the_bundle(hub, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    monkeypatch.chdir(tmp_path)
    assert cli_main(["convert", "acme/tiny-coder", "--out", str(tmp_path / "bundle"), "--context", "128"]) == 0
    assert "from the local Hugging Face cache" in capsys.readouterr().err
    manifest = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    assert manifest["source"]["folder"] == "acme/tiny-coder" and manifest["source"]["revision"] == COMMIT
    assert manifest["source"]["license"] == "apache-2.0"  # the snapshot's README.md, read through its symlink
    card = (tmp_path / "bundle" / "MODEL.md").read_text()
    assert f"completer convert acme/tiny-coder --revision {COMMIT} --out" in card
    assert f"from `acme/tiny-coder` at commit `{COMMIT}` in the local Hugging Face cache" in card
    assert cli_main(["convert", "acme/tiny-coder", "--revision", OLDER, "--out", str(tmp_path / "older"),
                     "--context", "128"]) == 0
    assert json.loads((tmp_path / "older" / "manifest.json").read_text())["source"]["revision"] == OLDER


def test_an_id_the_cache_lacks_or_cannot_convert_is_one_line_and_writes_nothing(hub, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    monkeypatch.chdir(tmp_path)
    for argv, says in ((["acme/other"], "download it first (hf download acme/other)"),
                       (["acme/tiny-coder", "--revision", "v2"], "holds a snapshot of acme/tiny-coder at 'v2'"),
                       (["acme/pickled"], "pickle")):
        assert cli_main(["convert", *argv, "--out", str(tmp_path / "out"), "--context", "128"]) == 2
        err = capsys.readouterr().err.strip().splitlines()  # where it read from, then why not
        assert len(err) <= 2 and err[-1].startswith("completer convert: ") and says in err[-1], err
        assert not (tmp_path / "out").exists()


def test_a_folder_of_that_name_here_is_read_before_the_cache(hub, monkeypatch, tmp_path, capsys):
    """`acme/tiny-coder` is first a relative path, as it always was; the cache is asked only when no such folder
    exists."""
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    monkeypatch.chdir(tmp_path)
    shutil.copytree(hub / "models--acme--tiny-coder" / "snapshots" / COMMIT, tmp_path / "acme" / "tiny-coder")
    assert cli_main(["convert", "acme/tiny-coder", "--out", str(tmp_path / "bundle"), "--context", "128"]) == 0
    assert "Hugging Face cache" not in capsys.readouterr().err
    assert json.loads((tmp_path / "bundle" / "manifest.json").read_text())["source"]["folder"] == "tiny-coder"


def test_a_revision_the_cache_has_no_record_of_is_refused_and_only_a_cached_model_takes_one(tmp_path, monkeypatch,
                                                                                             capsys):
    """With one snapshot, recorded as main, --revision v2 is not that snapshot; and --revision means nothing for a
    folder or a file."""
    checkpoint(tmp_path / "tiny", "qwen2", tied=True)
    hub = tmp_path / "hub"
    _cache_entry(hub, "acme/one", tmp_path / "tiny")
    assert cached_snapshot("acme/one", hub, "v2") is None and cached_snapshot("acme/one", hub).name == COMMIT
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    for source, says in (("acme/one", "holds a snapshot of acme/one at 'v2'"), (str(tmp_path / "tiny"), "--revision names")):
        assert cli_main(["convert", source, "--revision", "v2", "--out", str(tmp_path / "out")]) == 2
        assert says in capsys.readouterr().err.strip().splitlines()[-1]
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.setenv("HUGGINGFACE_HUB_CACHE", str(hub))  # the older name huggingface_hub still reads
    assert hub_cache() == hub
