"""The GPU training run, dry on the CPU: scripts/gpu_train.py on a tiny corpus, then
scripts/import_gpu_run.py, ending in a FIM bundle the engine completes lines with. Plus the parts
the run depends on: the FIM windows, the license filter, the held-out exclusion, the import's checks."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections import Counter
import sys
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

import corpus
import fim
import import_gpu_run
import site_corpus
from completer.beam import _allowed
from completer.bundle import sha256_file
from completer.engine import Engine
from completer.types import EngineSettings, ModelError

REPO = Path(__file__).resolve().parent.parent
PRE, SUF, MID, NL, EOT = 8192, 8193, 8194, 199, 0


def run_script(name: str, *args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "scripts" / name), *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def regular_modules(root: Path) -> None:
    """30 modules of short, regular lines that a tiny model learns in a few hundred steps, two of them
    named so that the split puts them in validation."""
    root.mkdir()
    validation = [m for m in range(1000) if corpus.is_validation(f"mod_{m}.py")][:2]
    for m in list(range(28)) + validation:
        body = "".join(f"value_{i} = {i} + {m}\nprint(value_{i})\n" for i in range(30))
        (root / f"mod_{m}.py").write_text(f'"""Module {m}."""\nimport os\n\n{body}')


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """gpu_train.py on the CPU over the regular modules, then import_gpu_run.py: (run dir, bundle dir)."""
    tmp_path = tmp_path_factory.mktemp("dry")
    source, out, work, bundle = tmp_path / "src", tmp_path / "out", tmp_path / "work", tmp_path / "bundle"
    regular_modules(source)
    env = {**os.environ, "COMPLETER_CACHE": str(tmp_path / "cache")}
    trained = run_script("gpu_train.py", "--device", "cpu", "--source-dir", str(source), "--shape", "2x2x64",
                         "--block", "64", "--batch-size", "16", "--max-steps", "300", "--warmup", "20",
                         "--eval-batches", "1", "--out", str(out), "--work", str(work), "--minutes", "8", env=env,
                         timeout=600)  # 300 steps take a minute on two idle cores, several on busy ones
    assert trained.returncode == 0, trained.stdout + trained.stderr
    imported = run_script("import_gpu_run.py", str(out), "--out", str(bundle), env=env)
    assert imported.returncode == 0, imported.stdout + imported.stderr
    return out, bundle


def test_dry_run_trains_imports_and_completes_a_line(dry_run: tuple[Path, Path]):
    out, bundle = dry_run
    run = json.loads((out / "run.json").read_text())
    assert run["final"] and run["step"] == 300 and run["history"][-1]["stopped"] == "max_steps"
    assert run["corpus"]["train"]["files"] + run["corpus"]["val"]["files"] == 30
    assert run["fim"]["ids"] == {"prefix": PRE, "suffix": SUF, "middle": MID}
    assert run["history"][-1]["val_loss"] < 2.5, "the regular modules are learnt (a fresh model starts at 9)"
    assert {p.name for p in out.iterdir()} == {"run.json", "tokenizer.json", "model-01-of-01.safetensors"}

    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["fim"]["ids"] == {"prefix": PRE, "suffix": SUF, "middle": MID}
    assert manifest["architecture"]["vocab_size"] == 8195, "the embedding's padding is cut back"
    assert (bundle / "training" / "gpu_run.json").exists()

    engine = Engine(EngineSettings(model_path=str(bundle)))
    assert engine.tokens.banned_ids == [PRE, SUF, MID]
    assert not _allowed(engine.tokens, [b""], [False])[0, [PRE, SUF, MID]].any(), "FIM markers are never generated"
    before = '"""Module 3."""\nimport os\n\nvalue_0 = 0 + 3\nprint(value_0)\nvalue_1 = 1 + 3\nprint(val'
    result = engine.complete_text("file:///dry.py", before, "")
    assert result.suggestions, "the trained bundle offers a line"
    assert result.suggestions[0].line.startswith("print(value_")


def test_a_fim_bundle_reads_the_lines_below_and_keeps_its_cache_while_typing(dry_run: tuple[Path, Path]):
    _, bundle = dry_run
    engine = Engine(EngineSettings(model_path=str(bundle), max_tokens=8))  # room for both in its 64-token window
    tokens = engine.tokens
    head = '"""Module 3."""\nimport os\n\nvalue_0 = 0 + 3\n'
    below = "value_1 = 1 + 3\nprint(value_1)"
    state = engine.cache.get("file:///fim.py")
    ids, healed, document, window = engine.prompts.context_ids(state, head + "print(val", True, below)
    suffix = tokens.encode(below + "\n")[:(64 - 8 - 1) // 4]  # a quarter of the window the line leaves
    assert ids[:2] == [PRE, SUF] and ids[2:2 + len(suffix)] == suffix and ids[2 + len(suffix)] == MID
    assert ids[3 + len(suffix):] == document and window == len(document), "then the text before the cursor"
    assert document[:2] == [tokens.newline_id, EOT], "the document's start as without FIM (learned positions)"
    assert healed == b"val", "token healing as without FIM"
    plain = Engine(EngineSettings(model_path=str(bundle), max_tokens=8, fill_in_the_middle=False))
    assert plain.prompts.context_ids(plain.cache.get("file:///p.py"), head + "print(val", True, below)[0] == document

    engine.typing_through = False  # every keystroke runs the model
    first = engine.complete_text("file:///fim.py", head + "print(", "", below=below)
    second = engine.complete_text("file:///fim.py", head + "print(v", "", below=below)
    assert first.new_tokens > len(suffix) and second.cached_tokens >= first.new_tokens + first.cached_tokens - 1
    assert second.new_tokens <= 2, "typing within the line only extends the cached prompt"
    assert engine.complete_text("file:///fim.py", head + "print(v", "", below="").new_tokens > 2, \
        "no lines below: the plain prompt, run anew"


def test_a_tokenizer_that_is_not_the_runs_is_refused(dry_run: tuple[Path, Path], tmp_path: Path):
    """At import, by run.json's checksum; at load, a bundle whose tokenizer and model disagree on the vocabulary."""
    out, bundle = dry_run
    swapped = tmp_path / "run"
    shutil.copytree(out, swapped)
    shutil.copyfile(REPO / "models" / "python-small" / "tokenizer.json", swapped / "tokenizer.json")
    result = run_script("import_gpu_run.py", str(swapped), "--out", str(tmp_path / "bundle"),
                        env={**os.environ, "COMPLETER_CACHE": str(tmp_path / "cache")})
    assert result.returncode != 0 and "not the tokenizer the run trained with" in result.stderr
    assert not (tmp_path / "bundle").exists()

    mixed = tmp_path / "mixed"
    shutil.copytree(bundle, mixed)
    shutil.copyfile(REPO / "models" / "python-small" / "tokenizer.json", mixed / "tokenizer.json")
    manifest = json.loads((mixed / "manifest.json").read_text())
    manifest["files"]["tokenizer.json"] = {"sha256": sha256_file(mixed / "tokenizer.json"),
                                           "bytes": (mixed / "tokenizer.json").stat().st_size}
    (mixed / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ModelError, match="8,192 tokens, but the model's vocabulary is 8,195"):
        Engine(EngineSettings(model_path=str(mixed)))


