"""Fit the share of the document's repeats in the beam step (completer/repeats.py, SHARE_BY_MATCH).

It mirrors what the engine does at a cursor. In some validation windows of the model's context length,
for each token of a window's second half (where the model sees at least half a window, as the engine's
sliding window lets it), it takes the model's probability of the actual next token (fp32, PyTorch) and
the repeat distribution of completer/repeats.py over the same file's tokens before it, back to the
engine's clip (MAX_CONTEXT_CHARS of text), with the model's window marked. Then, per band of
longest-match lengths and for matches the window holds or not, it picks the share that minimizes the
mixture's loss on half the windows (never less than a shorter match's: a longer match is no less sure)
and reports the loss of those shares on the other half, so the gain printed is measured on tokens the
fit did not see. `--window-only` searches the window alone, as the engine did before it looked back.
`--open-files N` also searches the heads of N other validation files of the window's project, nearest in
the directory tree (scripts/open_files.py, as `eval.py --open-files` picks them), placed before the
document as the engine places other open files, which fits the shares of matches that lie only there.

    python scripts/fit_repeats.py --windows 400
    python scripts/fit_repeats.py --windows 400 --open-files 4
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from open_files import open_files  # noqa: E402
from paths import REPO_ROOT, corpus_dir  # noqa: E402
from shards import file_spans  # noqa: E402

from completer.engine import MAX_CONTEXT_CHARS  # noqa: E402
from completer.repeats import (BEFORE_WINDOW, IN_WINDOW, MAX_MATCH, OTHER_FILES, SHARE_BY_MATCH,  # noqa: E402
                               DocumentRepeats)
from completer.text import OTHER_FILE_CHARS  # noqa: E402
from completer.tokens import Tokens  # noqa: E402

BANDS = tuple(upto for upto, *_ in SHARE_BY_MATCH)
PLACES = ((IN_WINDOW, "window"), (BEFORE_WINDOW, "before the window"), (OTHER_FILES, "other files only"))
SHARES = np.linspace(0.0, 0.95, 96)
END_OF_TEXT = 0  # separates files in the token arrays


def other_file_heads(val: Path, token_bytes: np.ndarray, newline: int, data: np.ndarray, count: int
                     ) -> tuple[np.ndarray, list[np.ndarray]]:
    """Where each file of the split begins in `data`, and per file the tokens of the heads of its `count`
    open files, concatenated: each cut after its last newline within OTHER_FILE_CHARS bytes, as the engine
    cuts whole lines within as many characters."""
    records, starts, ends = file_spans(val.parent, val.stem)
    keys = [(r["origin"], r["path"]) for r in records]
    index = {key: i for i, key in enumerate(keys)}
    heads = []
    for start, end in zip(starts, ends):
        tokens = np.asarray(data[start:end], dtype=np.int64)
        fits = int(np.searchsorted(np.cumsum(token_bytes[tokens]), OTHER_FILE_CHARS, side="right"))
        newlines = np.flatnonzero(tokens[:fits] == newline)
        heads.append(tokens[:newlines[-1] + 1] if fits < tokens.size and newlines.size else tokens[:fits])
    chosen = open_files(keys, count)
    joined = [np.concatenate([heads[index[o]] for o in chosen[key]] or [np.zeros(0, np.int64)]) for key in keys]
    return starts, joined


def token_records(checkpoint: Path, val: Path, windows: int, block: int, seed: int, window_only: bool,
                  open_count: int = 0) -> dict[str, np.ndarray]:
    """Per counted token: its window, the model's p(actual), the longest match, p_repeat(actual), and
    where the longest matches lie (IN_WINDOW, BEFORE_WINDOW, OTHER_FILES)."""
    import torch
    from train import load_model

    model = load_model(checkpoint).eval()
    tokens = Tokens(checkpoint.parent / "tokenizer.json")
    token_bytes = np.array([len(b) for b in tokens.token_bytes])  # [V]
    data = np.memmap(val, dtype=np.uint16, mode="r")
    file_starts = np.flatnonzero(np.asarray(data) == END_OF_TEXT)  # [F] each file begins at its separator
    starts = np.random.default_rng(seed).choice((len(data) - 1) // block, windows, replace=False) * block
    if open_count:
        span_starts, others = other_file_heads(val, token_bytes, tokens.newline_id, data, open_count)
    records: dict[str, list] = {"window": [], "p_model": [], "longest": [], "p_repeat": [], "where": []}
    with torch.no_grad():
        for number, start in enumerate(starts):
            x = np.asarray(data[start:start + block + 1], dtype=np.int64)  # [block + 1]
            logp = torch.log_softmax(model(torch.from_numpy(x[None, :block]))[0].float(), -1).numpy()  # [block, V]
            for t in range(block // 2, block):
                cursor = start + t  # the last token before the cursor, in the whole array
                file_start = int(file_starts[np.searchsorted(file_starts, cursor, side="right") - 1]) \
                    if file_starts.size and file_starts[0] <= cursor else 0
                window_start = max(start, file_start)
                # a token holds at least one byte, so the clip lies no further back than MAX_CONTEXT_CHARS tokens
                first = window_start if window_only else max(file_start, cursor + 1 - MAX_CONTEXT_CHARS)
                document = np.asarray(data[first:cursor + 1], dtype=np.int64)
                chars = np.cumsum(token_bytes[document][::-1])  # [N] text from each token to the cursor
                document = document[len(document) - int(np.searchsorted(chars, MAX_CONTEXT_CHARS, side="right")):]
                window_from = max(0, len(document) - (cursor + 1 - window_start))
                other = others[np.searchsorted(span_starts, cursor, side="right") - 1] if open_count else None
                if other is not None and other.size:
                    document = np.concatenate([other, document])
                    window_from += other.size
                repeats = DocumentRepeats(document, logp.shape[1], window_from,
                                          others_end=other.size if other is not None else 0)
                match, followers, where = repeats.longest_match()
                records["window"].append(number)
                records["p_model"].append(np.exp(logp[t, x[t + 1]]))
                records["longest"].append(match)
                records["p_repeat"].append(float(np.mean(followers == x[t + 1])) if match else 0.0)
                records["where"].append(where)
            print(f"\r{number + 1}/{windows} windows", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return {name: np.array(values) for name, values in records.items()}


def cell_of(longest: np.ndarray, where: np.ndarray) -> np.ndarray:
    """The index of each token's (band of SHARE_BY_MATCH, where the matches lie) cell (-1: no match)."""
    band = np.searchsorted(np.array(BANDS), np.minimum(longest, MAX_MATCH))
    return np.where(longest > 0, len(PLACES) * band + where, -1)


