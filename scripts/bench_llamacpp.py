"""Our engine against llama.cpp on the same weights, two threads, one run with the two alternating:
a prefill of 1,000 tokens, one decode step at a 1,000-token context, and a line of 16 tokens (greedy).

    python scripts/released_shape.py --shape smollm2-135m --out /tmp/smollm2-135m     # or a real checkpoint
    python scripts/bench_llamacpp.py --source /tmp/smollm2-135m --llama-cpp LLAMA_CPP_DIR --out docs/bench_llamacpp.json

Ours: the folder converted by `completer convert` (INT8, per-channel dynamic quantization). llama.cpp: a
Q8_0 GGUF made by llama.cpp's own convert_hf_to_gguf.py from the same folder, run by llama-cpp-python
(flash attention on). LLAMA_CPP_DIR is a llama.cpp source tree: the llama-cpp-python sdist carries one in
vendor/llama.cpp (`pip download llama-cpp-python --no-binary :all: --no-deps`). `--pre-tokenizer qwen2`
names the pre-tokenizer for a tokenizer llama.cpp's converter does not recognise (released_shape.py's).
Both run the same token ids. The bundle and the GGUF are kept in --work; the bundle is converted again when
the converter's code (completer/graph/, completer/convert.py) has changed since. Our prefill runs in the
engine's 128-token chunks, llama.cpp's in one batch. The line is 16 greedy steps of one sequence (a beam of
one, each step one call of our graph with its beam step), so both do the same work whatever the weights say.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from bench_shapes import converter_digest  # noqa: E402
from completer.bundle import load_bundle  # noqa: E402
from completer.cache import DocumentState, prefix_steps  # noqa: E402
from completer.calls import drive  # noqa: E402
from completer.engine import PREFILL_CHUNK_TOKENS  # noqa: E402
from completer.runtime import Runtime  # noqa: E402
from completer.tokens import Tokens  # noqa: E402

CONVERT = """
import sys
sys.path.insert(0, {src!r}); sys.path.insert(1, {src!r} + "/gguf-py")
sys.argv = ["convert_hf_to_gguf.py", {folder!r}, "--outtype", "q8_0", "--outfile", {out!r}]
import conversion.base
if {pre!r}:
    conversion.base.TextModel.get_vocab_base_pre = lambda self, tokenizer: {pre!r}
