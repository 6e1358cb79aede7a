"""Training windows that hold the workspace's snippets before the file: does a model read them, can it learn to?

A model reads the workspace's snippets in its prompt only if it was trained on prompts that hold them. This script
makes such windows from whole packages, with the server's own picker (completer/workspace.py: the windows of the
package's other files most like the 40 lines above a cursor), laid out for a model with no repository markers of its
own (`end_of_text_head`: each snippet's lines, then end-of-text, as files follow one another in its training
stream). It then measures, or trains on them:

    python scripts/repository_windows.py measure --checkpoint DIR          # does the model use the snippets?
    python scripts/repository_windows.py train --init DIR --out DIR2 --minutes 40

`measure` prints the loss on the same file tokens with the snippets before them and without (the file's own text
before them instead), on windows of the held-out split of the corpus (scripts/site_corpus.py over this
interpreter's packages, held-out packages left out, files split as corpus.py splits them). `train` goes on from a
checkpoint with half its windows laid out so and half plain windows of the stream, the loss counted on the file's
tokens only, and writes a checkpoint scripts/export.py reads.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
import zlib
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from model import GPT, GPTConfig  # noqa: E402
from site_corpus import build, distribution_sources, read_heldout, stdlib_source  # noqa: E402

from completer.repository import MIN_SNIPPET_LINES, RepositoryContext  # noqa: E402
from completer.text import clean  # noqa: E402
from completer.workspace import WorkspaceIndex  # noqa: E402

TOKENIZER = Path(__file__).resolve().parent.parent / "models" / "python-small" / "tokenizer.json"
END_OF_TEXT_ID = 0
SNIPPETS = 8  # as many as the server picks (lsp/workspace.py, SNIPPETS)
HEAD_SHARE = 4  # the snippets take at most a quarter of the window (as in completer/prompt.py, REPOSITORY_SHARE)
MEASURED_EVERY = 8  # packages kept out of training to measure on: one in this many
LINES_AFTER = 24  # a window ends at most this many lines after the cursor its snippets were picked for


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def end_of_text_head(repository: RepositoryContext, budget: int, encode: Callable[[str], list[int]],
                     end_of_text_id: int) -> list[int]:
    """The snippets as files of the training stream: each snippet's whole lines, then end-of-text; the best snippet
    last, nearest the document. At most `budget` tokens: the best snippets that fit (one cut at a line end where the
    rest of the budget holds MIN_SNIPPET_LINES of it); [] for no snippet."""
    newline = encode("\n")
    chosen: list[list[int]] = []
    room = budget
    for _, text in repository.files:
        lines = clean(text).rstrip("\n").split("\n")
        if not "".join(lines).strip() or room < 2:
            continue
        ids: list[int] = []
        kept = 0
        for line in lines:
            line_ids = encode(line) + newline
            if len(ids) + len(line_ids) + 1 > room:
                break
            ids += line_ids
            kept += 1
        if kept >= min(MIN_SNIPPET_LINES, len(lines)):
            chosen.append(ids + [end_of_text_id])
            room -= len(chosen[-1])
    return [i for ids in reversed(chosen) for i in ids]


class Packages:
    """The corpus's files by package, each package's files indexed as the server indexes a workspace folder."""

    def __init__(self, files: list[tuple[str, str, str]], min_files: int = 4) -> None:
        by_origin: dict[str, dict[str, str]] = defaultdict(dict)
        for origin, path, text in files:
            by_origin[origin][path] = text
        self.files = {o: f for o, f in by_origin.items() if len(f) >= min_files}
        self.indexes: dict[str, WorkspaceIndex] = {}

    def index(self, origin: str) -> WorkspaceIndex:
        if origin not in self.indexes:
            index = WorkspaceIndex(128 * 1024 * 1024)
            for path, text in self.files[origin].items():
                index.add(path, text)
            self.indexes[origin] = index
        return self.indexes[origin]


class Rows:
    """Windows of `block + 1` tokens: a file's text up to a few lines past a cursor, after the snippets picked
    for that cursor (or without them, after more of the file's own text), with a mask of the tokens to score."""

    def __init__(self, packages: Packages, tokenizer: Tokenizer, block: int, seed: int) -> None:
        self.packages, self.tokenizer, self.block = packages, tokenizer, block
        self.rng = np.random.default_rng(seed)
        self.newline_id = tokenizer.encode("\n", add_special_tokens=False).ids[0]
        self.choices = [(o, p) for o, files in packages.files.items() for p, t in files.items() if t.count("\n") > 20]
        if not self.choices:
            raise SystemExit("no package here has files of more than 20 lines to lay out windows of")

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def pick(self) -> tuple[str, str, list[str], int]:
        origin, path = self.choices[int(self.rng.integers(len(self.choices)))]
        lines = self.packages.files[origin][path].split("\n")
        return origin, path, lines, int(self.rng.integers(10, len(lines) - 1))

    def head(self, origin: str, path: str, before: str) -> list[int]:
        picked = self.packages.index(origin).snippets(before, path, SNIPPETS, self.packages.files[origin].get)
        context = RepositoryContext(origin.split("==", 1)[0], path, tuple((s.path, s.text) for s in picked))
        return end_of_text_head(context, self.block // HEAD_SHARE, self.encode, END_OF_TEXT_ID)

    def row(self, origin: str, path: str, lines: list[str], cursor: int, with_head: bool
            ) -> tuple[np.ndarray, np.ndarray, int] | None:
        """(ids, scored, tokens after the cursor) of one window; None when the picker found nothing for it."""
        before = "\n".join(lines[:cursor]) + "\n"
        head = self.head(origin, path, before) if with_head else []
        if with_head and not head:
            return None
        end = min(len(lines), cursor + 1 + int(self.rng.integers(0, LINES_AFTER)))
        body = self.encode("\n".join(lines[:end]) + "\n")
        after = len(body) - len(self.encode("\n".join(lines[:cursor]) + "\n"))  # newlines are lone tokens
        if not head:  # the engine's start marker: a newline and end-of-text, as after a file of the stream
            body = [self.newline_id, END_OF_TEXT_ID] + body
        take = self.block + 1 - len(head)
        body = body[-take:]
        ids = np.asarray(head + body, dtype=np.int64)
        scored = np.zeros(len(ids), dtype=bool)
        scored[len(head) + 1:] = True  # targets: the file's tokens (the first one's context is the head alone)
        if len(ids) < self.block + 1:  # a short file: pad at the end, unscored
            pad = self.block + 1 - len(ids)
            ids = np.concatenate([ids, np.full(pad, END_OF_TEXT_ID)])
            scored = np.concatenate([scored, np.zeros(pad, dtype=bool)])
        return ids, scored, max(1, min(after, int(scored.sum())))


def load(directory: Path) -> GPT:
    """The checkpoint in `directory` (config.json and model.safetensors, as scripts/train.py writes them)."""
    missing = [name for name in ("config.json", "model.safetensors") if not (directory / name).is_file()]
    if missing:
        raise SystemExit(f"{directory}: not a checkpoint ({' and '.join(missing)} missing)")
    cfg = GPTConfig(**json.loads((directory / "config.json").read_text()))
    model = GPT(cfg)
    model.load_state_dict(load_file(str(directory / "model.safetensors")))
    return model


def corpus_files(max_files: int | None, workers: int) -> tuple[list, list]:
    """The corpus's training files, split by package: one package in MEASURED_EVERY (by its name's hash) is kept
    out of training and measured on, with its files' neighbours, which a split by file would break up."""
    _, heldout = read_heldout()
    plan = distribution_sources(heldout)
    plan.sources.insert(0, stdlib_source())
    corpus = build(plan.sources, heldout, workers, max_files)
    measured = {o for o, _, _ in corpus.train if zlib.crc32(o.split("==")[0].encode()) % MEASURED_EVERY == 0}
    train = [f for f in corpus.train if f[0] not in measured]
    val = [f for f in corpus.train if f[0] in measured]
    log(f"corpus: {len(train):,} files to train on, {len(val):,} in {len(measured)} packages to measure on")
    return train, val


def masked_loss(model: GPT, ids: torch.Tensor, scored: torch.Tensor) -> torch.Tensor:
    logits = model(ids[:, :-1])  # (B, T, V)
    losses = F.cross_entropy(logits.reshape(-1, logits.size(-1)), ids[:, 1:].reshape(-1), reduction="none")
    mask = scored[:, 1:].reshape(-1).float()
    return (losses * mask).sum() / mask.sum()


@torch.no_grad()
def measure(model: GPT, rows: Rows, count: int) -> dict:
    """The loss on the tokens of the lines after a cursor, the same tokens with the snippets picked for that cursor
    before the file's text and without them, paired over `count` cursors."""
    model.eval()
    with_head, without = [], []
    while len(with_head) < count:
        origin, path, lines, cursor = rows.pick()
        state = rows.rng.bit_generator.state
        a = rows.row(origin, path, lines, cursor, True)
        rows.rng.bit_generator.state = state  # the same lines after the cursor in both
        b = rows.row(origin, path, lines, cursor, False)
        if a is None or b is None:
            continue
        for (ids, scored, after), out in ((a, with_head), (b, without)):
            last = np.zeros_like(scored)
            last[np.flatnonzero(scored)[-after:]] = True
            loss = masked_loss(model, torch.from_numpy(ids[None]), torch.from_numpy(last[None]))
            out.append(loss.item())
    model.train()
    diff = np.asarray(with_head) - np.asarray(without)
    return {"with_snippets": float(np.mean(with_head)), "without": float(np.mean(without)),
            "difference": float(diff.mean()), "difference_95": float(1.96 * diff.std(ddof=1) / math.sqrt(len(diff))),
            "windows": count}


def stream_rows(files: list[tuple[str, str, str]], tokenizer: Tokenizer) -> np.ndarray:
    ids: list[int] = []
    for _, _, text in files:
        ids += tokenizer.encode(text, add_special_tokens=False).ids + [END_OF_TEXT_ID]
    return np.asarray(ids, dtype=np.int64)


def train(args: argparse.Namespace, model: GPT, tokenizer: Tokenizer, train_files: list, val_files: list) -> None:
    torch.manual_seed(args.seed)
    block = model.cfg.context_length
    rows = Rows(Packages(train_files), tokenizer, block, args.seed)
    measured = Packages(val_files)  # the same windows before and after: a Rows of the same seed each time
    stream = stream_rows(train_files[:: max(1, len(train_files) // 4000)], tokenizer)
    log(f"{len(rows.choices):,} files to lay out; a plain stream of {len(stream):,} tokens")
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1)
    before = measure(model, Rows(measured, tokenizer, block, 99), args.measure_windows)
    log(f"before: {json.dumps(before)}")
    started, step, history = time.time(), 0, [{"step": 0, **before}]
    budget = args.minutes * 60
    while time.time() - started < budget:
        progress = (time.time() - started) / budget
        lr = args.lr * min(1.0, (step + 1) / args.warmup) * (0.1 + 0.9 * (1 - progress))
        for group in opt.param_groups:
            group["lr"] = lr
        batch, masks = [], []
        while len(batch) < args.batch_size:
            if len(batch) % 2:
                start = int(rows.rng.integers(0, len(stream) - block - 1))
                batch.append(stream[start:start + block + 1])
                masks.append(np.ones(block + 1, dtype=bool))
                continue
            row = rows.row(*rows.pick(), True)
            if row is not None:
                batch.append(row[0])
                masks.append(row[1])
        loss = masked_loss(model, torch.from_numpy(np.stack(batch)), torch.from_numpy(np.stack(masks)))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if step % 20 == 0:
            log(f"step {step} loss {loss.item():.4f} lr {lr:.2e} ({time.time() - started:.0f} s)")
    after = measure(model, Rows(measured, tokenizer, block, 99), args.measure_windows)
    history.append({"step": step, **after})
    log(f"after: {json.dumps(after)}")
    args.out.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(args.out / "model.safetensors"))
    (args.out / "config.json").write_text(json.dumps(model.cfg.to_dict(), indent=1))
    (args.out / "repository_windows.json").write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                                                  "steps": step, "history": history}, indent=1))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("action", choices=("measure", "train"))
    p.add_argument("--checkpoint", "--init", dest="init", type=Path, default=Path("models/python-small/training"))
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--minutes", type=float, default=30.0)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--measure-windows", type=int, default=200)
    p.add_argument("--max-files", type=int, default=None)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.action == "train" and args.out is None:
        p.error("train needs --out")
    torch.set_num_threads(args.threads)
    model = load(args.init)  # before the corpus, which takes minutes to read
    tokenizer = Tokenizer.from_file(str(TOKENIZER))
    train_files, val_files = corpus_files(args.max_files, args.workers)
    if args.action == "measure":
        rows = Rows(Packages(val_files), tokenizer, model.cfg.context_length, 99)
        print(json.dumps(measure(model, rows, args.measure_windows), indent=1))
    else:
        train(args, model, tokenizer, train_files, val_files)


if __name__ == "__main__":
    main()
