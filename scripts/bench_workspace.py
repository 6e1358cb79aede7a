"""How long the workspace index takes to build, and how much memory it holds, for a folder.

    python scripts/bench_workspace.py --folder /usr/lib/python3.11 --out /tmp/workspace.json
    python scripts/bench_workspace.py --folder /tmp/repo --copy-from SITE_PACKAGES --files 5000   # a made-up repo

Runs lsp/workspace.py's indexer on its thread, as the server does, and reports the files indexed, the bytes
of source read, the seconds, the index's own estimate of its size and the process's peak RSS growth.
"""
from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from lsp.workspace import WorkspaceFiles  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, required=True)
    parser.add_argument("--budget-mb", type=int, default=128, help="the index's budget (workspaceMemoryMb)")
    parser.add_argument("--copy-from", type=Path, default=None,
                        help="first fill --folder with the first --files Python files of this folder (sorted paths)")
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.copy_from:
        import shutil

        for source in sorted(args.copy_from.rglob("*.py"))[:args.files]:
            if source.is_file() and not source.is_symlink():
                target = args.folder / source.relative_to(args.copy_from)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    files = WorkspaceFiles(args.budget_mb, ("python",))
    started = time.perf_counter()
    files.start([args.folder])
    files.done.wait()
    seconds = time.perf_counter() - started
    source_bytes = sum(Path(p).stat().st_size for p in files.index.files)
    result = {"command": " ".join(["python", "scripts/bench_workspace.py", *sys.argv[1:]]),
              "folder": str(args.folder), "files": len(files.index.files), "source_mb": round(source_bytes / 2**20, 1),
              "seconds": round(seconds, 1), "index_mb": round(files.index.nbytes / 2**20, 1),
              "left_out_for_budget": files.index.skipped_for_budget,
              "peak_rss_growth_mb": round((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024, 1)}
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
