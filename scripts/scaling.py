"""Short training runs of several model shapes on the same data and the same budget, so the shape of
the next long run is picked by evidence rather than by rule of thumb.

    python scripts/scaling.py --shapes 4x6x192,8x6x192,6x8x256 --minutes 15 -- \\
        --data $C/corpus:1 --data $C/corpus-2:1 --precision bf16 --lr 2e-3

Each shape (layers x heads x width) trains from scratch with train.py for the same wall-clock
minutes: what a run on these 2 cores costs, and what the learning-rate schedule is timed by.
Everything after `--` goes to every train.py run unchanged. A finished run's result is kept in the
scaling dir and reused when the same sweep is run again (same train.py options, same data files),
so an interrupted sweep resumes; a run that did not use its whole budget is started over, since a
resumed run would get a second one. Pause other work while it runs: a wall-clock budget makes the
comparison only as fair as the machine is quiet.
"""
from __future__ import annotations

import argparse
import json
import math
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from paths import cache_dir, corpus_dir  # noqa: E402
from shards import parse_shard  # noqa: E402

TRAIN = Path(__file__).resolve().parent / "train.py"
SET_HERE = ("--n-layer", "--n-head", "--n-embd", "--out", "--init", "--minutes", "--max-steps")  # train.py's
OWN = ("--shapes", "--minutes", "--dir", "--out")
PATH_OPTIONS = ("--data", "--val-data")  # forwarded options whose value is a dir (DIR[:WEIGHT] for --data)


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


def check_forwarded(forwarded: list[str]) -> str | None:
    """Why these train.py options cannot be forwarded, if they cannot. argparse takes `--opt=value` and any
    unambiguous prefix, so both forms are matched."""
    for token in forwarded:
        name = token.split("=", 1)[0]
        if not name.startswith("--") or len(name) < 3:
            continue
        if any(option.startswith(name) for option in SET_HERE):
            return f"{token} is set by scaling.py itself, not after --"
        if name in OWN:
            return f"{token} is scaling.py's own option: put it before --"
    return None


def dir_values(forwarded: list[str]) -> Iterator[tuple[int, str, str, str]]:
    """(token index, option, prefix, value) of each forwarded dir option: `--data=X` is one token with the
    prefix `--data=`, `--data X` two."""
    for index, token in enumerate(forwarded):
        name, equals, value = token.partition("=")
        if name not in PATH_OPTIONS:
            continue
        if equals:
            yield index, name, f"{name}=", value
        elif index + 1 < len(forwarded):
            yield index + 1, name, "", forwarded[index + 1]


def split_dir(option: str, value: str) -> tuple[Path, str]:
    """The dir in an option's value and what follows it (`:WEIGHT` for --data, read as train.py reads it)."""
    if option != "--data":
        return Path(value), ""
    directory, _ = parse_shard(value)
    return directory, "" if directory == Path(value) else ":" + value.rpartition(":")[2]


def absolute_paths(forwarded: list[str]) -> list[str]:
    """The forwarded options with the data dirs made absolute, so the same sweep matches from any dir."""
    result = list(forwarded)
    for index, option, prefix, value in dir_values(forwarded):
        directory, suffix = split_dir(option, value)
        result[index] = f"{prefix}{directory.resolve()}{suffix}"
    return result


def data_fingerprint(forwarded: list[str]) -> dict[str, int]:
    """Sizes of the token files the runs read: a rebuilt corpus at the same path is different data."""
    found = [(option, split_dir(option, value)[0]) for _, option, _, value in dir_values(forwarded)]
    dirs = [directory for _, directory in found]
    if not any(option == "--data" for option, _ in found):
        dirs.append(corpus_dir())  # train.py's default shard
    return {str(directory / split): (directory / split).stat().st_size
            for directory in dirs for split in ("train.bin", "val.bin") if (directory / split).exists()}


def parameter_count(weights: Path) -> int:
    from safetensors import safe_open

    with safe_open(str(weights), framework="numpy") as handle:
        return sum(math.prod(handle.get_slice(name).get_shape()) for name in handle.keys())


def run_train(command: list[str], log_path: Path) -> int:
    """train.py as a child; an interrupt of this script stops it (it saves) before this script exits."""
    with open(log_path, "w") as log:
        child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            return child.wait()
        except KeyboardInterrupt:
            child.send_signal(signal.SIGTERM)
            child.wait()
            raise


