"""Evaluate whole-line completion on the validation split: exact match@1/@5 and edit similarity,
INT8 and fp32 side by side, through the real engine (token healing, beam search, filters).

    python scripts/eval.py --positions 1000 --update-model-card

Cursor positions are drawn deterministically from validation files the model never saw: half at
the start of a line (after its indentation), half mid-line. The text before the cursor is the
context; the rest of the line is what the model must produce.

Each rate comes with the half-width of its 95 % interval (normal approximation): at 1,000 positions
exact@1 near 20 % is about ±2.5 points, so smaller gaps between two runs are not shown to be real.
INT8 and fp32 run on the same positions, so their difference gets a paired interval, which is
much narrower; `--baseline` does the same for an earlier bundle (skipping the training files of
both), and `--baseline-beams` runs the baseline at another beam width, so one bundle against itself
shows what a wider search buys. Against a baseline, whole-line edit similarity gets a paired difference
too: a run can make the best line exact more often yet leave the wrong ones further off.
`--outcomes-out` and `--paired-with` give the same paired view across a change of the engine's code:
run once before the change, once after; `--compare NEW OLD` pairs two saved runs without running
anything, and pools several pairs (one change on two splits) into one sample. `--first-by-score` puts
the likeliest line first, where the engine puts the one its beams agree on most (completer/consensus.py).
`--search-errors` asks, for each line missing from the first five, whether the model scores it above
the lowest of the five (the search lost it) or below (the model ranks it low), to show
how much of the gap a better search could close at most. `--lines-below` lets the document's repeats
search the lines after the cursor's too, as the server's do, and `--open-files N` N other files of the
project, as the server searches other open files; the card keeps to the text before the cursor, so it
leaves both out.
"""
from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from corpus import copy_key  # noqa: E402
from export import replace_section, sha256  # noqa: E402
from heldout import heldout_val  # noqa: E402
from open_files import imported_files, open_files  # noqa: E402
from paths import REPO_ROOT, cache_dir, corpus_dir  # noqa: E402
from shards import corpus_shards, shard_cursors  # noqa: E402

from completer.bundle import load_bundle  # noqa: E402
from completer.engine import MAX_CONTEXT_CHARS, Engine  # noqa: E402
from completer.text import text_below  # noqa: E402
from completer.types import EngineSettings, ModelError  # noqa: E402
from completer.earlier_lines import anchor_above, following_line, header_line  # noqa: E402
from completer.known_names import known_word_first, used_in  # noqa: E402
from completer.repository import RepositoryContext  # noqa: E402
from completer.workspace import Snippet, WorkspaceIndex  # noqa: E402
from lsp.workspace import SNIPPETS as WORKSPACE_SNIPPETS  # noqa: E402

MIN_CODE_CHARS = 4
PAIRED_METRICS = (("exact1", "exact@1"), ("exact5", "exact@5"), ("line_edit_sim", "edit sim (whole line)"))
Z_95 = 1.96  # the normal quantile of a two-sided 95 % interval
WORKSPACE_BUDGET_BYTES = 128 * 1024 * 1024  # the server's default workspaceMemoryMb


@dataclass(frozen=True)
class Position:
    path: str
    line: int
    column: int
    kind: str  # "line-start" or "mid-line"


def training_copy_keys(train_path: Path) -> set[str]:
    """corpus.copy_key of every training file, read from the paths alone (the texts are 200 MB)."""
    keys = set()
    with open(train_path) as handle:
        for line in handle:
            start = line.index('"path": ') + len('"path": ')
            keys.add(copy_key(json.loads(line[start:line.index('", "text": ', start) + 1])))
    return keys


def trained_shards(bundle: Path) -> list[Path]:
    """The corpus shards the bundle's training state has cursors into (every built shard when it has no
    state), so the positions change only when the model's training data does."""
    shards = corpus_shards()
    state_path = bundle / "training" / "train_state.json"
    if not state_path.exists():
        return list(shards.values())
    cursors = shard_cursors(json.loads(state_path.read_text()))
    return [path for name, path in shards.items() if cursors.get(name)]


