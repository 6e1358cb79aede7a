"""How often the filters keep a line that is really there: real files of several languages, each line offered as
the whole-line suggestion at its own indentation, with the file's lines above as context.

    python scripts/filter_keep_rate.py --out filter_keep_rate.json

A line that is in the file is good code, so every line the filters drop here is one they would have refused had
the model written it (the previous line repeated, a blank or an empty comment are dropped by design: those are
counted too). Each language's lines are judged twice: by the rules of that language (completer/syntax.py), and by
Python's, which every document got before the filters knew other languages. The files are ones a checkout has
after `bash scripts/test.sh`: the Python standard library, and the JavaScript and TypeScript sources of the VS
Code extension's npm packages (pinned by its package-lock.json); and where the system has them, C headers in
/usr/include, its shell scripts, Perl's modules, Neovim's Lua runtime, PostgreSQL's SQL extension scripts and the
PHP of the Google Cloud SDK. A language whose files are not there is listed as missing.
"""
from __future__ import annotations

import argparse
import platform
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from bench_output import add_output_arguments, run_or_table  # noqa: E402
from completer.filters import keep_suggestion, line_context  # noqa: E402
from completer.syntax import PYTHON, syntax_for  # noqa: E402
from completer.text import MAX_LINE_CHARS  # noqa: E402

NODE_MODULES = REPO / "vscode-extension" / "node_modules"
STEP = 7  # every seventh line of a file, so each file gives lines from all of it
PER_FILE = 40
EXAMPLES = 12


def corpora() -> dict[str, list[Path]]:
    """Each language's files, in a stable order."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    found = {
        "python": sorted(stdlib.glob("*.py")),
        "javascript": sorted(p for p in NODE_MODULES.rglob("*.js") if not p.name.endswith(".min.js")),
        "typescript": sorted(p for p in NODE_MODULES.rglob("*.ts") if not p.name.endswith(".d.ts"))
        + sorted((REPO / "vscode-extension" / "src").rglob("*.ts")),
        "c": sorted(Path("/usr/include").glob("*.h")),
        "cpp": sorted(Path("/usr/include").glob("llvm-[0-9]*/llvm/**/*.h")),
        "shellscript": shell_scripts(),
        "perl": sorted(Path("/usr/share/perl").rglob("*.pm")),
        "php": sorted(Path("/usr/lib/google-cloud-sdk").rglob("*.php")),
        "lua": sorted(Path("/usr/share/nvim/runtime").rglob("*.lua")),
        "sql": sorted(Path("/usr/share/postgresql").rglob("*.sql")),
        "json": sorted(p for p in NODE_MODULES.rglob("*.json") if p.name != "package-lock.json"),
        "css": sorted(Path("/usr").rglob("*.css")),
    }
    return {language: files for language, files in found.items() if files}


SHEBANGS = (b"#!/bin/sh", b"#!/bin/bash", b"#! /bin/sh", b"#!/usr/bin/env bash", b"#!/usr/bin/env sh")


def shell_scripts() -> list[Path]:
    """The system's shell scripts: the `*.sh` files under /usr, and the programs in its bin folders that are
    shell scripts (by their first line)."""
    found = set(Path("/usr").rglob("*.sh"))
    for folder in (Path("/usr/bin"), Path("/usr/sbin"), Path("/usr/lib/git-core")):
        for path in folder.glob("*") if folder.is_dir() else ():
            try:
                with path.open("rb") as handle:
                    if path.is_file() and handle.read(24).startswith(SHEBANGS):
                        found.add(path)
            except OSError:
                continue
    return sorted(found)


def judge(language: str, files: list[Path], positions: int) -> dict:
    """Up to `positions` lines of `files`, each kept or not by the language's rules and by Python's."""
    own, python = syntax_for(language), PYTHON
    counted = kept_own = kept_python = by_design = 0
    dropped: list[str] = []
    for path in files:
        try:
            lines = path.read_text(encoding="utf-8").split("\n")
        except (OSError, UnicodeDecodeError):
            continue
        taken = 0
        for number in range(1, len(lines), STEP):
            line = lines[number].rstrip()
            if not line.strip() or len(line) > MAX_LINE_CHARS or "\t" in line[:len(line) - len(line.lstrip())]:
                continue
            above = lines[:number]  # line_context reads the last CONTEXT_LINES of them, and knows the file goes on
            typed = line[:len(line) - len(line.lstrip())]  # the indentation the editor gives
            inserted = line[len(typed):]
            by_own = keep_suggestion(line, inserted, "", line_context(above, own))
            by_python = by_own if own is python else keep_suggestion(line, inserted, "", line_context(above, python))
            counted, kept_own, kept_python = counted + 1, kept_own + by_own, kept_python + by_python
            if not by_own and dropped_by_design(line, lines[number - 1]):
                by_design += 1
            elif not by_own and len(dropped) < EXAMPLES:
                dropped.append(f"{path.relative_to(path.parents[1])}:{number + 1}: {line.strip()[:100]}")
            taken += 1
            if taken == PER_FILE or counted == positions:
                break
        if counted == positions:
            break
    return {"language": language, "rules": own.name or "none", "positions": counted, "kept": kept_own,
            "dropped_by_design": by_design, "kept_by_python_rules": kept_python, "dropped_examples": dropped}


def dropped_by_design(line: str, above: str) -> bool:
    """A line every language's rules drop: a separator or empty comment (nothing alphanumeric), or the line above
    again."""
    return not any(ch.isalnum() for ch in line) or line.strip() == above.strip()


def run(args: argparse.Namespace) -> dict:
    found = corpora()
    results = [judge(language, found[language], args.positions) for language in args.languages if language in found]
    return {"machine": {"python": platform.python_version(), "system": platform.platform()},
            "positions_per_language": args.positions, "results": results,
            "missing": [language for language in args.languages if language not in found]}


def table(result: dict) -> str:
    rows = ["| language | its rules | lines | kept by its rules | dropped by design (separators, repeats) "
            "| dropped otherwise | kept by Python's rules |", "|---|---|---:|---:|---:|---:|---:|"]
    for r in result["results"]:
        positions = max(1, r["positions"])
        by_design = r.get("dropped_by_design")
        otherwise = "–" if by_design is None else f"{100 * (positions - r['kept'] - by_design) / positions:.1f} %"
        rows.append(f"| {r['language']} | {r.get('rules') or 'none'} | {r['positions']:,} "
                    f"| {100 * r['kept'] / positions:.1f} % "
                    f"| {'–' if by_design is None else f'{100 * by_design / positions:.1f} %'} | {otherwise} "
                    f"| {100 * r['kept_by_python_rules'] / positions:.1f} % |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--languages", nargs="+", default=["python", "javascript", "typescript", "c", "cpp",
                                                           "shellscript", "php", "lua", "sql", "json", "css",
                                                           "perl"])
    parser.add_argument("--positions", type=int, default=5000, help="lines judged per language")
    add_output_arguments(parser)
    return run_or_table(parser.parse_args(argv), run, table)


if __name__ == "__main__":
    sys.exit(main())