import convert_hf_to_gguf
convert_hf_to_gguf.main()
"""


def make_gguf(source: Path, llama_cpp: Path, out: Path, pre_tokenizer: str | None) -> Path:
    if not out.is_file():
        code = CONVERT.format(src=str(llama_cpp), folder=str(source), out=str(out), pre=pre_tokenizer or "")
        subprocess.run([sys.executable, "-c", code], check=True)
    return out


def make_bundle(source: Path, out: Path) -> Path:
    """Our bundle of `source`, converted again when the code that converts it has changed since (a bundle an
    older graph builder wrote still runs, and would measure that builder's graph)."""
    stamp, code = out.parent / "converted-by", converter_digest()
    if not ((out / "manifest.json").is_file() and stamp.is_file() and stamp.read_text() == code):
        subprocess.run([sys.executable, "-m", "completer", "convert", str(source), "--out", str(out), "--force"],
                       check=True)
        stamp.write_text(code)
    return out


class Ours:
    def __init__(self, bundle: Path, threads: int) -> None:
        loaded = load_bundle(bundle)
        self.runtime = Runtime(loaded, device="cpu", threads=threads)
        self.tokens = Tokens(loaded.tokenizer_path, vocab_size=int(loaded.architecture["vocab_size"]),
                             end_of_text=loaded.end_of_text_token)
        self.state = DocumentState()

    def prefill(self, ids: list[int]) -> None:
        """In the engine's chunks (a keystroke in another document waits for one chunk at most)."""
        self.state = DocumentState()
        drive(prefix_steps(self.state, self.runtime.empty_prefix(), ids, PREFILL_CHUNK_TOKENS), self.runtime)

    def step(self, token: int, position: int) -> None:
        self.runtime.run(np.asarray([[token]]), position, self.state.prefix(), self.runtime.empty_past(1), num_beams=1)

    def line(self, token: int, position: int, steps: int) -> None:
        """One beam's steps as beam.py runs them: the graph's beam step picks the next token, the suffix KV grows."""
        past = self.runtime.empty_past(1)
        for step in range(steps):
            out = self.runtime.run(np.asarray([[token]]), position + step, self.state.prefix(), past,
                                   num_beams=1 if self.runtime.slotted else 2)
            token = int(out.tokens[0])
            # a format-3 graph gives each row's suffix KV (the one row here); older ones the kept beams'
            past = out.present if self.runtime.slotted else [(k[:1], v[:1]) for k, v in out.beam_kv]


class Theirs:
    def __init__(self, gguf: Path, threads: int, context: int) -> None:
        from llama_cpp import Llama

        self.llm = Llama(model_path=str(gguf), n_ctx=context, n_threads=threads, n_threads_batch=threads,
                         n_batch=1024, n_ubatch=1024, flash_attn=True, verbose=False)

    def prefill(self, ids: list[int]) -> None:
        self.llm.reset()
        self.llm.eval(ids)

    def step(self, token: int, position: int) -> None:
        self.llm.n_tokens = position  # drop what the last step added, keep the prefix
        self.llm.eval([token])

    def line(self, token: int, position: int, steps: int) -> None:
        self.llm.n_tokens = position
        for _ in range(steps):
            self.llm.eval([token])
            token = int(np.argmax(self.llm.scores[self.llm.n_tokens - 1]))


def measure(args: argparse.Namespace) -> dict:
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    bundle = make_bundle(Path(args.source), work / "bundle")
    gguf = make_gguf(Path(args.source), Path(args.llama_cpp), work / "model-q8_0.gguf", args.pre_tokenizer)
    ours, theirs = Ours(bundle, args.threads), Theirs(gguf, args.threads, context=2048)
    text = (Path(sysconfig.get_paths()["stdlib"]) / "argparse.py").read_text()
    ids = ours.tokens.encode(text)[:args.prefix + 1]
    prompt, last = ids[:-1], ids[-1]
    times: dict[str, dict[str, list[float]]] = {name: {"ours": [], "llama.cpp": []}
                                                for name in ("prefill", "decode_step", "line")}
    for round_ in range(args.rounds):
        order = [("ours", ours), ("llama.cpp", theirs)]
        for who, engine in (order if round_ % 2 == 0 else order[::-1]):  # alternate who goes first
            started = time.perf_counter()
            engine.prefill(prompt)
            times["prefill"][who].append((time.perf_counter() - started) * 1000)
            for _ in range(args.steps):
                started = time.perf_counter()
                engine.step(last, len(prompt))
                times["decode_step"][who].append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            engine.line(last, len(prompt), args.line_tokens)
            times["line"][who].append((time.perf_counter() - started) * 1000)
    result = {"command": " ".join(["python", "scripts/bench_llamacpp.py", *sys.argv[1:]]),
              "source": Path(args.source).name, "threads": args.threads, "prefix_tokens": len(prompt),
              "line_tokens": args.line_tokens, "rounds": args.rounds, "steps_per_round": args.steps,
              "bundle_mib": round(sum(f.stat().st_size for f in bundle.iterdir()) / 2**20, 1),
              "gguf_mib": round(gguf.stat().st_size / 2**20, 1),
              "llama_cpp_python": _version("llama_cpp_python"), "onnxruntime": _version("onnxruntime"),
              "machine": {"cpus": os.cpu_count(), "processor": platform.processor() or platform.machine()},
              "medians_ms": {}, "raw_ms": times}
    for name, pair in times.items():
        ours_ms, theirs_ms = statistics.median(pair["ours"]), statistics.median(pair["llama.cpp"])
        result["medians_ms"][name] = {"ours": round(ours_ms, 2), "llama.cpp": round(theirs_ms, 2),
                                      "ours_over_llama_cpp": round(ours_ms / theirs_ms, 2)}
    return result


def _version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def table(result: dict) -> str:
    rows = ["| measure | ours (INT8) ms | llama.cpp (Q8_0) ms | ours / llama.cpp |", "|---|---:|---:|---:|"]
    labels = {"prefill": f"prefill of {result['prefix_tokens']:,} tokens",
              "decode_step": f"one decode step at {result['prefix_tokens']:,} tokens",
              "line": f"a line of {result['line_tokens']} greedy tokens"}
    for name, row in result["medians_ms"].items():
        rows.append(f"| {labels[name]} | {row['ours']} | {row['llama.cpp']} | {row['ours_over_llama_cpp']}× |")
    return "\n".join(rows + ["", f"`{result['command']}`: {result['source']}, {result['threads']} threads, "
                                 f"{result['rounds']} rounds alternating, medians; bundle {result['bundle_mib']} MiB, "
                                 f"GGUF {result['gguf_mib']} MiB; llama-cpp-python {result['llama_cpp_python']}, "
                                 f"onnxruntime {result['onnxruntime']}."])


def ratios_table(paths: list[Path]) -> str:
    """One row per results file (its name), then the median of each group of files whose names differ only
    after their last '-' (runs of the same code, one after another): the runs of two checkouts, alternated by
    hand, side by side."""
    names = ("prefill", "decode_step", "line")
    rows = ["| run | prefill ours / llama.cpp | decode step ours / llama.cpp | line ours / llama.cpp "
            "| decode step ours ms | decode step llama.cpp ms |", "|---|---:|---:|---:|---:|---:|"]
    groups: dict[str, list[dict]] = {}
    for path in paths:
        medians = json.loads(path.read_text())["medians_ms"]
        groups.setdefault(path.stem.rsplit("-", 1)[0], []).append(medians)
        rows.append(f"| {path.stem} | " + " | ".join(f"{medians[n]['ours_over_llama_cpp']}×" for n in names)
                    + f" | {medians['decode_step']['ours']} | {medians['decode_step']['llama.cpp']} |")
    for group, runs in groups.items():
        if len(runs) > 1:
            middle = [statistics.median(run[n]["ours_over_llama_cpp"] for run in runs) for n in names]
            step = [statistics.median(run["decode_step"][k] for run in runs) for k in ("ours", "llama.cpp")]
            rows.append(f"| **{group}, median of {len(runs)}** | " + " | ".join(f"{m:.2f}×" for m in middle)
                        + f" | {step[0]:.2f} | {step[1]:.2f} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", help="the Hugging Face checkpoint folder both are made from")
    parser.add_argument("--llama-cpp", help="a llama.cpp source tree (for convert_hf_to_gguf.py)")
    parser.add_argument("--pre-tokenizer", default=None, help="force llama.cpp's pre-tokenizer name (e.g. qwen2)")
    parser.add_argument("--work", default="/tmp/completer-bench-llamacpp", help="where the bundle and GGUF go")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--prefix", type=int, default=1000)
    parser.add_argument("--line-tokens", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3, help="decode steps timed in each round, one after another")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--table", type=Path, default=None, help="print the markdown table of a results file")
    parser.add_argument("--ratios", type=Path, nargs="+", default=None, metavar="FILE",
                        help="print the ratios of several results files, a row each, and each group's median")
    args = parser.parse_args()
    if args.ratios:
        try:
            print(ratios_table(args.ratios))
        except (OSError, ValueError, KeyError, TypeError) as error:
            parser.error(f"--ratios: not results written by --out ({error})")
        return
    if args.table:
        print(table(json.loads(args.table.read_text())))
        return
    if not (args.source and args.llama_cpp):
        parser.error("--source and --llama-cpp are needed to measure")
    if min(args.rounds, args.steps) < 1:
        parser.error("--rounds and --steps must be at least 1")
    result = measure(args)
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(table(result))


if __name__ == "__main__":
    main()
