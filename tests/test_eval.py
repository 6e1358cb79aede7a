"""scripts/eval.py: its intervals, and a whole run through the real engine on the committed bundle."""
from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys

import pytest

from eval import (Z_95, OpenFiles, Position, evaluate, imported_open_files, mean_ci95, open_file_keys,
                  paired_difference, sample_positions)
from lsp_support import BESIDE_OTHER_FILE, BESIDE_OTHER_FILE_CURSOR, FROM_OTHER_FILE, OTHER_FILE, SAMPLE_TEXT
from open_files import open_files

SOURCE = '''import os


def read_config(path):
    """Read the whole file."""
    with open(path) as handle:
        return handle.read()


def write_config(path, text):
    with open(path, "w") as handle:
        handle.write(text)
'''


def test_binomial_interval_matches_the_textbook_formula():
    outcomes = [1.0] * 40 + [0.0] * 160
    mean, half_width = mean_ci95(outcomes)
    assert mean == pytest.approx(0.2)
    assert half_width == pytest.approx(Z_95 * math.sqrt(0.2 * 0.8 / 199), rel=1e-9)  # sample variance: n - 1


def test_one_value_has_no_interval():
    assert mean_ci95([1.0]) == (1.0, None)


def test_paired_difference_cancels_what_both_share():
    hard = [1.0, 0.0] * 50
    assert paired_difference(hard, hard) == (0.0, 0.0, 0)
    one_better = hard[:-1] + [1.0]  # one more hit on the same positions
    diff, half_width, differing = paired_difference(one_better, hard)
    assert diff == pytest.approx(1.0) and differing == 1
    assert paired_difference(hard, one_better)[0] == pytest.approx(-1.0)
    assert 0 < half_width < mean_ci95(hard)[1] * 100  # far tighter than either rate's own interval


def test_positions_do_not_depend_on_the_order_corpus_py_wrote_the_files_in(tmp_path):
    rows = [{"origin": origin, "path": "pkg/config.py", "text": SOURCE.replace("path", name)}
            for origin, name in (("a-1.0.whl", "where"), ("b-2.0.whl", "target"), ("stdlib", "filename"))]
    drawn = []
    for order in (rows, rows[::-1]):
        (tmp_path / "val.jsonl").write_text("".join(json.dumps(row) + "\n" for row in order))
        drawn.append(sample_positions(tmp_path / "val.jsonl", 12))
    assert drawn[0] == drawn[1] and len(drawn[0][1]) == 12


def test_eval_run_reports_intervals_and_the_paired_int8_fp32_gap(tmp_path, model_dir):
    import onnx
    from safetensors.numpy import load_file

    from completer.graph import own_decoder

    config = json.loads((model_dir / "training" / "config.json").read_text())
    weights = load_file(str(model_dir / "training" / "model.safetensors"))
    onnx.save(own_decoder(weights, config), str(tmp_path / "fp32.onnx"))
    (tmp_path / "val.jsonl").write_text(json.dumps({"origin": "test", "path": "pkg/config.py", "text": SOURCE}) + "\n")
    (tmp_path / "train.jsonl").write_text(json.dumps({"path": "pkg/other.py", "text": "x = 1\n"}) + "\n")
    before = (model_dir / "manifest.json").read_bytes()
    run = subprocess.run([sys.executable, "scripts/eval.py", "--val", str(tmp_path / "val.jsonl"),
                          "--train", str(tmp_path / "train.jsonl"), "--fp32-onnx", str(tmp_path / "fp32.onnx"),
                          "--positions", "6"], capture_output=True, text=True, timeout=300,
                         cwd=model_dir.parent.parent)
    assert run.returncode == 0, run.stderr
    assert "6 positions" in run.stdout
    rows = {line.split("|")[1].strip(): [cell.strip() for cell in line.split("|")[2:-1]]
            for line in run.stdout.splitlines() if line.startswith(("| INT8", "| fp32"))}
    assert set(rows) == {"INT8 (shipped)", "fp32"}
    for cells in rows.values():
        exact1, half_width = (float(part.rstrip(" %")) for part in cells[0].split("±"))
        p = exact1 / 100
        assert half_width == pytest.approx(round(100 * Z_95 * math.sqrt(p * (1 - p) * 6 / 5) / math.sqrt(6), 2),
                                           abs=0.01)
    paired = next(line for line in run.stdout.splitlines() if line.startswith("INT8 − fp32 exact@1"))
    int8_exact1, fp32_exact1 = (float(rows[name][0].split(" %")[0]) for name in ("INT8 (shipped)", "fp32"))
    assert float(paired.split(": ")[1].split(" ±")[0]) == pytest.approx(int8_exact1 - fp32_exact1, abs=0.01)
    assert (model_dir / "manifest.json").read_bytes() == before, "no --update-model-card: the bundle is untouched"