def test_document_text_never_becomes_a_marker(dry_run: tuple[Path, Path]):
    tokens = Engine(EngineSettings(model_path=str(dry_run[1]))).tokens
    ids = tokens.encode('FIM = "<|fim_middle|>"  # <|endoftext|>')
    assert not set(ids) & {PRE, SUF, MID, EOT}
    assert tokens.decode_bytes(ids) == b'FIM = "<|fim_middle|>"  # <|endoftext|>'


def test_a_run_cut_short_or_altered_is_refused(tmp_path: Path):
    """Missing or altered weights fail the import with one line naming the file, and write no bundle."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    save_file({"wte.weight": np.zeros((4, 2), np.float32)}, str(run_dir / "model-01-of-01.safetensors"))
    listed = {"model-01-of-01.safetensors": {"sha256": "0" * 64, "tensors": ["wte.weight"]}}
    (run_dir / "run.json").write_text(json.dumps({"config": {}, "fim": {}, "step": 1, "tokens": 1, "weights": listed}))
    with pytest.raises(import_gpu_run.RunError, match="checksum"):
        import_gpu_run.joined_weights(run_dir, import_gpu_run.read_run(run_dir))
    listed["model-01-of-01.safetensors"]["sha256"] = hashlib.sha256(
        (run_dir / "model-01-of-01.safetensors").read_bytes()).hexdigest()
    listed["model-02-of-02.safetensors"] = {"sha256": "0", "tensors": []}
    (run_dir / "run.json").write_text(json.dumps({"config": {}, "fim": {}, "step": 1, "tokens": 1, "weights": listed}))
    with pytest.raises(import_gpu_run.RunError, match="model-02-of-02.safetensors is missing"):
        import_gpu_run.joined_weights(run_dir, import_gpu_run.read_run(run_dir))
    (run_dir / "run.json").write_text("{")
    (run_dir / "tokenizer.json").write_text("{}")
    result = run_script("import_gpu_run.py", str(run_dir), "--out", str(tmp_path / "bundle"))
    assert result.returncode != 0 and "not readable as JSON" in result.stderr
    assert not (tmp_path / "bundle").exists()


def window_of_lines() -> np.ndarray:
    """Tokens of a window: lines of three tokens, each ending in a newline, one file boundary."""
    rows = [[10 + i, 20 + i, NL] for i in range(20)]
    tokens = [t for row in rows for t in row]
    tokens[30] = EOT
    return np.asarray(tokens, dtype=np.uint16)


@pytest.mark.parametrize("spm", [False, True])
def test_fim_windows_keep_their_length_and_end_the_middle_at_a_newline(spm: bool):
    window = window_of_lines()
    for seed in range(200):
        out = fim.fim_window(window, np.random.default_rng(seed), PRE, SUF, MID, NL, EOT, spm=spm)
        assert len(out) == len(window)
        if not (out == window).all():
            assert out[0] == PRE and (out[1] == SUF or not spm)
            assert list(out).count(PRE) == list(out).count(SUF) == list(out).count(MID) == 1
            middle_at = int(np.flatnonzero(out == MID)[0])
            tail = out[middle_at + 1:]
            assert len(tail) and tail[-1] == NL, "the middle ends with its line (this window has no other end)"
            kept = [t for t in out if t not in (PRE, SUF, MID)]
            assert len(kept) == len(window) - 3 and not Counter(kept) - Counter(window.tolist()), \
                "the window's own tokens, three fewer"


def test_fim_psm_layout_and_batch_rate():
    window = window_of_lines()
    out = fim.fim_window(window, np.random.default_rng(3), PRE, SUF, MID, NL, EOT, spm=False)
    suffix_at, middle_at = int(np.flatnonzero(out == SUF)[0]), int(np.flatnonzero(out == MID)[0])
    prefix, suffix, middle = out[1:suffix_at], out[suffix_at + 1:middle_at], out[middle_at + 1:]
    cursor = len(prefix) + 3 - min(3, len(window) - len(prefix) - len(middle))  # what the prefix gave up
    assert list(middle) == list(window[cursor:cursor + len(middle)]), "the middle is the text at the cursor"
    assert middle[-1] == NL, "the middle ends with its line"
    end = cursor + len(middle)
    assert list(suffix) == list(window[end:end + len(suffix)]), "the suffix is the text right after the middle"
    assert window[cursor + len(middle) - 1] == NL, "so the suffix starts at a line start"
    batch = np.tile(window, (400, 1))
    changed = (fim.fim_batch(batch, np.random.default_rng(0), 0.5, (PRE, SUF, MID), NL, EOT) != batch).any(axis=1)
    assert 0.4 < changed.mean() < 0.6


class FakeMetadata(dict):
    def get_all(self, key: str):
        return self.get(key + "s")


@pytest.mark.parametrize(("fields", "permissive"), [
    ({"License-Expression": "MIT"}, True),
    ({"Classifiers": ["License :: OSI Approved :: BSD License"]}, True),
    ({"License": "Apache 2.0"}, True),
    ({"License-Expression": "MPL-2.0 AND MIT"}, False),
    ({"Classifiers": ["License :: OSI Approved :: GNU General Public License v3 (GPLv3)"]}, False),
    ({"License": "UNKNOWN"}, False),
    ({"Classifiers": ["License :: OSI Approved :: BSD License"],
      "License": "Copyright SciPy Developers. " + "x " * 300 + "libgfortran: GPL-3.0-or-later WITH GCC-exception-3.1"},
     True),  # a bundled binary's notice, appended to the field, does not cover the sources
    ({"License-Expression": "MIT OR GPL-3.0-only"}, False),
    ({"License": "GNU General Public License v3"}, False),
    ({"License": "Mitigated Use License, no redistribution"}, False),
    ({"License-Expression": "Apache-2.0 WITH Commons Clause"}, False),
    ({}, False),
])
def test_only_permissive_licenses_are_kept(fields: dict, permissive: bool):
    assert site_corpus.license_of(FakeMetadata(fields))[1] is permissive


def test_heldout_packages_and_test_data_stay_out():
    pins, heldout = site_corpus.read_heldout()
    assert len(pins) >= 6 and "tomlkit" in heldout.modules and "tomlkit" in heldout.names
    assert heldout.covers_path("tomlkit/items.py")
    assert heldout.covers_path("poetry/_vendor/tomlkit/api.py"), "a vendored copy is held out too"
    assert heldout.covers_path("bottle.py")
    assert not heldout.covers_path("requests/api.py")
    assert site_corpus.is_test_data("pkg/tests/data/big_dump.py")
    assert site_corpus.is_test_data("pkg/testdata/case.py")
    assert not site_corpus.is_test_data("pkg/tests/test_api.py")
    assert not site_corpus.is_test_data("pkg/data/loader.py")


def small_run(tmp_path: Path, *args: str, out: Path | None = None, env: dict | None = None) -> tuple[
        subprocess.CompletedProcess, Path]:
    """gpu_train.py on the CPU over the regular modules, with a work dir of its own: (the result, the work dir)."""
    source, work = tmp_path / "src", tmp_path / "work"
    if not source.exists():
        regular_modules(source)
    result = run_script("gpu_train.py", "--device", "cpu", "--source-dir", str(source), "--block", "64",
                        "--batch-size", "4", "--eval-batches", "1", "--work", str(work),
                        "--out", str(out or tmp_path / "out"), *args, env=env)
    return result, work


def test_a_shape_whose_files_would_not_come_back_is_refused_before_the_corpus(tmp_path: Path):
    """The device tool returns at most 8 files and 64 MiB from $OUT: a larger model is refused in seconds, not
    after the call's ten minutes of training whose weights would then stay behind."""
    out = tmp_path / "out"
    out.mkdir()
    result, work = small_run(tmp_path, "--shape", "16x8x512", "--max-steps", "1", out=out,
                             env={**os.environ, "OUT": str(out)})
    assert result.returncode == 1, result.stdout + result.stderr
    assert "16x8x512: its files in $OUT would be 11 making 109 MiB" in result.stderr
    assert "Traceback" not in result.stderr and not (work / "summary.json").exists()