def sample_positions(val_path: Path, count: int, seed: int = 0, skip: set[str] = frozenset()
                     ) -> tuple[dict[str, str], list[Position], int]:
    """Positions in validation files, minus files whose copy_key is in `skip` (copies of training files),
    and how many files that left out. Files are keyed by origin and path: two releases may both hold a
    setup.py. They are taken in key order, so the positions depend on which files the split holds, not
    on the order corpus.py wrote them in (which changed once, when it began to follow the pinned list)."""
    files: dict[str, str] = {}
    skipped = 0
    with open(val_path) as handle:
        for row in map(json.loads, handle):
            if copy_key(row["path"]) in skip:
                skipped += 1
                continue
            files[f"{row['origin']}:{row['path']}"] = row["text"]
    candidates: list[tuple[str, int, str]] = []
    for key in sorted(files):
        for index, line in enumerate(files[key].split("\n")):
            if len(line.strip()) >= MIN_CODE_CHARS:
                candidates.append((key, index, line))
    rng = random.Random(seed)
    rng.shuffle(candidates)
    positions = []
    for i, (path, index, line) in enumerate(candidates[:count]):
        indent = len(line) - len(line.lstrip())
        if i % 2 == 0:
            positions.append(Position(path, index, indent, "line-start"))
        else:
            positions.append(Position(path, index, rng.randint(indent + 1, len(line.rstrip()) - 1), "mid-line"))
    positions.sort(key=lambda p: (p.path, p.line))
    return files, positions, skipped


def edit_similarity(a: str, b: str) -> float:
    """1 - Levenshtein distance / longer length (1.0 for two empty strings)."""
    if not a and not b:
        return 1.0
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return 1 - previous[-1] / max(len(a), len(b))


def mean_ci95(values: list[float]) -> tuple[float, float | None]:
    """The mean and the half-width of its 95 % interval (normal approximation; None below two values)."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, None
    return mean, Z_95 * statistics.stdev(values) / math.sqrt(len(values))


def percent(values: list[float]) -> tuple[float, float | None]:
    mean, half_width = mean_ci95(values)
    return round(100 * mean, 2), None if half_width is None else round(100 * half_width, 2)


def missed_line_class(engine: Engine, uri: str, before: str, rest: str, scores: list[float], below: str = "",
                      others: list[str] | None = None) -> str:
    """Why a line is not among the first five. "search": the engine's own score of it beats the lowest of
    the first five suggestions' (not always the fifth: completer/consensus.py may move one up), or there is
    none, so a wider search would find it, if perhaps behind other lines it also finds. "model": the model
    scores it lower. "filtered": the filters would drop it. "too long": it takes more tokens than the search
    may generate. The score is of the line's own tokenization, a lower bound over all of them, so no
    tokenization makes "search" wrong."""
    if not engine.would_offer(uri, before, rest):
        return "filtered"
    score = engine.line_score(uri, before, rest, below, others or ())
    if score is None:
        return "too long"
    return "search" if not scores or score > min(scores[:5]) else "model"


@dataclass(frozen=True)
class OpenFiles:
    """What the document's repeats search besides the file: up to `count` other files per file key."""

    count: int
    keys: dict[str, list[str]]  # file key ("origin:path") -> the keys of the files open beside it
    texts: dict[str, str]  # key -> text, for every key in `keys`' lists


def open_file_keys(files: dict[str, str], count: int) -> dict[str, list[str]]:
    """For each file key ("origin:path"), the keys of the `count` files of its project nearest it."""
    chosen = open_files((tuple(key.split(":", 1)) for key in files), count)  # type: ignore[misc]
    return {f"{origin}:{path}": [f"{o}:{p}" for o, p in others] for (origin, path), others in chosen.items()}


def imported_open_files(files: dict[str, str], train_path: Path, count: int) -> OpenFiles:
    """For each validation file, up to `count` modules of its project that it imports, from either split."""
    texts = dict(files)
    with open(train_path) as handle:
        for row in map(json.loads, handle):
            texts.setdefault(f"{row['origin']}:{row['path']}", row["text"])
    paths = {tuple(key.split(":", 1)) for key in texts}
    keys = {}
    for key, text in files.items():
        origin, path = key.split(":", 1)
        found = imported_files(text, (origin, path), paths, count)  # type: ignore[arg-type]
        keys[key] = [f"{o}:{p}" for o, p in found]
    return OpenFiles(count, keys, {k: texts[k] for others in keys.values() for k in others})