def test_baseline_on_the_same_positions_gives_a_paired_gain(tmp_path, model_dir):
    """The committed bundle against itself: every position agrees, so the gain is exactly zero. (First, a
    validation file that is a copy of a training file leaves no positions: a clear refusal.)"""
    (tmp_path / "val.jsonl").write_text(json.dumps({"origin": "test", "path": "pkg/config.py", "text": SOURCE}) + "\n")
    run = subprocess.run([sys.executable, "scripts/eval.py", "--val", str(tmp_path / "val.jsonl"),
                          "--train", str(tmp_path / "val.jsonl"), "--fp32-onnx", "none", "--baseline", str(model_dir),
                          "--positions", "4"],
                         capture_output=True, text=True, timeout=300, cwd=model_dir.parent.parent)
    assert run.returncode != 0 and "no cursor positions" in run.stderr and "skipping 1 copies" in run.stderr
    (tmp_path / "train.jsonl").write_text(json.dumps({"path": "pkg/other.py", "text": "x = 1\n"}) + "\n")
    run = subprocess.run([sys.executable, "scripts/eval.py", "--val", str(tmp_path / "val.jsonl"),
                          "--train", str(tmp_path / "train.jsonl"), "--fp32-onnx", "none",
                          "--baseline", str(model_dir), "--positions", "4"],
                         capture_output=True, text=True, timeout=300, cwd=model_dir.parent.parent)
    assert run.returncode == 0, run.stderr
    assert ("INT8 − baseline exact@1 on the same positions: +0.0 ± 0.0 points (95 %, paired; the two differ at 0 "
            "of 4 positions)") in run.stdout


def test_baseline_beams_compares_two_beam_widths_of_one_bundle(tmp_path, model_dir):
    """The same bundle at 4 beams against 1 beam: the baseline row names its width, and each paired
    difference is the difference of the two rows' rates."""
    (tmp_path / "val.jsonl").write_text(json.dumps({"origin": "test", "path": "pkg/config.py", "text": SOURCE}) + "\n")
    (tmp_path / "train.jsonl").write_text(json.dumps({"path": "pkg/other.py", "text": "x = 1\n"}) + "\n")
    command = [sys.executable, "scripts/eval.py", "--val", str(tmp_path / "val.jsonl"), "--train",
               str(tmp_path / "train.jsonl"), "--fp32-onnx", "none", "--positions", "8", "--beams", "4"]
    refused = subprocess.run(command + ["--baseline-beams", "1"], capture_output=True, text=True, timeout=120,
                             cwd=model_dir.parent.parent)
    assert refused.returncode == 2 and "--baseline-beams needs --baseline" in refused.stderr
    run = subprocess.run(command + ["--baseline", str(model_dir), "--baseline-beams", "1"], capture_output=True,
                         text=True, timeout=300, cwd=model_dir.parent.parent)
    assert run.returncode == 0, run.stderr
    rows = {line.split("|")[1].strip(): [float(cell.split(" %")[0]) for cell in line.split("|")[2:6]]
            for line in run.stdout.splitlines() if line.startswith(("| INT8", "| baseline"))}
    assert set(rows) == {"INT8 (shipped)", "baseline (INT8, 1 beam)"}
    for column, label in ((0, "exact@1"), (1, "exact@5"), (3, "edit sim (whole line)")):
        paired = next(line for line in run.stdout.splitlines() if line.startswith(f"INT8 − baseline {label}"))
        gain = rows["INT8 (shipped)"][column] - rows["baseline (INT8, 1 beam)"][column]
        assert float(paired.split(": ")[1].split(" ±")[0]) == pytest.approx(gain, abs=0.02)  # both rounded


