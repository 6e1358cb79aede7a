"""What `completer convert` costs on this machine: the wall time and the peak memory (the converting process's
largest resident set) of turning released models' shapes (scripts/released_shape.py: random bf16 weights in
the exact shape) into INT8 bundles, with `--against` another checkout's converter in turns with this tree's.

    python scripts/bench_convert.py --shapes smollm2-135m qwen2.5-coder-0.5b --against /tmp/old --rounds 2 \\
        --out docs/bench_convert.json
    python scripts/bench_convert.py --table docs/bench_convert.json

Each conversion runs in its own process (`completer convert SOURCE --out BUNDLE` through `python -c PEAK_PROBE`,
the other checkout's on its own PYTHONPATH); its peak RSS is the process's own high-water mark (VmHWM), read as it
exits. Not the kernel's ru_maxrss from wait4: that counts the image the child was spawned from before exec, so
the child of a benchmark that has loaded bundles inherits the benchmark's own size.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))

from paths import cache_dir  # noqa: E402


def source_of(shape: str) -> Path:
    """The shape's random checkpoint folder, made once and kept in the cache."""
    source = cache_dir() / "shapes" / shape / "source"
    if not (source / "config.json").is_file():
        subprocess.run([sys.executable, str(REPO / "scripts" / "released_shape.py"), "--shape", shape, "--out",
                        str(source)], check=True)
    return source


PEAK_PROBE = """
import atexit, runpy, sys
report = sys.argv.pop(1)

def peak():
    with open("/proc/self/status") as status, open(report, "w") as out:
        out.write(next(line for line in status if line.startswith("VmHWM:")).split()[1])

atexit.register(peak)
sys.argv[0] = "completer"
runpy.run_module("completer", run_name="__main__", alter_sys=True)
"""


def convert_once(tree: Path, source: Path, out: Path, *extra: str) -> dict:
    """One conversion by the checkout at `tree` into `out`: its wall time in s, its peak RSS in MB, the file's
    size and the graph's fusions."""
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(tree)}
    started = time.perf_counter()
    peak_file = out.parent / f"{out.name}.peak-kb"
    process = subprocess.Popen([sys.executable, "-c", PEAK_PROBE, str(peak_file), "convert", str(source), "--out",
                                str(out), *extra],
                               cwd=out.parent, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, _ = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    error = process.stderr.read().decode(errors="replace") if process.stderr else ""
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"bench_convert.py: {tree} could not convert {source}:\n{error[-2000:]}")
    size = sum(f.stat().st_size for f in out.iterdir() if f.name.startswith("model.onnx"))
    fusions = json.loads((out / "manifest.json").read_text())["graph_fusions"]
    peak_kb = int(peak_file.read_text())
    return {"seconds": round(seconds, 2), "peak_rss_mb": round(peak_kb / 1024, 1),
            "model_mib": round(size / 2**20, 1), "graph_fusions": fusions}


def next_tokens(bundle: Path, count: int) -> list[int]:
    """The bundle's greedy next token at each of the first `count` positions of argparse.py, one beam."""
    import sysconfig

    import numpy as np

    sys.path.insert(0, str(REPO))
    from completer.bundle import load_bundle
    from completer.runtime import Runtime
    from tokenizers import Tokenizer

    text = (Path(sysconfig.get_paths()["stdlib"]) / "argparse.py").read_text()
    ids = Tokenizer.from_file(str(bundle / "tokenizer.json")).encode(text).ids[:count]
    runtime = Runtime(load_bundle(bundle), device="cpu")
    prefix, past, found = runtime.empty_prefix(), runtime.empty_past(1), []
    for position, token in enumerate(ids):
        out = runtime.run(np.asarray([[token]]), position, prefix, past, num_beams=1)
        found.append(int(out.tokens[0]))
        past = out.carried(np.zeros(1, np.int64))
    return found


AGREEMENT_POSITIONS = 200


