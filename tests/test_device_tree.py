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