def test_outcomes_saved_by_one_run_give_paired_differences_in_a_later_one(tmp_path, model_dir):
    """--outcomes-out then --paired-with, as across a change of the engine's code; here the change is the
    beam width. Each paired difference is the difference of the two runs' rates, and outcomes for other
    positions are refused."""
    (tmp_path / "val.jsonl").write_text(json.dumps({"origin": "test", "path": "pkg/config.py", "text": SOURCE}) + "\n")
    (tmp_path / "train.jsonl").write_text(json.dumps({"path": "pkg/other.py", "text": "x = 1\n"}) + "\n")
    command = [sys.executable, "scripts/eval.py", "--val", str(tmp_path / "val.jsonl"), "--train",
               str(tmp_path / "train.jsonl"), "--fp32-onnx", "none"]
    saved, four = tmp_path / "one-beam.json", tmp_path / "four-beams.json"
    runs = {}
    for beams, extra in (("1", ["--outcomes-out", str(saved)]),
                         ("4", ["--paired-with", str(saved), "--outcomes-out", str(four)])):
        runs[beams] = subprocess.run(command + ["--positions", "8", "--beams", beams] + extra, capture_output=True,
                                     text=True, timeout=300, cwd=model_dir.parent.parent)
        assert runs[beams].returncode == 0, runs[beams].stderr
    rates = {beams: [float(cell.split(" %")[0]) for cell in next(
        line for line in run.stdout.splitlines() if line.startswith("| INT8")).split("|")[2:6]]
        for beams, run in runs.items()}
    for column, label in ((0, "exact@1"), (1, "exact@5"), (3, "edit sim (whole line)")):
        paired = next(line for line in runs["4"].stdout.splitlines()
                      if line.startswith(f"INT8 − one-beam.json {label}"))
        assert float(paired.split(": ")[1].split(" ±")[0]) == pytest.approx(rates["4"][column] - rates["1"][column],
                                                                            abs=0.02)
    compared = subprocess.run([sys.executable, "scripts/eval.py", "--compare", str(four), str(saved)],
                              capture_output=True, text=True, timeout=60, cwd=model_dir.parent.parent)
    assert compared.returncode == 0, compared.stderr
    paired_lines = [line.split(" ", 3)[3] for line in runs["4"].stdout.splitlines() if " − one-beam.json " in line]
    assert [line.split(" ", 3)[3] for line in compared.stdout.splitlines() if line] == paired_lines
    assert len(paired_lines) == 3 and compared.stdout.startswith("four-beams.json − one-beam.json exact@1")
    pooled = subprocess.run([sys.executable, "scripts/eval.py", "--compare", str(four), str(saved), "--compare",
                             str(four), str(saved)], capture_output=True, text=True, timeout=60,
                            cwd=model_dir.parent.parent)
    assert pooled.returncode == 0, pooled.stderr
    for single, twice in zip(paired_lines, [line for line in pooled.stdout.splitlines() if line], strict=True):
        assert "and 1 more pair, pooled" in twice
        sentence = r": ([-+][\d.]+) ± ([\d.]+) points.* at (\d+) of (\d+)"
        (m1, h1, d1, n1), (m2, h2, d2, n2) = (re.search(sentence, line).groups() for line in (single, twice))
        assert m1 == m2 and int(d2) == 2 * int(d1) and int(n2) == 2 * int(n1) and float(h2) <= float(h1)
    shorter = json.loads(four.read_text())
    shorter["positions"] = shorter["positions"][:-1]
    (tmp_path / "shorter.json").write_text(json.dumps(shorter))
    mismatched = subprocess.run([sys.executable, "scripts/eval.py", "--compare", str(tmp_path / "shorter.json"),
                                 str(saved)], capture_output=True, text=True, timeout=60, cwd=model_dir.parent.parent)
    assert mismatched.returncode != 0 and "not for the same positions" in mismatched.stderr
    other = subprocess.run(command + ["--positions", "6", "--paired-with", str(saved)], capture_output=True, text=True,
                           timeout=120, cwd=model_dir.parent.parent)
    assert other.returncode != 0 and "its positions are not this run's" in other.stderr
    (tmp_path / "junk.json").write_text("[1, 2]")
    junk = subprocess.run(command + ["--paired-with", str(tmp_path / "junk.json")], capture_output=True, text=True,
                          timeout=120, cwd=model_dir.parent.parent)
    assert junk.returncode != 0 and "not outcomes written by --outcomes-out" in junk.stderr
    assert "Traceback" not in other.stderr + junk.stderr
    nowhere = subprocess.run(command + ["--outcomes-out", str(tmp_path / "no-dir" / "x.json")], capture_output=True,
                             text=True, timeout=60, cwd=model_dir.parent.parent)
    assert nowhere.returncode == 2 and "no such directory" in nowhere.stderr  # refused before any evaluation


