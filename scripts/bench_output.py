"""The shared tail of the benchmark scripts: run, write the raw result as JSON, print its markdown table; or,
with --table, print the table of a result written before (how docs/benchmarks.md's tables are made)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Callable


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=None, help="write the raw result as JSON here")
    parser.add_argument("--table", type=Path, default=None, help="print the table of a result written before")


def run_or_table(args: argparse.Namespace, run: Callable[[argparse.Namespace], dict[str, Any]],
                 table: Callable[[dict[str, Any]], str]) -> int:
    if args.table:
        print(table(json.loads(args.table.read_text(encoding="utf-8"))))
        return 0
    result = run(args)
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(table(result))
    return 0


def add_several_results_argument(parser: argparse.ArgumentParser, flag: str) -> None:
    """`flag FILE...`: several results written by --out, side by side (two checkouts' runs, alternated by hand)."""
    parser.add_argument(flag, type=Path, nargs="+", default=None, metavar="FILE",
                        help="print several results files written by --out, a row each, and each group's median")


def print_several_results(parser: argparse.ArgumentParser, flag: str, paths: list[Path],
                          table: Callable[[list[Path]], str]) -> int:
    """Print `table(paths)`; a file that is not such a result is one usage line (exit 2), not a traceback."""
    try:
        print(table(paths))
    except (OSError, ValueError, KeyError, TypeError) as error:
        parser.error(f"{flag}: not results written by --out ({error})")
    return 0
