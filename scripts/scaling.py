"""Short training runs of several model shapes on the same data and the same budget, so the shape of
the next long run is picked by evidence rather than by rule of thumb.

    python scripts/scaling.py --shapes 4x6x192,8x6x192,6x8x256 --minutes 15 -- \\
        --data $C/corpus:1 --data $C/corpus-2:1 --precision bf16 --lr 2e-3

Each shape (layers x heads x width) trains from scratch with train.py, for the same wall-clock
minutes (what a run on these 2 cores costs) or the same --max-steps; everything after `--` goes to
every train.py run unchanged. A finished shape's result is kept in the scaling dir and reused when
the same command is run again, so an interrupted sweep resumes; a shape whose run was cut short is
started over, since a resumed run would get a second budget. Pause other work while it runs: the
wall-clock budget makes the comparison only as fair as the machine is quiet.
"""
from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from paths import cache_dir  # noqa: E402

TRAIN = Path(__file__).resolve().parent / "train.py"
FULL_BUDGET = 0.98  # a run that used less of its minutes than this was stopped early


@dataclass(frozen=True)
class Shape:
    n_layer: int
    n_head: int
    n_embd: int

    @property
    def name(self) -> str:
        return f"{self.n_layer}x{self.n_head}x{self.n_embd}"

    def train_args(self) -> list[str]:
        return ["--n-layer", str(self.n_layer), "--n-head", str(self.n_head), "--n-embd", str(self.n_embd)]


def parse_shapes(text: str) -> list[Shape]:
    """'4x6x192,8x6x192' -> shapes; refuses anything else with the reason."""
    shapes = []
    for spec in filter(None, (part.strip() for part in text.split(","))):
        parts = spec.split("x")
        if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise ValueError(f"shape {spec!r} is not LAYERSxHEADSxWIDTH, e.g. 8x6x192")
        shape = Shape(*map(int, parts))
        if shape.n_embd % shape.n_head:
            raise ValueError(f"shape {spec!r}: width {shape.n_embd} is not a multiple of {shape.n_head} heads")
        shapes.append(shape)
    if not shapes:
        raise ValueError("no shapes given")
    return shapes


def finished_result(run_dir: Path, command: list[str]) -> dict | None:
    """The recorded result of an earlier run of exactly this command that used its whole budget."""
    result_path = run_dir / "result.json"
    if not result_path.exists():
        return None
    result = json.loads(result_path.read_text())
    if result.get("command") != command:
        return None
    return result if result.get("complete") else None


def parameter_count(weights: Path) -> int:
    from safetensors import safe_open

    with safe_open(str(weights), framework="numpy") as handle:
        return sum(math.prod(handle.get_slice(name).get_shape()) for name in handle.keys())


def run_shape(shape: Shape, run_dir: Path, command: list[str], minutes: float, max_steps: int | None) -> dict:
    """Train `shape` from scratch in `run_dir`; its result, with whether the run used its whole budget."""
    if run_dir.exists():
        shutil.rmtree(run_dir)  # a partial run: start over rather than give it a second budget
    run_dir.mkdir(parents=True)
    started = time.time()
    with open(run_dir / "train.log", "w") as log:
        done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT)
    elapsed = time.time() - started
    if done.returncode != 0:
        tail = (run_dir / "train.log").read_text()[-1500:]
        raise SystemExit(f"scaling.py: train.py failed for shape {shape.name} (exit {done.returncode}):\n{tail}")
    state = json.loads((run_dir / "checkpoint" / "train_state.json").read_text())
    final = state["history"][-1]
    complete = state["step"] == max_steps if max_steps is not None else elapsed >= FULL_BUDGET * minutes * 60
    result = {
        "shape": shape.name, "command": command, "complete": complete,
        "parameters": parameter_count(run_dir / "checkpoint" / "model.safetensors"), "steps": state["step"], "tokens": state["tokens"],
        "minutes": round(elapsed / 60, 2), "tokens_per_s": round(state["tokens"] / elapsed),
        "val_loss": round(final["val_loss"], 4), "val_accuracy": round(final["val_accuracy"], 4),
    }
    (run_dir / "result.json").write_text(json.dumps(result, indent=1) + "\n")
    return result


def markdown(results: list[dict], shown_command: str) -> str:
    rows = [f"Command: `{shown_command}`", "",
            "| shape (layers x heads x width) | parameters | steps | tokens | tokens/s | wall minutes | "
            "validation loss | next-token accuracy |",
            "|---|---|---|---|---|---|---|---|"]
    for r in sorted(results, key=lambda r: r["val_loss"]):
        rows.append(f"| {r['shape']} | {r['parameters']:,} | {r['steps']:,} | {r['tokens']:,} | {r['tokens_per_s']:,} | "
                    f"{r['minutes']} | {r['val_loss']} | {100 * r['val_accuracy']:.1f} % |")
    return "\n".join(rows)


def main() -> None:
    argv = sys.argv[1:]
    passed = argv[argv.index("--") + 1:] if "--" in argv else []
    own = argv[:argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     usage="scaling.py --shapes L1xH1xC1,... [options] [-- train.py options]")
    parser.add_argument("--shapes", required=True, help="comma-separated LAYERSxHEADSxWIDTH, e.g. 4x6x192,8x6x192")
    parser.add_argument("--minutes", type=float, default=15.0, help="wall-clock budget of each run")
    parser.add_argument("--max-steps", type=int, default=None, help="or the same number of steps for each run")
    parser.add_argument("--dir", type=Path, default=None, help="where the runs go (default: the cache dir's scaling/)")
    parser.add_argument("--out", type=Path, default=None, help="also write the markdown table here")
    args = parser.parse_args(own)
    for forbidden in ("--n-layer", "--n-head", "--n-embd", "--out", "--init", "--minutes", "--max-steps"):
        if forbidden in passed:
            parser.error(f"{forbidden} is set by scaling.py itself, not after --")
    try:
        shapes = parse_shapes(args.shapes)
    except ValueError as error:
        parser.error(str(error))
    root = args.dir or cache_dir() / "scaling"
    results = []
    for index, shape in enumerate(shapes, 1):
        run_dir = root / shape.name
        command = [sys.executable, str(TRAIN), *shape.train_args(), "--out", str(run_dir / "checkpoint"),
                   "--minutes", str(args.minutes), *(["--max-steps", str(args.max_steps)] if args.max_steps else []),
                   *passed]
        result = finished_result(run_dir, command)
        if result:
            print(f"[{index}/{len(shapes)}] {shape.name}: reusing the finished run in {run_dir}", flush=True)
        else:
            print(f"[{index}/{len(shapes)}] {shape.name}: training ({args.minutes:g} minutes"
                  f"{f' or {args.max_steps} steps' if args.max_steps else ''}; log in {run_dir / 'train.log'})",
                  flush=True)
            result = run_shape(shape, run_dir, command, args.minutes, args.max_steps)
            if not result["complete"]:
                raise SystemExit(f"scaling.py: the run of {shape.name} stopped before its budget; run the same "
                                 f"command again to redo it")
        print(f"    validation loss {result['val_loss']} after {result['tokens']:,} tokens", flush=True)
        results.append(result)
    table = markdown(results, "python scripts/scaling.py " + " ".join(argv))
    print("\n" + table)
    if args.out:
        args.out.write_text(table + "\n")


if __name__ == "__main__":
    main()