def test_one_position_card_has_no_interval_and_stays_strict_json(tmp_path, model_dir):
    """One position has no interval and only one kind: the card says so and manifest.json stays valid JSON."""
    import shutil

    bundle = tmp_path / "bundle"
    bundle.mkdir()
    for path in model_dir.iterdir():  # the bundle's files; its training/ stays behind
        if path.is_file():
            shutil.copyfile(path, bundle / path.name)
    (tmp_path / "val.jsonl").write_text(json.dumps({"origin": "test", "path": "pkg/config.py", "text": SOURCE}) + "\n")
    (tmp_path / "train.jsonl").write_text(json.dumps({"path": "pkg/other.py", "text": "x = 1\n"}) + "\n")
    command = [sys.executable, "scripts/eval.py", "--bundle", str(bundle), "--val", str(tmp_path / "val.jsonl"),
               "--train", str(tmp_path / "train.jsonl"), "--fp32-onnx", "none", "--positions", "1"]
    refused = subprocess.run(command + ["--update-model-card", "--baseline", str(model_dir)], capture_output=True,
                             text=True, timeout=120, cwd=model_dir.parent.parent)
    assert refused.returncode == 2 and "--baseline does not go with --update-model-card" in refused.stderr
    run = subprocess.run(command + ["--update-model-card"], capture_output=True, text=True, timeout=300,
                         cwd=model_dir.parent.parent)
    assert run.returncode == 0, run.stderr

    def no_constants(name):
        raise AssertionError(f"{name} in manifest.json")

    manifest = json.loads((bundle / "manifest.json").read_text(), parse_constant=no_constants)
    result = manifest["eval"]["results"]["INT8 (shipped)"]
    assert result["positions"] == 1 and result["exact_match_at_1_ci95"] is None
    assert result["exact_match_at_1_mid_line"] is None  # the one position is at a line start
    row = next(line for line in (bundle / "MODEL.md").read_text().splitlines() if line.startswith("| INT8"))
    assert "±" not in row and "| n/a |" in row


def test_missing_baseline_is_refused_before_any_evaluation(tmp_path, model_dir):
    run = subprocess.run([sys.executable, "scripts/eval.py", "--baseline", str(tmp_path / "nowhere"),
                          "--fp32-onnx", "none"], capture_output=True, text=True, timeout=120,
                         cwd=model_dir.parent.parent)
    assert run.returncode != 0
    assert "model bundle not found" in run.stderr and "nowhere" in run.stderr
    assert "Traceback" not in run.stderr


def test_search_errors_split_every_miss_into_search_model_filtered_or_too_long(tmp_path, model_dir, engine):
    from eval import missed_line_class

    before = SOURCE.split("write_config")[0] + "write_config(path, text):\n    "
    assert missed_line_class(engine, "file:///miss.py", before, "with open(path) as out:", []) == "search"
    assert missed_line_class(engine, "file:///miss.py", before, "with open(path) as out:", [0.0]) == "model"
    assert missed_line_class(engine, "file:///miss.py", before, "x = " + " + ".join("abcdefghijklmnop"), [-1.0]) \
        == "too long"
    assert missed_line_class(engine, "file:///miss.py", before, "with open(path", [-1.0]) == "filtered"
    (tmp_path / "val.jsonl").write_text(json.dumps({"origin": "test", "path": "pkg/config.py", "text": SOURCE}) + "\n")
    (tmp_path / "train.jsonl").write_text(json.dumps({"path": "pkg/other.py", "text": "x = 1\n"}) + "\n")
    run = subprocess.run([sys.executable, "scripts/eval.py", "--val", str(tmp_path / "val.jsonl"), "--train",
                          str(tmp_path / "train.jsonl"), "--fp32-onnx", "none", "--positions", "10", "--beams", "1",
                          "--baseline", str(model_dir), "--baseline-beams", "4", "--search-errors"],
                         capture_output=True, text=True, timeout=300, cwd=model_dir.parent.parent)
    assert run.returncode == 0, run.stderr
    positions = int(re.search(r"(\d+) positions \(half", run.stdout).group(1))
    for row in ("INT8 (shipped)", "baseline (INT8, 4 beams)"):  # each row gets its own account of its misses
        exact5 = float(next(line for line in run.stdout.splitlines() if line.startswith(f"| {row} |")).split("|")[3]
                       .split(" %")[0])
        sentence = next(line for line in run.stdout.splitlines() if line.startswith(f"{row}: of the "))
        missed = int(re.search(r"of the (\d+) positions", sentence).group(1))
        search, model, filtered, too_long = (int(n) for n in re.findall(r"\bat (\d+)\b", sentence))
        assert missed == round(positions * (1 - exact5 / 100)) == search + model + filtered + too_long
        assert missed > 0


