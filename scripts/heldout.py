"""The held-out package benchmark's files: whole pinned releases that no corpus trains on.

    python scripts/heldout.py          # writes <cache dir>/heldout/val.jsonl; eval.py --packages reads it

scripts/heldout_packages.txt pins the releases (pure Python, permissive licenses) and names their
modules; corpus.py's lists and the GPU corpus (scripts/site_corpus.py) leave them out, vendored copies
included. Here each release is downloaded with pip, and its .py files outside test directories pass
corpus.py's filters into one jsonl in the shape of a corpus split, so eval.py samples positions from it
as from a validation split. A package's files are the model's whole view of that package: nothing of it
was seen in training, unlike the card's older split by file inside the training packages.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import archive_files, archive_release, content_digest, normalise, pin_release, rejection  # noqa: E402
from paths import cache_dir  # noqa: E402
from site_corpus import HELDOUT_LIST, TEST_DIRS, read_heldout  # noqa: E402


def heldout_dir() -> Path:
    return cache_dir() / "heldout"


def download(pins: list[str], dest: Path) -> dict[str, Path]:
    """Each pin's wheel or sdist, fetched once; a pin pip cannot fetch stops the build (a smaller benchmark
    would not be the same benchmark)."""
    dest.mkdir(parents=True, exist_ok=True)
    found = {}
    for pin in pins:
        have = [p for p in dest.iterdir() if archive_release(p) == pin_release(pin)]
        if not have:
            result = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(dest),
                                     pin], capture_output=True, text=True)
            if result.returncode != 0:
                raise SystemExit(f"heldout.py: pip could not download {pin}: {result.stderr.strip()[-300:]}")
            have = [p for p in dest.iterdir() if archive_release(p) == pin_release(pin)]
        if not have:
            raise SystemExit(f"heldout.py: pip downloaded no archive named for {pin} into {dest}")
        found[pin] = sorted(have)[0]
    return found


def build(out: Path, list_path: Path = HELDOUT_LIST) -> dict:
    """Write out/val.jsonl from the pinned releases, and return its summary (files and lines per package)."""
    pins, _ = read_heldout(list_path)
    archives = download(pins, out / "downloads")
    summary: dict = {"packages": {}, "rejected": {}, "duplicates": 0}
    seen: set[str] = set()
    tmp = out / "val.jsonl.tmp"
    with open(tmp, "w") as handle:
        for pin, archive in archives.items():
            kept = lines = 0
            for item in archive_files(archive):
                parts = item.path.split("/")[:-1]
                if any(part in TEST_DIRS or part.endswith(".data") for part in parts) or item.path.endswith("setup.py"):
                    continue  # tests, and a wheel's .data/scripts copies of its modules
                reason = rejection(item.text)
                if reason:
                    summary["rejected"][reason] = summary["rejected"].get(reason, 0) + 1
                    continue
                text = normalise(item.text)
                if content_digest(text) in seen:
                    summary["duplicates"] += 1
                    continue
                seen.add(content_digest(text))
                handle.write(json.dumps({"origin": pin, "path": item.path, "text": text}) + "\n")
                kept += 1
                lines += text.count("\n")
            summary["packages"][pin] = {"files": kept, "lines": lines}
    tmp.replace(out / "val.jsonl")
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def heldout_val(list_path: Path = HELDOUT_LIST) -> Path:
    """The benchmark's jsonl, built on first use and rebuilt when the list changes."""
    out = heldout_dir()
    stamp = out / "list.txt"
    if not (out / "val.jsonl").exists() or not stamp.exists() or stamp.read_text() != list_path.read_text():
        build(out, list_path)
        stamp.write_text(list_path.read_text())
    return out / "val.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", type=Path, default=HELDOUT_LIST)
    args = parser.parse_args()
    path = heldout_val(args.list)
    summary = json.loads((path.parent / "summary.json").read_text())
    for pin, counts in summary["packages"].items():
        print(f"{pin}: {counts['files']} files, {counts['lines']:,} lines")
    print(f"{path}")


if __name__ == "__main__":
    main()