def workspace_indexes(files: dict[str, str]) -> dict[str, WorkspaceIndex]:
    """One index per package (the `origin` of each `origin:path` key), over all its files."""
    indexes: dict[str, WorkspaceIndex] = {}
    for key, text in files.items():
        index = indexes.setdefault(key.split(":", 1)[0], WorkspaceIndex(WORKSPACE_BUDGET_BYTES))
        index.add(key, text)
    return indexes


def package_context(key: str, picked: list[Snippet]) -> RepositoryContext:
    """The package laid out as the server lays out a workspace folder for a model that reads one (its name, the
    document's path in it, each snippet's), from `origin:path` keys; models without the format ignore it."""
    origin, path = key.split(":", 1)
    return RepositoryContext(origin.split("==", 1)[0], path,
                             tuple((snippet.path.split(":", 1)[1], snippet.text) for snippet in picked))


def following_first(predicted: list[str], before: str, followers: list[tuple[str, str]], next_line: str,
                    limit: int) -> list[str]:
    """`predicted` (whole lines) with the line `following_line` finds first, at most `limit` of them."""
    cut = before.rfind("\n") + 1
    following = following_line(before[:cut], before[cut:], followers, next_line)
    if following is None:
        return predicted
    return [following[0], *(line for line in predicted if line != following[0])][:limit]


