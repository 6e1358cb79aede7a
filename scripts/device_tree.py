"""What a call to the lent GPU machine sends, and leaving the large files it does not need out of it.

The device tool sends the working tree: tracked files and untracked files git does not ignore, at most 64 MiB.
The tracked tree is larger (the two bundles), so the runbook (scripts/README.md) leaves out, for the length of
its calls, the files a training run or the CUDA check never reads: they are taken out of git's index (the files
stay on disk) and ignored through .git/info/exclude; `restore` puts both back. Nothing is committed meanwhile.

    python scripts/device_tree.py size          # MiB that would travel now
    python scripts/device_tree.py leave-out     # before the device calls
    python scripts/device_tree.py restore       # after them

The tool sends the checkout the session was started in, also when a helper calls from a worktree of its own:
run these there (or name it with --repo).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LIMIT_MIB = 64.0
"""What one device call may send (the device tool's README, Limits)."""
NOT_NEEDED = ("models/python-base/model.onnx", "models/python-small/training/model.safetensors")
"""The files no device call reads: python-base's graph, and python-small's training weights, which only
`gpu_train.py --init` takes (that run needs `restore` of this one file first)."""
IF_PRESENT = ("models/python-base/model_batched.onnx", "models/python-base/training/model.safetensors")
"""Left out too where they exist: what an import of a GPU run writes beside python-base's graph."""
GRAPHS = ("models/python-small/model.onnx", "models/python-small/model_batched.onnx")
"""Left out with `--graphs`: python-small's graphs, which no training call reads either; that makes room for
carrying the weights an earlier run returned (47 MiB for 12x8x384) to go on from them with `--init`."""
MARK = "# device_tree.py leave-out: restore with `python scripts/device_tree.py restore`"
END = "# device_tree.py leave-out: end"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def travelling(repo: Path) -> list[Path]:
    """The files a device call sends: tracked ones that exist, and untracked ones git does not ignore."""
    names = _git(repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
    return [repo / name for name in dict.fromkeys(names) if name and (repo / name).is_file()]


def size_mib(repo: Path, carry: tuple[Path, ...] = ()) -> float:
    """MiB a call sends: the travelling files, and the files under the paths given to the run tool's `carry`."""
    carried = [path for root in carry for path in ([root] if root.is_file() else root.rglob("*")) if path.is_file()]
    return sum(path.stat().st_size for path in [*travelling(repo), *carried]) / 2**20


def _exclude_file(repo: Path) -> Path:
    return repo / _git(repo, "rev-parse", "--git-path", "info/exclude").strip()


def leave_out(repo: Path, paths: tuple[str, ...] = NOT_NEEDED) -> None:
    """Take `paths` out of the index and ignore them, so that no device call sends them; the files stay."""
    missing = [path for path in paths if not (repo / path).is_file()]
    if missing:
        raise SystemExit(f"device_tree.py: no such file: {', '.join(missing)}")
    exclude = _exclude_file(repo)
    lines = exclude.read_text().splitlines() if exclude.exists() else []
    before, block, after = _split_block(lines)
    block += [f"/{path}" for path in paths if f"/{path}" not in block]
    exclude.parent.mkdir(parents=True, exist_ok=True)
    exclude.write_text("".join(line + "\n" for line in [*before, MARK, *block, END, *after]))
    tracked = _git(repo, "ls-files", "--", *paths).split()  # none the second time
    if tracked:
        _git(repo, "rm", "-q", "--cached", "--", *tracked)


def _split_block(lines: list[str]) -> tuple[list[str], list[str], list[str]]:
    """The exclude file's lines before leave-out's block, the block's paths, and the lines after it: lines
    added later (a `/.whl/` for carried wheels, say) are not the block's, and stay when it is restored."""
    if MARK not in lines:
        return lines, [], []
    start = lines.index(MARK)
    if END in lines[start:]:
        end = lines.index(END, start)
        return lines[:start], lines[start + 1:end], lines[end + 1:]
    end = start + 1  # written without an end line: the paths right after the mark
    while end < len(lines) and lines[end].startswith("/models/"):
        end += 1
    return lines[:start], lines[start + 1:end], lines[end:]


def restore(repo: Path) -> list[str]:
    """Undo `leave_out`: its lines out of .git/info/exclude, its files back in the index; the paths restored."""
    exclude = _exclude_file(repo)
    lines = exclude.read_text().splitlines() if exclude.exists() else []
    if MARK not in lines:
        return []
    before, block, after = _split_block(lines)
    paths = [line[1:] for line in block]
    exclude.write_text("".join(line + "\n" for line in before + after))
    if paths:
        _git(repo, "reset", "-q", "--", *paths)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("size", "leave-out", "restore"))
    parser.add_argument("--repo", type=Path, default=REPO,
                        help="the checkout the device tool sends: the session's own (default: this one)")
    parser.add_argument("--graphs", action="store_true",
                        help="leave-out: python-small's graphs too, to make room for a carried --init folder")
    parser.add_argument("--keep", nargs="*", default=[],
                        help="leave-out: send these of its files after all (python-small's training weights for "
                             "a run with --init models/python-small/training)")
    parser.add_argument("--carry", type=Path, nargs="*", default=[],
                        help="paths the run call will carry: counted in the size")
    args = parser.parse_args(argv)
    if args.action == "leave-out":
        listed = (*NOT_NEEDED, *(p for p in IF_PRESENT if (args.repo / p).is_file()), *(GRAPHS if args.graphs else ()))
        if unknown := set(args.keep) - set(listed):
            parser.error(f"--keep {' '.join(sorted(unknown))}: not among the files leave-out takes: {', '.join(listed)}")
        paths = tuple(path for path in listed if path not in args.keep)
        leave_out(args.repo, paths)
        print(f"left out {', '.join(paths)}; run `restore` after the device calls, before any commit")
    elif args.action == "restore":
        print(f"restored {', '.join(restore(args.repo)) or 'nothing (nothing was left out)'}")
    size = size_mib(args.repo, tuple(args.repo / path for path in args.carry))
    print(f"{size:.1f} MiB would travel ({'within' if size <= LIMIT_MIB else 'over'} the {LIMIT_MIB:.0f} MiB limit)")
    return 0 if size <= LIMIT_MIB or args.action == "restore" else 1


if __name__ == "__main__":
    sys.exit(main())