def mixture_loss(p_model: np.ndarray, p_repeat: np.ndarray, share: float | np.ndarray) -> np.ndarray:
    return -np.log((1 - share) * p_model + share * p_repeat)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, default=REPO_ROOT / "models" / "python-small" / "training")
    parser.add_argument("--val", type=Path, default=None, help="validation tokens (default: the first shard's)")
    parser.add_argument("--windows", type=int, default=400)
    parser.add_argument("--block", type=int, default=1024)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--window-only", action="store_true", help="search the model's window alone")
    parser.add_argument("--open-files", type=int, default=0, metavar="N",
                        help="also search the heads of N other validation files of the window's project")
    args = parser.parse_args()
    if args.open_files < 0:
        parser.error("--open-files must be 0 or more")
    if args.window_only and args.open_files:
        parser.error("--window-only searches the window alone: no --open-files")
    r = token_records(args.checkpoint, args.val or corpus_dir() / "val.bin", args.windows, args.block, args.seed,
                      args.window_only, args.open_files)
    cells = cell_of(r["longest"], r["where"])
    fit, held_out = r["window"] % 2 == 0, r["window"] % 2 == 1
    fitted = np.zeros((len(BANDS), len(PLACES)))  # [band, where the matches lie]
    shares = np.zeros(len(cells))
    print("| longest match (tokens) | where | tokens | model loss | share | mixture loss (held-out half) |")
    print("|---|---|---|---|---|---|")
    for band, upto in enumerate(BANDS):
        for place, name in PLACES:
            cell = len(PLACES) * band + place
            chosen = fit & (cells == cell)
            losses = [mixture_loss(r["p_model"][chosen], r["p_repeat"][chosen], s).mean() for s in SHARES]
            share = float(SHARES[np.argmin(losses)]) if chosen.any() else 0.0
            fitted[band, place] = share = max(share, fitted[band - 1, place] if band else 0.0)
            shares[cells == cell] = share
            tested = held_out & (cells == cell)
            if tested.any():
                print(f"| {(BANDS[band - 1] + 1) if band else 1}–{upto} | {name} "
                      f"| {tested.sum():,} | {-np.log(r['p_model'][tested]).mean():.3f} | {share:.2f} | "
                      f"{mixture_loss(r['p_model'][tested], r['p_repeat'][tested], share).mean():.3f} |")
    base = -np.log(r["p_model"][held_out]).mean()
    mixed = mixture_loss(r["p_model"][held_out], r["p_repeat"][held_out], shares[held_out]).mean()
    table = np.array([row[1:] for row in SHARE_BY_MATCH])  # [band, where]
    shipped = np.where(cells >= 0, table.reshape(-1)[np.maximum(cells, 0)], 0.0)[held_out]
    print(f"\nheld-out half ({held_out.sum():,} tokens): model {base:.4f} nats/token, with the fitted shares "
          f"{mixed:.4f} ({mixed - base:+.4f}), with completer/repeats.py's shares "
          f"{mixture_loss(r['p_model'][held_out], r['p_repeat'][held_out], shipped).mean():.4f}")
    print("fitted SHARE_BY_MATCH = " + repr(tuple((upto, *(round(float(share), 2) for share in row))
                                                  for upto, row in zip(BANDS, fitted))))


if __name__ == "__main__":
    main()