def test_open_files_are_the_nearest_files_of_the_same_project():
    keys = [("a", "pkg/core/x.py"), ("a", "pkg/core/y.py"), ("a", "pkg/util.py"), ("a", "tests/t.py"),
            ("b", "pkg/core/z.py"), ("c", "alone.py")]
    chosen = open_files(keys, 2)
    assert chosen[("a", "pkg/core/x.py")] == [("a", "pkg/core/y.py"), ("a", "pkg/util.py")]  # directories shared
    assert chosen[("a", "tests/t.py")] == [("a", "pkg/core/x.py"), ("a", "pkg/core/y.py")]  # none shared: by path
    assert chosen[("b", "pkg/core/z.py")] == [] and chosen[("c", "alone.py")] == []  # never another project's
    assert open_file_keys({"a:pkg/x.py": "", "a:pkg/y.py": "", "b:pkg/x.py": ""}, 4) == {
        "a:pkg/x.py": ["a:pkg/y.py"], "a:pkg/y.py": ["a:pkg/x.py"], "b:pkg/x.py": []}


def test_open_files_bring_a_line_written_out_in_another_file_of_the_project(model_dir):
    """evaluate() hands the engine the project's other files: the registration written out in one is found
    in the other only then."""
    line, column = BESIDE_OTHER_FILE_CURSOR
    files = {"proj:pkg/install.py": BESIDE_OTHER_FILE.rsplit("\n", 1)[0] + "\n" + FROM_OTHER_FILE + "\n",
             "proj:pkg/registry.py": OTHER_FILE}
    position = [Position("proj:pkg/install.py", line, column, "mid-line")]
    opened = {0: None, 1: OpenFiles(1, open_file_keys(files, 1), files)}
    found = {count: evaluate(model_dir, files, position, beams=5, opened=opened[count])[1]["exact5"]
             for count in (0, 1)}
    assert found == {0: [0.0], 1: [1.0]}


def test_first_by_score_measures_the_likeliest_line_and_the_default_the_consensus(model_dir):
    """evaluate() passes the choice of the first line to the engine. Where `def add(self, item, count=1):`
    starts, the likeliest line is `@property`, and the one nearest all the lines the search found is a `def`,
    nearer the actual line too."""
    files = {"proj:sample.py": SAMPLE_TEXT}
    position = [Position("proj:sample.py", 16, 4, "line-start")]
    assert SAMPLE_TEXT.split("\n")[16] == "    def add(self, item, count=1):"
    by_score, by_consensus = (evaluate(model_dir, files, position, beams=5, first_by_consensus=flag)[1]
                              for flag in (False, True))
    assert by_score["exact1"] == by_consensus["exact1"] == [0.0]
    assert by_consensus["line_edit_sim"][0] > by_score["line_edit_sim"][0]


def test_imported_open_files_are_the_projects_modules_the_file_imports(tmp_path):
    """From either split, in import order, relative imports resolved; never another project's module."""
    files = {"proj:pkg/install.py": "import os\nfrom pkg import registry\nfrom .helpers import thing\n",
             "proj:pkg/helpers.py": "thing = 1\n", "other:pkg/registry.py": "no = 1\n"}
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in (
        {"origin": "proj", "path": "pkg/registry.py", "text": OTHER_FILE},
        {"origin": "proj", "path": "pkg/unused.py", "text": "x = 1\n"})))
    opened = imported_open_files(files, tmp_path / "train.jsonl", 4)
    assert opened.keys["proj:pkg/install.py"] == ["proj:pkg/registry.py", "proj:pkg/helpers.py"]
    assert opened.keys["proj:pkg/helpers.py"] == [] and opened.keys["other:pkg/registry.py"] == []
    assert opened.texts == {"proj:pkg/registry.py": OTHER_FILE, "proj:pkg/helpers.py": "thing = 1\n"}
    assert imported_open_files(files, tmp_path / "train.jsonl", 1).keys["proj:pkg/install.py"] == [
        "proj:pkg/registry.py"]