def test_the_largest_shape_trained_so_far_fits_what_a_call_returns(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    import gpu_train
    from model import GPTConfig

    monkeypatch.setenv("OUT", str(tmp_path))
    config = GPTConfig(vocab_size=8256, context_length=1024, n_layer=12, n_head=8, n_embd=384)
    gpu_train.check_return_fits(config, tmp_path)  # 4 files of weights, 47 MiB
    with pytest.raises(SystemExit, match="12x8x512: its files"):
        gpu_train.check_return_fits(GPTConfig(**{**config.to_dict(), "n_embd": 512}), tmp_path)
    gpu_train.check_return_fits(GPTConfig(**{**config.to_dict(), "n_embd": 512}), tmp_path / "elsewhere")


def test_init_without_its_weights_is_refused_before_the_corpus(tmp_path: Path):
    """`device_tree.py leave-out` keeps python-small's training weights from a device call: `--init` of that
    folder then says so at once, instead of a traceback after building the corpus."""
    left_out = tmp_path / "training"
    left_out.mkdir()
    shutil.copyfile(REPO / "models" / "python-small" / "training" / "config.json", left_out / "config.json")
    result, work = small_run(tmp_path, "--shape", "8x6x192", "--init", str(left_out), "--max-steps", "1")
    assert result.returncode == 1 and "model.safetensors is not there" in result.stderr and "--keep" in result.stderr
    assert "Traceback" not in result.stderr and not (work / "summary.json").exists()


def test_a_run_goes_on_from_the_files_an_earlier_run_returned(dry_run: tuple[Path, Path], tmp_path: Path):
    """`--init` of a returned run's folder (run.json + bf16 shards): the next call starts from its weights."""
    out, _ = dry_run
    result, _ = small_run(tmp_path, "--shape", "2x2x64", "--init", str(out), "--max-steps", "1")
    assert result.returncode == 0, result.stdout + result.stderr
    first = float(result.stdout.split("step 1 loss ")[1].split()[0])
    assert first < 4.0, f"a fresh model starts near 9, the earlier run ended below 2.5: {first}"

    altered = tmp_path / "altered"
    shutil.copytree(out, altered)
    (altered / "model-01-of-01.safetensors").write_bytes(b"cut short")
    result, _ = small_run(tmp_path, "--shape", "2x2x64", "--init", str(altered), "--max-steps", "1")
    assert result.returncode == 1 and "not the file run.json lists" in result.stderr


def test_a_save_cut_short_leaves_the_last_complete_files_alone(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """A command killed while it writes its weights: $OUT still holds the previous save, whole and as run.json
    lists it, and no partial file that would come back and count against the 8 files and 64 MiB."""
    import torch

    import gpu_train
    from model import GPT, GPTConfig

    out, staging = tmp_path / "out", tmp_path / "work" / "staging"
    out.mkdir()
    shutil.copyfile(REPO / "models" / "python-small" / "tokenizer.json", out / "tokenizer.json")
    model = GPT(GPTConfig(vocab_size=64, context_length=16, n_layer=1, n_head=1, n_embd=8))
    gpu_train.write_run(out, model, {"step": 1}, staging)
    before = {path.name: path.read_bytes() for path in out.iterdir()}

    def killed(tensors: dict, path: str) -> None:
        Path(path).write_bytes(b"half a file")
        raise KeyboardInterrupt  # the signal that ends the command, while the first file is written

    monkeypatch.setattr(gpu_train, "save_file", killed)
    with torch.no_grad():
        next(model.parameters()).add_(1.0)
    with pytest.raises(KeyboardInterrupt):
        gpu_train.write_run(out, model, {"step": 2}, staging)
    assert {path.name: path.read_bytes() for path in out.iterdir()} == before
    run = json.loads((out / "run.json").read_text())
    assert run["step"] == 1 and import_gpu_run.joined_weights(out, run)


def test_a_staged_file_moves_in_whole_across_file_systems(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """The staging folder (beside the corpus) and $OUT may be two file systems, where a rename fails: the file is
    then copied in under a temporary name and renamed, and the staged copy goes."""
    import errno

    import gpu_train

    source, target = tmp_path / "staged.bin", tmp_path / "out" / "model-01-of-01.safetensors"
    target.parent.mkdir()
    source.write_bytes(b"new weights")
    target.write_bytes(b"old weights")
    renames = []

    def replace(src, dst):
        if Path(src) == source:
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        renames.append(Path(src).name)
        return real_replace(src, dst)

    real_replace = os.replace
    monkeypatch.setattr(gpu_train.os, "replace", replace)
    monkeypatch.setattr(Path, "replace", lambda self, dst: replace(self, dst))
    gpu_train.move_in(source, target)
    assert target.read_bytes() == b"new weights" and not source.exists()
    assert renames == [".model-01-of-01.safetensors.tmp"] and [p.name for p in target.parent.iterdir()] == [target.name]
