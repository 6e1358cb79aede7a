"""scripts/replay_medians.py: the medians of saved bench_lsp.py runs, and p95 ratios within each round."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from replay_medians import read_runs, summary  # noqa: E402

ROW = "| textwrap.py (from line 60) | 400 | 744–870 (median 799) | {first} | 1.5 | {p95} | {first} | {mean} | 98% | 9% | 95 |"


def test_medians_and_per_round_ratios_of_labelled_runs():
    lines = ["$ the command", "# a comment: with a colon",
             "off: " + ROW.format(first=200, p95=50, mean=10), "on: " + ROW.format(first=300, p95=60, mean=12),
             "off: " + ROW.format(first=220, p95=40, mean=11), "on: " + ROW.format(first=320, p95=50, mean=13),
             "off: " + ROW.format(first=210, p95=45, mean=12), "on: " + ROW.format(first=310, p95=45, mean=14),
             "on: not a row"]
    runs = read_runs(lines)
    assert list(runs) == ["off", "on"] and runs["on"]["p95_ms"] == [60, 50, 45]
    table = summary(runs)
    assert table[2] == "| off | 3 | 210.00 | 1.50 | 45.00 | 11.00 | 1.000 | 1.000 |"
    assert table[3] == "| on | 3 | 310.00 | 1.50 | 50.00 | 13.00 | 1.111 | 1.200 |"  # ratios 1.2, 1.25, 1.0
    assert summary({}) == ["no runs found"]


def test_one_block_of_a_file_that_holds_several(tmp_path: Path):
    import subprocess

    saved = tmp_path / "runs.txt"
    saved.write_text("\n".join(["# first", "a: " + ROW.format(first=1, p95=10, mean=1),
                                "# second", "a: " + ROW.format(first=2, p95=20, mean=2),
                                "# third", "a: " + ROW.format(first=3, p95=30, mean=3)]) + "\n")
    script = Path(__file__).resolve().parent.parent / "scripts" / "replay_medians.py"

    def p95s(*options: str) -> str:
        out = subprocess.run([sys.executable, str(script), str(saved), *options], capture_output=True, text=True,
                             check=True).stdout
        return out.splitlines()[2].split("|")[5].strip()

    assert p95s("--after", "# second", "--until", "# third") == "20.00"
    assert p95s("--after", "# second") == "25.00"  # the second block and everything after it
    assert p95s("--until", "# second") == "10.00"
