"""scripts/device_tree.py on a clone of this checkout: with the files no device call reads left out, what a call
sends fits the device tool's limit (a tree grown past it again fails here, not in a GPU session's only call), and
`restore` leaves the clone as it was."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from lsp_support import REPO

sys.path.insert(0, str(REPO / "scripts"))
import device_tree  # noqa: E402


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def test_leaving_out_the_bundles_weights_fits_a_device_call_and_restore_undoes_it(tmp_path: Path):
    clone = tmp_path / "clone"
    _git(tmp_path, "clone", "-q", "--no-checkout", str(REPO), str(clone))
    _git(clone, "checkout", "-q", _git(REPO, "rev-parse", "HEAD").strip())
    (clone / "notes.txt").write_text("an untracked file travels\n")
    exclude = clone / ".git" / "info" / "exclude"
    before_exclude = exclude.read_text()
    before = device_tree.size_mib(clone)
    left_out = sum((clone / path).stat().st_size for path in device_tree.NOT_NEEDED) / 2**20
    assert {clone / "notes.txt", clone / device_tree.NOT_NEEDED[0]} <= set(device_tree.travelling(clone))

    assert device_tree.main(["leave-out", "--repo", str(clone)]) == 0  # within the limit
    assert device_tree.main(["leave-out", "--repo", str(clone)]) == 0  # twice is harmless
    after = device_tree.size_mib(clone)
    assert abs(after - (before - left_out)) < 0.01 and after <= device_tree.LIMIT_MIB, (before, after)
    runbook = " ".join((REPO / "scripts" / "README.md").read_text(encoding="utf-8").split())
    stated = re.search(r"says what would travel then \(about (\d+) MiB\)", runbook)
    assert stated and abs(float(stated[1]) - after) <= 2, f"{after:.1f} MiB travel; the runbook: {stated}"
    assert all((clone / path).is_file() for path in device_tree.NOT_NEEDED)  # the files stay on disk
    assert not set(device_tree.travelling(clone)) & {clone / path for path in device_tree.NOT_NEEDED}

    assert device_tree.restore(clone) == list(device_tree.NOT_NEEDED)
    assert exclude.read_text() == before_exclude
    assert _git(clone, "status", "--porcelain") == "?? notes.txt\n"
    assert abs(device_tree.size_mib(clone) - before) < 0.01
    assert device_tree.restore(clone) == []  # twice is harmless


def _clone(tmp_path: Path) -> Path:
    clone = tmp_path / "clone"
    _git(tmp_path, "clone", "-q", "--no-checkout", str(REPO), str(clone))
    _git(clone, "checkout", "-q", _git(REPO, "rev-parse", "HEAD").strip())
    return clone


def test_restore_keeps_the_ignores_added_after_leave_out(tmp_path: Path):
    """The device README has a session add `/.whl/` (carried wheels) to .git/info/exclude: added after
    leave-out, it stays ignored after restore, and the wheels never reach `git status`."""
    clone = _clone(tmp_path)
    exclude = clone / ".git" / "info" / "exclude"
    assert device_tree.main(["leave-out", "--repo", str(clone)]) == 0
    exclude.write_text(exclude.read_text() + "/.whl/\n")
    (clone / ".whl").mkdir()
    (clone / ".whl" / "pkg.whl").write_bytes(b"wheel")
    assert device_tree.restore(clone) == list(device_tree.NOT_NEEDED)
    assert exclude.read_text().splitlines()[-1] == "/.whl/"
    assert _git(clone, "status", "--porcelain") == ""


def test_an_imported_run_and_a_carried_init_folder_still_fit(tmp_path: Path):
    """What an import writes beside python-base's graph is left out too; `--graphs` makes room for the 47 MiB
    of a returned 12x8x384 run carried to go on from it, and `size --carry` counts the carried folder."""
    clone = _clone(tmp_path)
    (clone / "models" / "python-base" / "model_batched.onnx").write_bytes(b"\0" * 2**20)
    carried = clone / ".gpu-init"
    carried.mkdir()
    (carried / "model-01-of-04.safetensors").write_bytes(b"\0" * 47 * 2**20)
    (clone / ".git" / "info" / "exclude").write_text("/.gpu-init/\n")
    assert device_tree.main(["leave-out", "--repo", str(clone)]) == 0
    travelling = set(device_tree.travelling(clone))
    assert clone / "models" / "python-base" / "model_batched.onnx" not in travelling
    assert clone / "models" / "python-small" / "model.onnx" in travelling
    assert device_tree.main(["size", "--repo", str(clone), "--carry", ".gpu-init"]) == 1, "over 64 MiB with it"

    assert device_tree.main(["leave-out", "--graphs", "--repo", str(clone)]) == 0
    assert not set(device_tree.travelling(clone)) & {clone / path for path in device_tree.GRAPHS}
    assert device_tree.main(["size", "--repo", str(clone), "--carry", ".gpu-init"]) == 0, "within it now"

    assert set(device_tree.restore(clone)) == {*device_tree.NOT_NEEDED, *device_tree.GRAPHS,
                                               "models/python-base/model_batched.onnx"}
    assert _git(clone, "status", "--porcelain") == "?? models/python-base/model_batched.onnx\n"

    weights = "models/python-small/training/model.safetensors"  # what --init models/python-small/training reads
    assert device_tree.main(["leave-out", "--repo", str(clone), "--keep", weights]) == 0
    assert clone / weights in set(device_tree.travelling(clone))
    assert clone / device_tree.NOT_NEEDED[0] not in set(device_tree.travelling(clone))
    assert weights not in device_tree.restore(clone)