def evaluate(bundle: Path, files: dict[str, str], positions: list[Position], beams: int,
             max_tokens: int = EngineSettings.max_tokens, search_errors: bool = False, document_repeats: bool = True,
             lines_below: bool = False, opened: OpenFiles | None = None, first_by_consensus: bool = True,
             suggestions: int = 5, stop_margin: float = EngineSettings.stop_margin, partial_lines: bool = True,
             after_cursor: bool = False, workspace: bool = False,
             shown: list[dict] | None = None) -> tuple[dict, dict[str, list[float]]]:
    """The summary, and each position's outcome per metric (for paired comparisons). `lines_below`: the
    document's repeats also search the lines after the cursor's, as the server's do; `opened`: they also
    search other files of the project, as the server searches other open files (scripts/open_files.py).
    `after_cursor`: a FIM bundle reads the lines below the cursor (the rest of the cursor's line is what it
    must write, so it is never given). The card's definition of the context (the text before the cursor)
    leaves all three out. `workspace`: the package's other files are the workspace, indexed as the server
    indexes a workspace folder, and the snippets it picks join the document's repeats (and the prompt of a
    model that reads a repository laid out as files: completer/repository.py). `shown`, when given, gets each
    position's actual line and the lines offered, in order, for reading the misses."""
    opened = opened or OpenFiles(0, {}, {})
    indexes = workspace_indexes(files) if workspace else {}
    engine = Engine(EngineSettings(model_path=str(bundle), beams=beams, max_suggestions=suggestions,
                                   max_tokens=max_tokens, document_repeats=document_repeats, repeats_below=lines_below,
                                   open_files=opened.count, first_by_consensus=first_by_consensus,
                                   stop_margin=stop_margin, partial_lines=partial_lines,
                                   fill_in_the_middle=after_cursor))
    stats: dict[str, list[float]] = {k: [] for k in ("exact1", "exact5", "edit_sim", "line_edit_sim", "latency",
                                                       "has_suggestion")}
    by_kind: dict[str, list[float]] = {"line-start": [], "mid-line": []}
    misses: dict[str, int] = {"search": 0, "model": 0, "filtered": 0, "too long": 0}
    lines_cache = {path: text.split("\n") for path, text in files.items()}
    for pos in positions:
        lines = lines_cache[pos.path]
        before = "\n".join(lines[:pos.line] + [lines[pos.line][:pos.column]])
        actual = lines[pos.line].rstrip()
        expected_rest = actual[pos.column:]
        below = text_below(lines, pos.line, MAX_CONTEXT_CHARS) if lines_below or after_cursor else ""
        others = [opened.texts[key] for key in opened.keys.get(pos.path, ())]
        index = indexes.get(pos.path.split(":", 1)[0])
        picked = index.snippets(before, pos.path, WORKSPACE_SNIPPETS, files.get) if index is not None else []
        snippets = [snippet.text for snippet in picked]
        result = engine.complete_text(pos.path, before, "", below=below, others=others, snippets=snippets,
                                      repository=package_context(pos.path, picked) if picked else None)
        predicted = [s.line.rstrip() for s in result.suggestions]
        top = result.suggestions[0].text if result.suggestions else ""
        typed = lines[pos.line][:pos.column]
        elsewhere = "\n".join(lines[:pos.line]) + "\n" + "\n".join(lines[pos.line + 1:])
        known_first = known_word_first(predicted, typed, lambda name: (  # as the server orders them (`suggest`)
            index is not None and index.uses(name, pos.path)) or used_in(elsewhere, name))
        if known_first[:1] != predicted[:1]:
            top = known_first[0][len(typed):]
        predicted = known_first
        if document_repeats:  # as the server puts it first (lsp/server.py, `suggest`)
            cut = before.rfind("\n") + 1
            anchor = anchor_above(before[:cut], before[cut:])
            followers = index.followers(anchor, pos.path, files.get) if index is not None and anchor else []
            next_line = next((line for line in lines[pos.line + 1:] if line.strip()), "")
            first = following_first(predicted, before, followers, next_line, suggestions)
            common = index.common_first_line(pos.path, files.get) if index is not None and pos.line == 0 else None
            header = header_line("", typed, common, next_line)  # as the server puts it first (lsp/line_order.py)
            if header is not None:
                first = [header, *(line for line in first if line != header)][:suggestions]
            if first[:1] != predicted[:1]:
                top = first[0][len(lines[pos.line][:pos.column]):]
            predicted = first
        exact1 = float(bool(predicted) and predicted[0] == actual)
        if shown is not None:
            shown.append({"path": pos.path, "line": pos.line, "column": pos.column, "kind": pos.kind,
                          "actual": actual, "shown": predicted[:suggestions]})
        stats["exact1"].append(exact1)
        stats["exact5"].append(float(actual in predicted[:5]))
        stats["edit_sim"].append(edit_similarity(top, expected_rest))
        stats["line_edit_sim"].append(edit_similarity(predicted[0] if predicted else actual[:pos.column], actual))
        stats["latency"].append(result.latency_ms)
        stats["has_suggestion"].append(float(bool(predicted)))
        by_kind[pos.kind].append(exact1)
        if search_errors and actual not in predicted[:5]:
            misses[missed_line_class(engine, pos.path, before, expected_rest,
                                     [s.score for s in result.suggestions if s.score is not None], below,
                                     others)] += 1
    summary: dict = {"positions": len(positions)}
    for key, values in (("exact_match_at_1", stats["exact1"]), ("exact_match_at_5", stats["exact5"]),
                        ("edit_similarity", stats["edit_sim"]), ("line_edit_similarity", stats["line_edit_sim"]),
                        ("exact_match_at_1_line_start", by_kind["line-start"]),
                        ("exact_match_at_1_mid_line", by_kind["mid-line"])):
        summary[key], summary[f"{key}_ci95"] = percent(values) if values else (None, None)  # no such positions
    summary["answered"], summary["answered_ci95"] = percent(stats["has_suggestion"])
    summary["median_latency_ms"] = round(statistics.median(stats["latency"]), 2)
    if search_errors:
        summary["exact5_misses"] = misses
    return summary, stats


def paired_difference(a: list[float], b: list[float]) -> tuple[float, float | None, int]:
    """a - b over the same positions, in points, with its 95 % half-width and how many positions differ:
    the positions' own difficulty cancels, so this is far tighter than the two separate intervals."""
    diffs = [x - y for x, y in zip(a, b, strict=True)]
    return (*percent(diffs), sum(d != 0 for d in diffs))


def paired_differences(name: str, new: dict[str, list[float]], old: dict[str, list[float]]
                       ) -> dict[str, tuple[float, float | None, int]]:
    """`name` − ... for each of PAIRED_METRICS, keyed as the report prints them."""
    return {f"{name} {label}": paired_difference(new[metric], old[metric]) for metric, label in PAIRED_METRICS}


def paired_sentence(name: str, difference: tuple[float, float | None, int], positions: int) -> str:
    diff, half_width, differing = difference
    return (f"{name} on the same positions: {diff:+} ± {half_width} points (95 %, paired; "
            f"the two differ at {differing} of {positions} positions).")


def position_rows(positions: list[Position]) -> list[list]:
    """Positions as --outcomes-out saves them (JSON lists)."""
    return [[p.path, p.line, p.column, p.kind] for p in positions]