def test_a_machine_without_the_corpus_is_told_how_to_get_one_not_shown_a_traceback(tmp_path, model_dir):
    """README's `eval.py --update-model-card` reads the corpus's validation split from the cache dir; where
    scripts/corpus.py never ran (an empty COMPLETER_CACHE), or --val or --train names no file, one line says so."""
    env = {**os.environ, "COMPLETER_CACHE": str(tmp_path / "cache")}
    (tmp_path / "val.jsonl").write_text(json.dumps({"origin": "p", "path": "a.py", "text": SOURCE}) + "\n")
    for extra, message in (([], "no validation split at"), (["--val", str(tmp_path / "none.jsonl")], "none.jsonl"),
                           (["--val", str(tmp_path / "val.jsonl"), "--train", str(tmp_path / "gone.jsonl")],
                            "no training split at")):
        run = subprocess.run([sys.executable, "scripts/eval.py", "--positions", "1", "--fp32-onnx", "none", *extra],
                             capture_output=True, text=True, timeout=60, cwd=model_dir.parent.parent, env=env)
        assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr[-2000:]
        assert message in run.stderr.strip().splitlines()[-1]


def test_open_files_out_of_range_is_refused(tmp_path, model_dir):
    run = subprocess.run([sys.executable, "scripts/eval.py", "--open-files", "17", "--positions", "1"],
                         capture_output=True, text=True, timeout=60, cwd=model_dir.parent.parent)
    assert run.returncode == 2 and "--open-files must be between 0 and 16" in run.stderr
    (tmp_path / "val.jsonl").write_text(json.dumps({"origin": "p", "path": "a.py", "text": SOURCE}) + "\n")
    (tmp_path / "elsewhere.jsonl").write_text(json.dumps({"path": "b.py", "text": "x = 1\n"}) + "\n")
    missing = subprocess.run([sys.executable, "scripts/eval.py", "--open-files", "2", "--open-from", "imports",
                              "--positions", "1", "--val", str(tmp_path / "val.jsonl"), "--train",
                              str(tmp_path / "elsewhere.jsonl"), "--fp32-onnx", "none"],
                             capture_output=True, text=True, timeout=60, cwd=model_dir.parent.parent)
    assert missing.returncode == 1 and "train.jsonl is missing" in missing.stderr and "Traceback" not in missing.stderr


@pytest.mark.parametrize("extra, message", [(["--suggestions", "0"], "--suggestions must be between 1 and 16"),
                                            (["--suggestions", "3", "--update-model-card"],
                                             "the card's exact@5 needs five"),
                                            (["--stop-margin", "0"], "--stop-margin must be above 0"),
                                            (["--stop-margin", "nan"], "--stop-margin must be above 0"),
                                            (["--stop-margin", "4", "--update-model-card"],
                                             "the card records the engine as it ships")])
def test_suggestions_or_margin_out_of_range_or_for_the_card_are_refused(model_dir, extra: list[str], message: str):
    run = subprocess.run([sys.executable, "scripts/eval.py", "--positions", "1", *extra], capture_output=True,
                         text=True, timeout=60, cwd=model_dir.parent.parent)
    assert run.returncode == 2 and message in run.stderr


def test_the_workspace_ceiling_counts_only_lines_another_file_holds_and_the_file_does_not_hold_above():
    from workspace_ceiling import ceiling

    files = {"pkg:a.py": "import os\nx = helper(1)\nx = helper(1)\n", "pkg:b.py": "def helper(n):\nx = helper(1)\n",
             "other:c.py": "import os\n"}
    positions = [["pkg:a.py", 0, 0, "line-start"],  # "import os": only another package's file holds it
                 ["pkg:a.py", 1, 4, "mid-line"],  # b.py holds it, a.py does not above it: the workspace's to supply
                 ["pkg:a.py", 2, 0, "line-start"]]  # b.py holds it, but so does a.py's line above
    counts = ceiling(files, positions, in_file=[1.0, 0.0, 1.0], workspace=[1.0, 1.0, 0.0])
    assert (counts["elsewhere_only"], counts["elsewhere_too"]) == (1, 1)
    assert (counts["elsewhere_only_in_file_right"], counts["elsewhere_only_workspace_right"]) == (0, 1)
    assert counts["max_gain_points"] == 33.3 and counts["gain_points"] == 0.0
    assert counts["gain_on_elsewhere_only_points"] == 33.3
