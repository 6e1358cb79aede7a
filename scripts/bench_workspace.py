"""How long the workspace index takes to build, and how much memory it holds, for a folder.

    python scripts/bench_workspace.py --folder /usr/lib/python3.11 --out /tmp/workspace.json
    python scripts/bench_workspace.py --folder /tmp/repo --copy-from SITE_PACKAGES --files 5000   # a made-up repo

Runs lsp/workspace.py's indexer on its thread, as the server does, and reports the files indexed, the bytes
of source read, the seconds, the index's own estimate of its size and the process's peak RSS growth. With
--typed FILE it then times picking the snippets for each new line of FILE (from line 60, --lines of them), as
a request on a new line does, and finding the lines that follow the line above in the other files (reading
the files that hold a copy from disk): the median and p95 milliseconds of each; and on how many of those new
lines the server would pick the snippets again (lsp/workspace.py, SAME_QUERY).
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

from completer.earlier_lines import anchor_above  # noqa: E402
from lsp.workspace import WorkspaceFiles  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, required=True)
    parser.add_argument("--budget-mb", type=int, default=128, help="the index's budget (workspaceMemoryMb)")
    parser.add_argument("--copy-from", type=Path, default=None,
                        help="first fill --folder with the first --files Python files of this folder (sorted paths)")
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--min-bytes", type=int, default=0,
                        help="with --copy-from, copy only files of at least this size (a repository of larger files)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--typed", type=Path, default=None, help="a file whose new lines' snippets are timed")
    parser.add_argument("--lines", type=int, default=100)
    args = parser.parse_args()
    if args.copy_from:
        import shutil

        sources = [source for source in sorted(args.copy_from.rglob("*.py"))
                   if source.is_file() and not source.is_symlink() and source.stat().st_size >= args.min_bytes]
        for source in sources[:args.files]:
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
    if args.typed:
        import statistics

        lines = args.typed.read_text(encoding="utf-8").split("\n")
        times, follower_times = [], []
        for number in range(60, min(len(lines), 60 + args.lines)):
            before = "\n".join(lines[:number]) + "\n"
            files.forget("file:///typed.py")  # a pick every time, not the server's reuse while the names stay
            started = time.perf_counter()
            files.snippets("file:///typed.py", None, before, lambda _: None)
            times.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            anchor = anchor_above("\n".join(lines[:number]) + "\n", "")
            if anchor is not None:
                files.followers("file:///typed.py", None, anchor, lambda _: None)
            follower_times.append((time.perf_counter() - started) * 1000)
        picks = []  # as the server asks: the snippets are picked again only when the names above changed enough
        windows = files.index.windows
        files.index.windows = lambda *arguments: picks.append(1) or windows(*arguments)  # type: ignore[method-assign]
        files.forget("file:///typed.py")
        for number in range(60, min(len(lines), 60 + args.lines)):
            files.snippets("file:///typed.py", None, "\n".join(lines[:number]) + "\n", lambda _: None)
        result["new_lines_picking_snippets"] = {"picked": len(picks), "lines": len(times)}
        for key, found in (("snippets_per_new_line_ms", times), ("followers_per_new_line_ms", follower_times)):
            result[key] = {"p50": round(statistics.median(found), 2),
                           "p95": round(sorted(found)[int(0.95 * (len(found) - 1))], 2),
                           "lines": len(found), "file": args.typed.name}
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
