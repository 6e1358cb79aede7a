"""Fit the share of the document's repeats in the beam step (completer/repeats.py, SHARE_BY_MATCH).

For every token of some validation windows it takes the model's probability of the actual next token
(fp32, PyTorch) and the repeat distribution of completer/repeats.py over the same file's tokens before
it. Then, per band of longest-match lengths, it picks the share that minimizes the mixture's loss on
half the windows (never less than a shorter match's: a longer match is no less sure) and reports the
loss of those shares on the other half, so the gain printed is measured on tokens the fit did not see.

    python scripts/fit_repeats.py --windows 192
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from paths import REPO_ROOT, corpus_dir  # noqa: E402

from completer.repeats import MAX_MATCH, SHARE_BY_MATCH, DocumentRepeats  # noqa: E402

BANDS = tuple(upto for upto, _ in SHARE_BY_MATCH)
SHARES = np.linspace(0.0, 0.95, 96)


def token_records(checkpoint: Path, val: Path, windows: int, block: int, seed: int
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per token: the window it came from, the model's p(actual), the longest match, p_repeat(actual)."""
    import torch
    from train import load_model

    model = load_model(checkpoint).eval()
    data = np.memmap(val, dtype=np.uint16, mode="r")
    starts = np.random.default_rng(seed).choice((len(data) - 1) // block, windows, replace=False) * block
    window_of, p_model, longest, p_repeat = [], [], [], []
    with torch.no_grad():
        for number, start in enumerate(starts):
            x = np.asarray(data[start:start + block + 1], dtype=np.int64)  # [block + 1]
            logp = torch.log_softmax(model(torch.from_numpy(x[None, :block]))[0].float(), -1).numpy()  # [block, V]
            file_start = 0
            for t in range(block):
                if x[t] == 0:  # end of text: a new file begins, and repeats count only within a file
                    file_start = t
                match, followers = DocumentRepeats(x[file_start:t + 1], logp.shape[1]).longest_match()
                window_of.append(number)
                p_model.append(np.exp(logp[t, x[t + 1]]))
                longest.append(match)
                p_repeat.append(float(np.mean(followers == x[t + 1])) if match else 0.0)
    return np.array(window_of), np.array(p_model), np.array(longest), np.array(p_repeat)


def band_of(longest: np.ndarray) -> np.ndarray:
    """The index into SHARE_BY_MATCH of each match length (-1: no match)."""
    return np.where(longest > 0, np.searchsorted(np.array(BANDS), np.minimum(longest, MAX_MATCH)), -1)


def mixture_loss(p_model: np.ndarray, p_repeat: np.ndarray, share: float | np.ndarray) -> np.ndarray:
    return -np.log((1 - share) * p_model + share * p_repeat)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, default=REPO_ROOT / "models" / "python-small" / "training")
    parser.add_argument("--val", type=Path, default=None, help="validation tokens (default: the first shard's)")
    parser.add_argument("--windows", type=int, default=192)
    parser.add_argument("--block", type=int, default=1024)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    window_of, p_model, longest, p_repeat = token_records(args.checkpoint, args.val or corpus_dir() / "val.bin",
                                                          args.windows, args.block, args.seed)
    bands = band_of(longest)
    fit, held_out = window_of % 2 == 0, window_of % 2 == 1
    fitted: list[tuple[int, float]] = []
    print("| longest match (tokens) | tokens | model loss | share | mixture loss | (held-out half) |")
    print("|---|---|---|---|---|---|")
    shares = np.zeros(len(p_model))
    lower = 1
    for index, upto in enumerate(BANDS):
        chosen = fit & (bands == index)
        share = float(SHARES[np.argmin([mixture_loss(p_model[chosen], p_repeat[chosen], s).mean() for s in SHARES])])
        share = max(share, fitted[-1][1] if fitted else 0.0)
        fitted.append((upto, round(share, 2)))
        shares[bands == index] = share
        tested = held_out & (bands == index)
        print(f"| {lower}–{upto} | {chosen.sum():,} | {-np.log(p_model[tested]).mean():.3f} | {share:.2f} | "
              f"{mixture_loss(p_model[tested], p_repeat[tested], share).mean():.3f} | {tested.sum():,} tokens |")
        lower = upto + 1
    base = -np.log(p_model[held_out]).mean()
    mixed = mixture_loss(p_model[held_out], p_repeat[held_out], shares[held_out]).mean()
    shipped = np.array([dict(SHARE_BY_MATCH).get(BANDS[b], 0.0) if b >= 0 else 0.0 for b in bands[held_out]])
    print(f"\nheld-out half ({held_out.sum():,} tokens): model {base:.4f} nats/token, with the fitted shares "
          f"{mixed:.4f} ({mixed - base:+.4f}), with completer/repeats.py's shares "
          f"{mixture_loss(p_model[held_out], p_repeat[held_out], shipped).mean():.4f}")
    print(f"fitted SHARE_BY_MATCH = {tuple(fitted)}")


if __name__ == "__main__":
    main()
