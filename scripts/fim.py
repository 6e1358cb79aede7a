"""Fill-in-the-middle training windows, shaped for whole-line completion.

A window of tokens is cut at a cursor and at the end of the cursor's line (or one to four lines
further), then rearranged so that the model learns to write the middle from the text on both sides:

    PSM: <|fim_prefix|> prefix <|fim_suffix|> suffix <|fim_middle|> middle
    SPM: <|fim_prefix|> <|fim_suffix|> suffix <|fim_middle|> prefix middle

SPM (the variant of Bavarian et al. 2022, arXiv 2207.14255) keeps the prefix and the middle together at
the end, so an editor's typing only appends to a cached prompt. The middle ends with its newline, as
the engine's lines do, and the suffix starts at a line start. The three tokens added make the window
longer, so it loses them at the far end of the suffix (or at the start of the prefix when the suffix
is shorter). Both orders come from one tokenization of the whole window, so a cut always falls on a
token boundary, and the newline stays a token of its own.
"""
from __future__ import annotations

import numpy as np

FIM_TOKENS = ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>")
MAX_EXTRA_LINES = 4


def fim_window(window: np.ndarray, rng: np.random.Generator, prefix_id: int, suffix_id: int, middle_id: int,
               newline_id: int, end_of_text_id: int, spm: bool) -> np.ndarray:
    """The FIM form of `window` [N], the same length N. The middle runs from a random cursor to the end of
    that line, or 1 to MAX_EXTRA_LINES lines further half of the time, and never past the file's end."""
    n = len(window)
    cursor = int(rng.integers(0, n - 1))
    extra = 0 if rng.random() < 0.5 else int(rng.integers(1, MAX_EXTRA_LINES + 1))
    after = window[cursor:]
    file_end = np.flatnonzero(after == end_of_text_id)
    limit = int(file_end[0]) if len(file_end) else len(after)  # the middle stays in the cursor's file
    if limit == 0:  # the cursor is on a file's end: no middle to fill, the window stays plain
        return window.copy()
    newlines = np.flatnonzero(after[:limit] == newline_id)
    if len(newlines):
        end = cursor + int(newlines[min(extra, len(newlines) - 1)]) + 1
    else:
        end = cursor + limit
    prefix, middle, suffix = window[:cursor], window[cursor:end], window[end:]
    over = 3
    if len(prefix) + len(suffix) < over:  # a middle as long as the window: nothing to give up, keep it plain
        return window.copy()
    cut_suffix = min(over, len(suffix))
    suffix = suffix[:len(suffix) - cut_suffix]
    prefix = prefix[over - cut_suffix:]
    marks = np.asarray([prefix_id, suffix_id, middle_id], dtype=window.dtype)
    if spm:
        out = np.concatenate([marks[:2], suffix, marks[2:], prefix, middle])
    else:
        out = np.concatenate([marks[:1], prefix, marks[1:2], suffix, marks[2:], middle])
    return out


def fim_batch(windows: np.ndarray, rng: np.random.Generator, rate: float, fim_ids: tuple[int, int, int],
              newline_id: int, end_of_text_id: int) -> np.ndarray:
    """Windows [B, N] with each row, at `rate`, in FIM form: PSM or SPM with equal odds."""
    out = windows.copy()
    for row in np.flatnonzero(rng.random(len(windows)) < rate):
        out[row] = fim_window(windows[row], rng, *fim_ids, newline_id, end_of_text_id, spm=bool(rng.random() < 0.5))
    return out