def load_outcomes(path: Path) -> tuple[list, dict[str, list[float]]]:
    """The positions and per-position outcomes that --outcomes-out saved."""
    try:
        saved = json.loads(path.read_text())
        return saved["positions"], {metric: saved["outcomes"][metric] for metric, _ in PAIRED_METRICS}
    except (OSError, ValueError, KeyError, TypeError) as error:
        sys.exit(f"eval.py: {path}: not outcomes written by --outcomes-out ({error})")


def read_outcomes(path: Path, positions: list[Position]) -> dict[str, list[float]]:
    """Outcomes saved by --outcomes-out, refused unless they are for exactly these positions."""
    saved_positions, outcomes = load_outcomes(path)
    if saved_positions != position_rows(positions):
        sys.exit(f"eval.py: --paired-with {path}: its positions are not this run's (another --positions, --val "
                 f"or training data?)")
    return outcomes


def compare_saved(pairs: list[tuple[Path, Path]]) -> str:
    """Paired differences of saved runs (NEW, OLD) on the same positions, with no model run. Several pairs
    (a change measured on two validation splits, say) are pooled into one sample: each position is one
    paired difference, so the pooled interval is narrower than either pair's."""
    pooled: tuple[dict[str, list[float]], dict[str, list[float]]] = ({}, {})
    positions = 0
    for new, old in pairs:
        (new_positions, new_outcomes), (old_positions, old_outcomes) = load_outcomes(new), load_outcomes(old)
        if new_positions != old_positions:
            sys.exit(f"eval.py: --compare: {new} and {old} are not for the same positions")
        positions += len(new_positions)
        for into, outcomes in zip(pooled, (new_outcomes, old_outcomes)):
            for metric, values in outcomes.items():
                into.setdefault(metric, []).extend(values)
    new, old = pairs[0]
    name = f"{new.name} − {old.name}" + (f" and {len(pairs) - 1} more pair{'s' * (len(pairs) > 2)}, pooled"
                                         if len(pairs) > 1 else "")
    differences = paired_differences(name, *pooled)
    return "\n\n".join(paired_sentence(name, d, positions) for name, d in differences.items())


def fp32_bundle(int8_bundle: Path, fp32_onnx: Path, into: Path, fp32_batched: Path | None = None) -> Path:
    """A throwaway bundle identical to the INT8 one but with the fp32 graph, and the fp32 batched graph if given
    (without it, the bundle has none: its searches' calls run one after another)."""
    into.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(fp32_onnx, into / "model.onnx")
    manifest = json.loads((int8_bundle / "manifest.json").read_text())
    batched = manifest.get("batched_model")
    if isinstance(batched, dict):
        if fp32_batched is None:
            del manifest["batched_model"]
            manifest["files"].pop(batched.get("file"), None)
        else:
            shutil.copyfile(fp32_batched, into / batched["file"])
    for name in manifest["files"]:
        if name != "model.onnx" and not (isinstance(batched, dict) and name == batched.get("file")):
            shutil.copyfile(int8_bundle / name, into / name)
        manifest["files"][name] = {"sha256": sha256(into / name), "bytes": (into / name).stat().st_size}
    (into / "manifest.json").write_text(json.dumps(manifest))
    return into


def with_ci(result: dict, key: str) -> str:
    value, half_width = result[key], result[key + "_ci95"]
    if value is None:
        return "n/a"
    return f"{value} %" if half_width is None else f"{value} % ± {half_width}"


def markdown(results: dict[str, dict], command: str, files: int, skipped: int,
             differences: dict[str, tuple[float, float | None, int]]) -> str:
    rows = ["| model | exact@1 | exact@5 | edit sim (completion) | edit sim (whole line) | exact@1 line start |"
            " exact@1 mid-line | answered | median latency (new position, with prefill) |",
            "|---|---|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        rows.append(f"| {name} | {with_ci(r, 'exact_match_at_1')} | {with_ci(r, 'exact_match_at_5')} | "
                    f"{with_ci(r, 'edit_similarity')} | {with_ci(r, 'line_edit_similarity')} | "
                    f"{with_ci(r, 'exact_match_at_1_line_start')} | {with_ci(r, 'exact_match_at_1_mid_line')} | "
                    f"{with_ci(r, 'answered')} | {r['median_latency_ms']} ms |")
    positions = next(iter(results.values()))["positions"]
    report = (f"Command: `{command}`\n\n{positions} positions (half line start, half mid-line) in {files} validation "
              f"files; {skipped} more validation files were skipped as copies of training files "
              f"(`corpus.copy_key`). Each rate is ± the half-width of its 95 % interval.\n\n" + "\n".join(rows)
              + "".join(f"\n\n{paired_sentence(name, d, positions)}" for name, d in differences.items()))
    for name, r in results.items():
        if "exact5_misses" in r:
            report += f"\n\n{name}: {misses_sentence(r['exact5_misses'], positions)}"
    return report


