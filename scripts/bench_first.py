"""The first suggestion in a file opened a moment ago, against a keystroke in a file open for a while, through the
language server.

    python scripts/bench_first.py --out docs/bench_first.json

Each round asks for a suggestion at the start of a new last line (after its indentation) of a stdlib file cut to
about 1,000 tokens, in three ways, in turns: in a file opened 1 s before (`opened`: the engine prefilled its
context in the background meanwhile), in a file opened that instant (`cold`: the request pays for the whole
prefill), and in a file open for a while, whose new line was just typed (`open`: the file's KV is cached, only
the new line runs). Search-ahead is off, so no answer was searched before the request. The figure is the median
of `opened` over the median of `open` (issue 31: the first suggestion costs what a keystroke in an open file
costs, not a cold prefill).
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from bench_output import add_output_arguments, run_or_table  # noqa: E402
from bench_remote import start_server  # noqa: E402
from lsp.rawclient import RawClient  # noqa: E402

FILES = ("textwrap.py", "shlex.py", "fnmatch.py", "glob.py", "bisect.py", "heapq.py", "base64.py", "calendar.py",
         "csv.py", "difflib.py", "gettext.py", "imaplib.py", "netrc.py", "pprint.py", "queue.py", "sched.py",
         "argparse.py", "ast.py", "cmd.py", "code.py", "codeop.py", "colorsys.py", "copy.py", "dis.py")
HEAD_CHARS = 3500  # about 1,000 tokens of code
WAIT_S = 1.0


def head(text: str) -> tuple[str, int, int]:
    """The file's first HEAD_CHARS, cut after a line of code, then a new line indented as that one: the text,
    and the cursor (line, column) at the end of it."""
    cut = text.rfind("\n", 0, HEAD_CHARS)
    while cut > 0 and not text[text.rfind("\n", 0, cut) + 1:cut].strip():
        cut = text.rfind("\n", 0, cut)
    last = text[text.rfind("\n", 0, cut) + 1:cut]
    indent = last[:len(last) - len(last.lstrip())]
    body = text[:cut] + "\n" + indent
    return body, body.count("\n"), len(indent)


def timed_completion(client: RawClient, uri: str, line: int, column: int) -> float:
    started = time.perf_counter()
    reply = client.completion(uri, line, column, timeout=120)
    elapsed = (time.perf_counter() - started) * 1000
    if "result" not in reply:
        raise SystemExit(f"the server answered an error: {reply}")
    return elapsed


def run(args: argparse.Namespace) -> dict:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    texts = [head((stdlib / name).read_text(encoding="utf-8")) for name in FILES]
    needed = 2 * args.rounds + 1
    if len(texts) < needed:
        raise SystemExit(f"--rounds {args.rounds} needs {needed} files; there are {len(texts)}")
    times: dict[str, list[float]] = {"opened": [], "cold": [], "open": []}
    with tempfile.TemporaryDirectory(prefix="completer-bench-first-") as runtime:
        os.chmod(runtime, 0o700)
        env = dict(os.environ, COMPLETER_RUNTIME_DIR=runtime, COMPLETER_LOG_DIR=str(Path(runtime) / "logs"),
                   PYTHONPATH=str(REPO), COMPLETER_ENGINE_IDLE_EXIT_S="3")
        env.pop("COMPLETER_STANDALONE", None)
        client = start_server({"searchAhead": False}, env)
        try:
            kept_uri = (REPO / "bench-first-open.py").as_uri()
            kept_text, _, _ = texts[0]
            client.open(kept_uri, kept_text)
            version, lines = 1, kept_text.split("\n")
            timed_completion(client, kept_uri, len(lines) - 1, len(lines[-1]))  # the open file's cache is warm
            time.sleep(WAIT_S)
            files = iter(texts[1:])
            for round_ in range(args.rounds):
                order = ["opened", "cold", "open"]
                order = order[round_ % 3:] + order[:round_ % 3]
                for mode in order:
                    if mode == "open":  # a new line typed at the end of the open file: its own line runs
                        extra = lines[-1] + f"value_{round_} = {round_}\n" + lines[-1]
                        version += 1
                        client.change(kept_uri, version, (len(lines) - 1, 0), (len(lines) - 1, len(lines[-1])), extra)
                        lines = "\n".join(lines[:-1] + [extra]).split("\n")
                        times[mode].append(timed_completion(client, kept_uri, len(lines) - 1, len(lines[-1])))
                    else:
                        text, line, column = next(files)
                        uri = (REPO / f"bench-first-{mode}-{round_}.py").as_uri()
                        client.open(uri, text)
                        if mode == "opened":
                            time.sleep(WAIT_S)
                        times[mode].append(timed_completion(client, uri, line, column))
                        client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
                    time.sleep(0.3)
        finally:
            client.close()
    medians = {mode: round(statistics.median(values), 1) for mode, values in times.items()}
    return {
        "command": "python scripts/bench_first.py " + " ".join(sys.argv[1:]),
        "machine": f"{os.cpu_count()} CPUs, {platform.machine()}, Python {platform.python_version()}",
        "rounds": args.rounds, "wait_s": WAIT_S, "median_ms": medians,
        "opened_over_open": round(medians["opened"] / medians["open"], 2),
        "cold_over_open": round(medians["cold"] / medians["open"], 2),
        "latencies_ms": {mode: [round(v, 2) for v in values] for mode, values in times.items()},
    }


def table(result: dict) -> str:
    m = result["median_ms"]
    return ("| the request | median ms |\n|---|---:|\n"
            f"| a keystroke in a file open for a while (its new line) | {m['open']} |\n"
            f"| the first suggestion, {result['wait_s']:g} s after the file was opened | {m['opened']} |\n"
            f"| the first suggestion, as the file is opened | {m['cold']} |\n\n"
            f"opened / open: {result['opened_over_open']}×; cold / open: {result['cold_over_open']}× "
            f"({result['rounds']} rounds, `{result['command']}`, {result['machine']})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=11)
    add_output_arguments(parser)
    return run_or_table(parser.parse_args(argv), run, table)


if __name__ == "__main__":
    sys.exit(main())