def run(shapes: list[str], against: Path | None, rounds: int) -> dict:
    trees = [("this tree", REPO)] + ([(f"the other checkout ({against})", against)] if against else [])
    results, agreement = [], {}
    with tempfile.TemporaryDirectory(prefix="bench-convert-") as work:
        for shape in shapes:
            source = source_of(shape)
            for round_index in range(rounds):
                order = trees if round_index % 2 == 0 else trees[::-1]  # who goes first alternates
                for name, tree in order:
                    measured = convert_once(tree, source, Path(work) / f"bundle-{trees.index((name, tree))}")
                    results.append({"shape": shape, "tree": name, "round": round_index + 1, **measured})
                    print(json.dumps(results[-1]), flush=True)
            if against:  # each converter's INT8 bundle against this tree's fp32 one: the same next tokens?
                convert_once(REPO, source, Path(work) / "fp32", "--fp32")
                exact = next_tokens(Path(work) / "fp32", AGREEMENT_POSITIONS)
                agreement[shape] = {"positions": len(exact)}
                for index, (name, _) in enumerate(trees):
                    found = next_tokens(Path(work) / f"bundle-{index}", AGREEMENT_POSITIONS)
                    agreement[shape][name] = sum(a == b for a, b in zip(found, exact))
    return {"command": "python scripts/bench_convert.py " + " ".join(sys.argv[1:]),
            "machine": f"{os.cpu_count()} CPUs ({platform.machine()}), Python {platform.python_version()}",
            "results": results, "agreement": agreement}


def table(saved: dict) -> str:
    """Medians per shape and tree, and this tree's ratio to the other's."""
    rows = ["| shape | converter | wall time s | peak RSS MB | model MiB |", "|---|---|---:|---:|---:|"]
    medians: dict[tuple[str, str], tuple[float, float]] = {}
    for shape in dict.fromkeys(r["shape"] for r in saved["results"]):
        for tree in dict.fromkeys(r["tree"] for r in saved["results"]):
            runs = [r for r in saved["results"] if r["shape"] == shape and r["tree"] == tree]
            seconds = statistics.median(r["seconds"] for r in runs)
            peak = statistics.median(r["peak_rss_mb"] for r in runs)
            medians[shape, tree] = (seconds, peak)
            rows.append(f"| {shape} | {tree} | {seconds:.1f} | {peak:,.0f} | {runs[0]['model_mib']:.1f} |")
    lines = ["\n".join(rows), "", f"`{saved['command']}` on {saved['machine']}; medians of the rounds.", ""]
    for (shape, tree), (seconds, peak) in medians.items():
        if tree != "this tree" and (shape, "this tree") in medians:
            ours = medians[shape, "this tree"]
            lines.append(f"- {shape}: this tree / {tree}: wall time {ours[0] / seconds:.2f}x, peak RSS "
                         f"{ours[1] / peak:.2f}x.")
    for shape, same in saved.get("agreement", {}).items():
        counts = "; ".join(f"{name} {count}" for name, count in same.items() if name != "positions")
        lines.append(f"- {shape}: the INT8 bundle's greedy next token equals the fp32 bundle's at, of "
                     f"{same['positions']} positions of argparse.py: {counts}.")
    for shape in dict.fromkeys(r["shape"] for r in saved["results"]):
        for tree in dict.fromkeys(r["tree"] for r in saved["results"]):
            kinds = {json.dumps(r.get("graph_fusions"), sort_keys=True) for r in saved["results"]
                     if r["shape"] == shape and r["tree"] == tree}
            lines.append(f"- {shape}, {tree}: graph fusions {', '.join(sorted(kinds))}.")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", default=["smollm2-135m"])
    parser.add_argument("--against", type=Path, default=None, help="another checkout's converter, in turns")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--table", type=Path, default=None, help="print the table of a saved run and stop")
    args = parser.parse_args()
    if args.table:
        print(table(json.loads(args.table.read_text())))
        return
    saved = run(args.shapes, args.against, args.rounds)
    if args.out:
        args.out.write_text(json.dumps(saved, indent=1) + "\n")
    print(table(saved))


if __name__ == "__main__":
    main()