def misses_sentence(misses: dict[str, int], positions: int) -> str:
    total = sum(misses.values())
    return (f"of the {total} positions whose line is not among the first five, the engine scores the actual line "
            f"above the fifth suggestion (or the last, when there are fewer) at {misses['search']} "
            f"({100 * misses['search'] / positions:.1f} % of all positions: the most a wider search could add to "
            f"exact@5, since it may also find other lines that outrank the actual one), and below it at "
            f"{misses['model']}; the filters would drop it at {misses['filtered']}, and at {misses['too long']} it "
            f"takes more tokens than the search may generate.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", type=Path, default=REPO_ROOT / "models" / "python-small")
    parser.add_argument("--fp32-onnx", type=Path, default=None, help="fp32 graph from export.py")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="an earlier bundle to run on the same positions, for the paired exact@1 gain")
    parser.add_argument("--val", type=Path, default=None, help="validation jsonl from corpus.py")
    parser.add_argument("--packages", action="store_true",
                        help="positions from the held-out packages (scripts/heldout.py), which no corpus holds, "
                             "instead of the validation split")
    parser.add_argument("--baseline-beams", type=int, default=None,
                        help="the baseline's beam width (default --beams): with the same bundle as --baseline, "
                             "what a wider search buys")
    parser.add_argument("--train", type=Path, action="append", default=None,
                        help="training jsonl whose copies are skipped (repeatable; default: those of the corpus "
                             "shards the bundle was trained on)")
    parser.add_argument("--positions", type=int, default=1000, help="cursor positions, at least 1")
    parser.add_argument("--beams", type=int, default=5, help="5, so exact@5 has five candidates")
    parser.add_argument("--suggestions", type=int, default=5,
                        help="lines the engine offers (its max_suggestions): 5 for the card; fewer, as the server's "
                             "3, measure what it shows, and exact@5 then counts only those")
    parser.add_argument("--max-tokens", type=int, default=EngineSettings.max_tokens,
                        help="the engine's token limit per line (its default unless set)")
    parser.add_argument("--outcomes-out", type=Path, default=None,
                        help="write each position's outcomes here (JSON), for a later --paired-with")
    parser.add_argument("--lines-out", type=Path, default=None,
                        help="write each position's actual line and the lines offered (JSON lines), to read the misses")
    parser.add_argument("--paired-with", type=Path, default=None,
                        help="outcomes written by an earlier --outcomes-out on the same positions: paired differences "
                             "across a change of code, where --baseline compares two bundles under the same code")
    parser.add_argument("--compare", type=Path, nargs=2, metavar=("NEW", "OLD"), action="append", default=None,
                        help="print the paired differences of two --outcomes-out files and stop (runs no model); "
                             "given again, the pairs are pooled into one sample")
    parser.add_argument("--search-errors", action="store_true",
                        help="for each line missing from the first five, tell whether the search lost it (the model "
                             "scores it above the lowest of the five) or the model ranks it low")
    parser.add_argument("--no-document-repeats", action="store_true",
                        help="the model alone, without the document's repeats mixed into each beam step")
    parser.add_argument("--first-by-score", action="store_true",
                        help="the likeliest line first, instead of the one the beams agree on most (the engine's "
                             "default, completer/consensus.py)")
    parser.add_argument("--stop-margin", type=float, default=EngineSettings.stop_margin, metavar="NATS",
                        help="the search gives up live beams this far behind its best finished line (the engine's "
                             f"{EngineSettings.stop_margin:g}; inf: never)")
    parser.add_argument("--no-partial-lines", action="store_true",
                        help="offer nothing where the search finds no whole line, instead of the start of the likeliest "
                             "line it cut off (completer/partial_lines.py)")
    parser.add_argument("--lines-below", action="store_true",
                        help="the document's repeats also search the lines after the cursor's, as in the server "
                             "(the card's context is the text before the cursor: off there)")
    parser.add_argument("--after-cursor", action="store_true",
                        help="a FIM bundle also reads the lines below the cursor (fill-in-the-middle); without it, "
                             "the card's context: the text before the cursor only")
    parser.add_argument("--open-files", type=int, default=0, metavar="N",
                        help="the document's repeats also search N other validation files of the same project, "
                             "nearest in the directory tree (or see --open-from), as the server searches other "
                             "open files (card: 0)")
    parser.add_argument("--open-from", choices=("nearby", "imports"), default="nearby",
                        help="with --open-files: the validation files nearest in the tree (nearby), or the "
                             "project's modules that the file imports, mostly training files (imports)")
    parser.add_argument("--workspace", action="store_true",
                        help="the package's other files are the workspace (the server's workspaceContext): its "
                             "snippets join the document's repeats")
    parser.add_argument("--update-model-card", action="store_true", help="write results into manifest and MODEL.md")
    args = parser.parse_args()
    if args.compare:
        print(compare_saved(args.compare))
        return
    if args.positions < 1:
        parser.error("--positions must be at least 1")
    try:
        EngineSettings(open_files=args.open_files).validate()
    except ValueError as error:
        parser.error(str(error).replace("open_files", "--open-files"))
    for beams in (args.beams, args.baseline_beams):
        if beams is None:
            continue
        try:
            EngineSettings(beams=beams).validate()  # the engine's own range, with its message
        except ValueError as error:
            parser.error(str(error))
    try:
        EngineSettings(max_suggestions=args.suggestions).validate()
    except ValueError as error:
        parser.error(str(error).replace("max_suggestions", "--suggestions"))
    if args.baseline_beams is not None and not args.baseline:
        parser.error("--baseline-beams needs --baseline")
    if args.baseline and args.update_model_card:
        parser.error("--baseline does not go with --update-model-card: the card records this bundle's own run")
    try:
        EngineSettings(stop_margin=args.stop_margin).validate()
    except ValueError as error:
        parser.error(str(error).replace("stop_margin", "--stop-margin"))
    if args.stop_margin != EngineSettings.stop_margin and args.update_model_card:
        parser.error("--stop-margin does not go with --update-model-card: the card records the engine as it ships")
    if args.suggestions != 5 and args.update_model_card:
        parser.error("--suggestions does not go with --update-model-card: the card's exact@5 needs five")
    if args.paired_with and args.update_model_card:
        parser.error("--paired-with does not go with --update-model-card: the card records this bundle's own run")
    if args.workspace and args.update_model_card:
        parser.error("--workspace does not go with --update-model-card: the card's context is the text before the cursor")
    if args.after_cursor and args.update_model_card:
        parser.error("--after-cursor does not go with --update-model-card: the card's context is the text before "
                     "the cursor")
    if args.packages and (args.val or args.train):
        parser.error("--packages draws positions from the held-out packages: no --val or --train goes with it")
    for option, path in (("--outcomes-out", args.outcomes_out), ("--lines-out", args.lines_out)):
        if path and not path.parent.is_dir():
            parser.error(f"{option} {path}: no such directory")  # before minutes of evaluation
    fp32_onnx = args.fp32_onnx or cache_dir() / "export" / f"{args.bundle.name}.fp32.onnx"
    for bundle in filter(None, (args.bundle, args.baseline)):
        try:
            load_bundle(bundle)  # a missing or corrupt bundle fails here, not after minutes of evaluation
        except ModelError as error:
            sys.exit(f"eval.py: {error}")
    data = corpus_dir()
    skip: set[str] = set()
    if args.packages:  # whole packages outside every corpus: nothing to skip
        val_path = heldout_val()
    else:
        val_path = args.val or data / "val.jsonl"
        trained = {*trained_shards(args.bundle), *(trained_shards(args.baseline) if args.baseline else ())}
        if not val_path.is_file():  # a machine that never built the corpus: say how to get one, not a traceback
            sys.exit(f"eval.py: no validation split at {val_path}: build the corpus first (scripts/corpus.py), "
                     "give --val, or measure on the held-out packages with --packages")
        for train_path in args.train or [shard / "train.jsonl" for shard in sorted(trained)]:
            if not train_path.is_file():
                sys.exit(f"eval.py: no training split at {train_path}, whose copies the positions must skip")
            skip |= training_copy_keys(train_path)
    files, positions, skipped = sample_positions(val_path, args.positions, skip=skip)
    if not positions:
        sys.exit(f"eval.py: no cursor positions: no validation file has a code line left after skipping "
                 f"{skipped} copies of training files")
    earlier = read_outcomes(args.paired_with, positions) if args.paired_with else None
    opened = None
    if args.open_files and args.open_from == "imports":
        train_path = val_path.parent / "train.jsonl"
        if not train_path.exists():
            sys.exit(f"eval.py: --open-from imports reads the split's training files, and {train_path} is missing")
        opened = imported_open_files(files, train_path, args.open_files)
    elif args.open_files:
        opened = OpenFiles(args.open_files, open_file_keys(files, args.open_files), files)
    if opened is not None:
        beside = sum(bool(opened.keys.get(p.path)) for p in positions)
        print(f"{beside} of {len(positions)} positions have another file of their project open ({args.open_from})",
              file=sys.stderr)
    results = {}
    shown: list[dict] | None = [] if args.lines_out else None
    started = time.time()
    repeats, consensus, partial = not args.no_document_repeats, not args.first_by_score, not args.no_partial_lines
    results["INT8 (shipped)"], int8 = evaluate(args.bundle, files, positions, args.beams, args.max_tokens,
                                               args.search_errors, repeats, args.lines_below, opened, consensus,
                                               args.suggestions, args.stop_margin, partial,
                                               args.after_cursor, args.workspace, shown)
    differences: dict[str, tuple[float, float | None, int]] = {}
    if fp32_onnx.exists():
        with tempfile.TemporaryDirectory() as tmp:
            results["fp32"], fp32 = evaluate(fp32_bundle(args.bundle, fp32_onnx, Path(tmp)), files, positions,
                                             args.beams, args.max_tokens, args.search_errors, repeats,
                                             args.lines_below, opened, consensus, args.suggestions, args.stop_margin,
                                             partial, args.after_cursor, args.workspace)
        differences["INT8 − fp32 exact@1"] = paired_difference(int8["exact1"], fp32["exact1"])
    if args.baseline:
        baseline_beams = args.baseline_beams or args.beams
        width = "" if baseline_beams == args.beams else f", {baseline_beams} beam{'s' * (baseline_beams != 1)}"
        name = f"baseline (INT8{width})"
        results[name], baseline = evaluate(args.baseline, files, positions, baseline_beams, args.max_tokens,
                                           args.search_errors, repeats, args.lines_below, opened, consensus,
                                           args.suggestions, args.stop_margin, partial,
                                           args.after_cursor, args.workspace)
        differences.update(paired_differences("INT8 − baseline", int8, baseline))
    if earlier is not None:
        differences.update(paired_differences(f"INT8 − {args.paired_with.name}", int8, earlier))
    command = "python scripts/eval.py " + " ".join(sys.argv[1:])
    table = markdown(results, command.strip(), len(files), skipped, differences)
    print(table)
    print(f"\n({time.time() - started:.0f} s)")
    if args.outcomes_out:  # after the table is out: a write that fails loses no results
        args.outcomes_out.write_text(json.dumps({"command": command.strip(), "positions": position_rows(positions),
                                                 "outcomes": int8}) + "\n")
    if args.lines_out:
        args.lines_out.write_text("".join(json.dumps(row) + "\n" for row in shown or ()))
    if args.update_model_card:
        manifest_path = args.bundle / "manifest.json"
        manifest = json.loads(manifest_path.read_text())
        manifest["eval"] = {"command": command.strip(), "beams": args.beams, "results": results,
                            "paired_exact_match_at_1": {name: dict(zip(("points", "ci95", "differing"), d))
                                                        for name, d in differences.items()},
                            "model_sha256": manifest["files"]["model.onnx"]["sha256"]}
        manifest_path.write_text(json.dumps(manifest, indent=1, allow_nan=False) + "\n")
        card = args.bundle / "MODEL.md"
        if card.exists():
            card.write_text(replace_section(card.read_text(), "eval", table))


if __name__ == "__main__":
    main()