def run_shape(shape: Shape, run_dir: Path, command: list[str], key: dict) -> dict:
    """Train `shape` from scratch in `run_dir`; its result, with whether the run used its whole budget."""
    checkpoint = run_dir / "checkpoint"
    for stale in (run_dir / "result.json", checkpoint / "train_state.json"):
        stale.unlink(missing_ok=True)  # a partial run: start over rather than give it a second budget
    run_dir.mkdir(parents=True, exist_ok=True)
    code = run_train(command, run_dir / "train.log")
    if code != 0:
        tail = (run_dir / "train.log").read_text()[-1500:]
        raise SystemExit(f"train.py failed for shape {shape.name} (exit {code}); the end of its log:\n{tail}")
    state = json.loads((checkpoint / "train_state.json").read_text())
    final = state["history"][-1]
    result = {
        "shape": shape.name, "key": key, "complete": final.get("stopped") == "budget",
        "parameters": parameter_count(checkpoint / "model.safetensors"), "steps": state["step"],
        "tokens": state["tokens"], "minutes": round(final["seconds"] / 60, 2),
        "tokens_per_s": round(final["tokens_this_run"] / max(final["seconds"], 1e-9)),
        "val_loss": round(final["val_loss"], 4), "val_accuracy": round(final["val_accuracy"], 4),
    }
    (run_dir / "result.json").write_text(json.dumps(result, indent=1) + "\n")
    return result


def markdown(results: list[dict], shown_command: str) -> str:
    rows = [f"Command: `{shown_command}`", "",
            "| shape (layers x heads x width) | parameters | steps | tokens | tokens/s | minutes | "
            "validation loss | next-token accuracy |",
            "|---|---|---|---|---|---|---|---|"]
    for r in sorted(results, key=lambda r: r["val_loss"]):
        rows.append(f"| {r['shape']} | {r['parameters']:,} | {r['steps']:,} | {r['tokens']:,} | "
                    f"{r['tokens_per_s']:,} | {r['minutes']} | {r['val_loss']} | {100 * r['val_accuracy']:.1f} % |")
    return "\n".join(rows)


def main() -> None:
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    own, forwarded = argv[:split], argv[split + 1:]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False,
                                     usage="scaling.py --shapes L1xH1xC1,... [options] [-- train.py options]")
    parser.add_argument("--shapes", required=True, help="comma-separated LAYERSxHEADSxWIDTH, e.g. 4x6x192,8x6x192")
    parser.add_argument("--minutes", type=float, default=15.0, help="wall-clock budget of each run")
    parser.add_argument("--dir", type=Path, default=None, help="where the runs go (default: the cache dir's scaling/)")
    parser.add_argument("--out", type=Path, default=None, help="also write the markdown table here")
    args = parser.parse_args(own)
    if not args.minutes > 0:
        parser.error("--minutes must be above 0")
    problem = check_forwarded(forwarded)
    if problem:
        parser.error(problem)
    try:
        shapes = parse_shapes(args.shapes)
    except ValueError as error:
        parser.error(str(error))
    try:
        forwarded = absolute_paths(forwarded)
    except argparse.ArgumentTypeError as error:
        parser.error(str(error))
    root = args.dir or cache_dir() / "scaling"
    results = []
    for index, shape in enumerate(shapes, 1):
        run_dir = root / shape.name
        options = [*shape.train_args(), "--out", str(run_dir / "checkpoint"), "--minutes", str(args.minutes),
                   *forwarded]
        key = {"train_options": options, "data": data_fingerprint(forwarded)}
        previous = json.loads((run_dir / "result.json").read_text()) if (run_dir / "result.json").exists() else {}
        if previous.get("key") == key and previous.get("complete"):
            result = previous
            print(f"[{index}/{len(shapes)}] {shape.name}: reusing the finished run in {run_dir}", flush=True)
        else:
            print(f"[{index}/{len(shapes)}] {shape.name}: training for {args.minutes:g} minutes "
                  f"(log: {run_dir / 'train.log'})", flush=True)
            try:
                result = run_shape(shape, run_dir, [sys.executable, str(TRAIN), *options], key)
            except KeyboardInterrupt:
                raise SystemExit(f"interrupted: {shape.name} will start over when this sweep runs again") from None
            if not result["complete"]:
                raise SystemExit(f"the run of {shape.name} stopped before its budget; run the same command again "
                                 f"to redo it")
        print(f"    validation loss {result['val_loss']} after {result['tokens']:,} tokens", flush=True)
        results.append(result)
    table = markdown(results, shlex.join(["python", "scripts/scaling.py", *argv]))
    print("\n" + table)
    if args.out:
        args.out.write_text(table + "\n")


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop like Ctrl-C: the child saves first
    main()
