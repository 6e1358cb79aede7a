"""Train a new embedded model in one command on a lent GPU machine: corpus, tokens, training, files back.

    python3 scripts/gpu_train.py --shape 8x6x192 --minutes 9 --out "$OUT"

It builds the corpus on the spot from the interpreter that runs it (scripts/site_corpus.py: the stdlib
and the permissively licensed distributions installed beside it, held-out packages left out), encodes
it with the embedded model's tokenizer plus three fill-in-the-middle tokens on all cores, trains the
shape with bf16 autocast, flash attention and torch.compile, half of the windows in FIM form
(scripts/fim.py), and writes to --out: the weights in bf16 safetensors files of at most 15 MiB, the
tokenizer, run.json (config, corpus summary, validation history, timings) and, every two minutes, the
same files again, so a run cut short still returns its latest weights. `--minutes` bounds the whole
command. A shape whose files would not all come back from $OUT (8 files, 64 MiB) is refused at the start.
`--init` goes on from a checkpoint or from the files an earlier run returned. scripts/import_gpu_run.py
turns the files into a bundle. The runbook is scripts/README.md.

`--device cpu --max-files 40 --shape 2x2x32 --block 64` is the dry run the tests make.
"""
from __future__ import annotations

import time

STARTED = time.time()  # before the imports below (PyTorch's takes seconds on a cold machine): --minutes counts them

import argparse
import errno
import hashlib
import json
import math
import os
import platform
import queue
import shutil
import sys
import threading
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from tokenizers import AddedToken, Tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fim import FIM_TOKENS, fim_batch  # noqa: E402
from model import GPT, GPTConfig  # noqa: E402
from site_corpus import Plan, build, distribution_sources, folder_source, read_heldout, stdlib_source  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
BASE_TOKENIZER = REPO / "models" / "python-small" / "tokenizer.json"
END_OF_TEXT_ID = 0
SHARD_BYTES = 15 * 1024 * 1024
VOCAB_MULTIPLE = 64  # the embedding is padded to this for the tensor cores; import_gpu_run.py cuts it back
SAVE_EVERY_S = 120.0
RETURN_FILES = 8
RETURN_BYTES = 64 * 2**20
"""What a device call returns from $OUT at most (the device tool's README, Limits): 8 files, 64 MiB together."""
OTHER_FILES = ("run.json", "tokenizer.json", "train.log")
"""The files besides the weights that the runbook's call leaves in $OUT."""
OTHER_BYTES = 4 * 2**20
"""Room for run.json and the log beside the tokenizer."""


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def parse_shape(text: str) -> tuple[int, int, int]:
    try:
        layers, heads, width = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a shape is LAYERSxHEADSxWIDTH, e.g. 8x6x192") from None
    if min(layers, heads, width) < 1 or width % heads:
        raise argparse.ArgumentTypeError(f"{text!r}: the width must be a multiple of the heads, all above 0")
    return layers, heads, width


def fim_tokenizer(base: Path) -> Tokenizer:
    """The embedded model's tokenizer with the three FIM tokens added after its vocabulary, as specials:
    text never spells them, and the existing ids (newline, <|endoftext|>) stay where they are."""
    tokenizer = Tokenizer.from_file(str(base))
    before = tokenizer.get_vocab_size()
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in FIM_TOKENS])
    ids = [tokenizer.token_to_id(t) for t in FIM_TOKENS]
    if ids != list(range(before, before + 3)):
        raise SystemExit(f"{base}: the FIM tokens did not get ids {before}..{before + 2} ({ids}); is it already FIM?")
    return tokenizer


def encode_split(tokenizer: Tokenizer, files: list[tuple[str, str, str]], path: Path) -> tuple[int, dict[str, int]]:
    """Write the files' tokens as one uint16 stream, each file followed by <|endoftext|>; the tokenizer
    spreads each batch over all cores. Returns the token count and the tokens of each origin."""
    tokenizer.encode_special_tokens = True  # a file that spells "<|fim_middle|>" gets its characters, not the marker
    per_origin: dict[str, int] = {}
    total = 0
    with open(path, "wb") as out:
        for start in range(0, len(files), 4096):
            chunk = files[start:start + 4096]
            for (origin, _, _), enc in zip(chunk, tokenizer.encode_batch([t for _, _, t in chunk],
                                                                         add_special_tokens=False)):
                ids = np.asarray(enc.ids + [END_OF_TEXT_ID], dtype=np.uint16)
                out.write(ids.tobytes())
                per_origin[origin] = per_origin.get(origin, 0) + len(ids)
                total += len(ids)
    return total, per_origin


def prepare_corpus(work: Path, args: argparse.Namespace) -> dict:
    """Build (or reuse from an earlier call on the same machine) the encoded corpus in `work`."""
    key = {"max_files": args.max_files, "stdlib_only": args.stdlib_only, "python": sys.version,
           "source_dir": str(args.source_dir.resolve()) if args.source_dir else None,
           "tokenizer": hashlib.sha256(BASE_TOKENIZER.read_bytes()).hexdigest(),
           "heldout": hashlib.sha256((Path(__file__).parent / "heldout_packages.txt").read_bytes()).hexdigest(),
           "code": hashlib.sha256(b"".join((Path(__file__).parent / f).read_bytes()
                                           for f in ("site_corpus.py", "corpus.py"))).hexdigest()}
    summary_path = work / "summary.json"
    if summary_path.exists() and json.loads(summary_path.read_text()).get("key") == key:
        log(f"reusing the corpus built earlier in {work}")
        return json.loads(summary_path.read_text())
    work.mkdir(parents=True, exist_ok=True)
    started = time.time()
    _, heldout = read_heldout()
    if args.source_dir is not None:
        plan = Plan(sources=[folder_source(args.source_dir)])
    elif args.stdlib_only:
        plan = Plan(sources=[stdlib_source()])
    else:
        plan = distribution_sources(heldout)
        plan.sources.insert(0, stdlib_source())
    log(f"corpus: {len(plan.sources)} sources, {sum(len(s.files) for s in plan.sources):,} .py files listed; "
        f"{len(plan.skipped)} distributions skipped")
    corpus = build(plan.sources, heldout, args.workers, args.max_files)
    log(f"corpus: {len(corpus.train):,} train and {len(corpus.val):,} validation files after the filters "
        f"({time.time() - started:.0f} s)")
    tokenizer = fim_tokenizer(BASE_TOKENIZER)
    tokenizer.save(str(work / "tokenizer.json"))
    counts = {}
    for split, files in (("train", corpus.train), ("val", corpus.val)):
        tokens, per_origin = encode_split(tokenizer, files, work / f"{split}.bin")
        counts[split] = {"files": len(files), "bytes": sum(len(t.encode()) for _, _, t in files), "tokens": tokens,
                         "per_origin": per_origin}
    licenses = {s.origin: s.license for s in plan.sources}
    summary = {
        "key": key,
        "seconds": round(time.time() - started, 1),
        "sources": [{"origin": origin, "license": licenses[origin],
                     "train_tokens": counts["train"]["per_origin"].get(origin, 0),
                     "val_tokens": counts["val"]["per_origin"].get(origin, 0)}
                    for origin in licenses],
        "skipped": plan.skipped,
        "rejected": corpus.rejected, "duplicates": corpus.duplicates,
        "heldout_files": corpus.heldout_files, "test_data_files": corpus.test_data_files,
        **{split: {k: v for k, v in c.items() if k != "per_origin"} for split, c in counts.items()},
    }
    summary_path.write_text(json.dumps(summary, indent=1))
    log(f"tokens: {counts['train']['tokens']:,} train, {counts['val']['tokens']:,} validation "
        f"({time.time() - started:.0f} s in all)")
    return summary


class Windows:
    """Batches of non-overlapping windows of block + 1 tokens, each epoch in a new order and at a new
    offset, FIM applied on the CPU, made one batch ahead on a thread so the GPU never waits for them."""

    def __init__(self, tokens: np.ndarray, block: int, batch_size: int, fim_rate: float, fim_ids: tuple[int, int, int],
                 newline_id: int, seed: int, device: torch.device) -> None:
        self.tokens, self.block, self.batch_size = tokens, block, batch_size
        self.fim_rate, self.fim_ids, self.newline_id = fim_rate, fim_ids, newline_id
        self.rng = np.random.default_rng(seed)
        self.device = device
        self.epoch = 0
        self.windows_drawn = 0
        self._order = np.empty(0, dtype=np.int64)
        self._queue: queue.Queue = queue.Queue(maxsize=3)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._fill, daemon=True)
        self._thread.start()

    def _starts(self, count: int) -> np.ndarray:
        while len(self._order) < count:
            offset = int(self.rng.integers(0, self.block)) if self.epoch else 0
            n = (len(self.tokens) - offset - 1) // self.block
            self._order = np.concatenate([self._order, offset + self.rng.permutation(n) * self.block])
            self.epoch += 1
        starts, self._order = self._order[:count], self._order[count:]
        return starts

    def _fill(self) -> None:
        span = np.arange(self.block + 1)
        while not self._stop.is_set():
            rows = self.tokens[self._starts(self.batch_size)[:, None] + span]  # [B, block + 1]
            rows = fim_batch(rows, self.rng, self.fim_rate, self.fim_ids, self.newline_id, END_OF_TEXT_ID)
            batch = torch.from_numpy(rows.astype(np.int64))
            if self.device.type == "cuda":
                batch = batch.pin_memory()
            while not self._stop.is_set():
                try:
                    self._queue.put(batch, timeout=0.5)
                    break
                except queue.Full:
                    continue

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        batch = self._queue.get().to(self.device, non_blocking=True)
        self.windows_drawn += self.batch_size
        return batch[:, :-1], batch[:, 1:]  # (B, T) each

    def close(self) -> None:
        self._stop.set()


def lr_at(step: int, elapsed: float, budget: float, peak: float, warmup: int, max_steps: int | None = None) -> float:
    """Linear warmup over `warmup` steps, then a cosine to a tenth of the peak at the end of the time budget,
    or of `max_steps` when given (a run of so many steps then takes the same path on any machine)."""
    warm = min(1.0, (step + 1) / warmup)
    progress = min(1.0, step / max_steps if max_steps else elapsed / max(budget, 1e-9))
    return peak * warm * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


@torch.no_grad()
def evaluate(model: GPT, tokens: np.ndarray, block: int, batch_size: int, batches: int, device: torch.device,
             autocast: bool, fim_ids: tuple[int, int, int], newline_id: int) -> dict:
    """Validation loss on the held-out files: plain windows, and the same windows in FIM form (its loss
    counts only the middle's tokens, what FIM exists to predict)."""
    model.eval()
    rng = np.random.default_rng(1234)
    n = (len(tokens) - 1) // block
    starts = (rng.permutation(n)[:batches * batch_size] * block)
    span = np.arange(block + 1)
    plain, middle = [], []
    for b in range(0, len(starts), batch_size):
        rows = tokens[starts[b:b + batch_size, None] + span]
        fim = fim_batch(rows, np.random.default_rng(b), 1.0, fim_ids, newline_id, END_OF_TEXT_ID)
        for kind, data in (("plain", rows), ("fim", fim)):
            seq = torch.from_numpy(data.astype(np.int64)).to(device)
            x, y = seq[:, :-1], seq[:, 1:]
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
                logits = model(x)
            losses = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), y.reshape(-1),
                                     reduction="none").view(y.shape)  # (B, T)
            if kind == "plain":
                plain.append(losses.mean().item())
            else:  # after <|fim_middle|>: in SPM the prefix comes first, so count from the end of the prefix on
                middle.append(middle_loss(x, losses, fim_ids))
    model.train()
    return {"val_loss": float(np.mean(plain)), "val_fim_middle_loss": float(np.nanmean(middle))}


def middle_loss(x: torch.Tensor, losses: torch.Tensor, fim_ids: tuple[int, int, int]) -> float:
    """Mean loss on the tokens a PSM window's middle holds (x after <|fim_middle|>), PSM rows only: in SPM
    the prefix follows the marker too, so where the middle starts is not in the tokens."""
    prefix_id, suffix_id, middle_id = fim_ids
    psm = (x[:, 0] == prefix_id) & (x[:, 1] != suffix_id)
    after = torch.cumsum((x == middle_id).int(), dim=1) > 0  # (B, T): at or after the marker
    mask = after & psm[:, None]
    return float((losses * mask).sum() / mask.sum()) if mask.any() else float("nan")


def init_files(checkpoint: Path, mine: GPTConfig) -> list[Path]:
    """The weight files --init names, checked against this run's shape before the corpus is built: a checkpoint
    dir (model.safetensors + config.json, as the bundles' training/ folders hold), or the files an earlier
    gpu_train.py run returned (run.json + the model-*.safetensors it lists, checked by their checksums)."""
    try:
        if (checkpoint / "run.json").is_file():
            run = json.loads((checkpoint / "run.json").read_text())
            config = {k: v for k, v in run["config"].items() if k != "tokenizer_vocab_size"}
            files = {checkpoint / name: entry["sha256"] for name, entry in sorted(run["weights"].items())}
        else:
            config = json.loads((checkpoint / "config.json").read_text())
            files = {checkpoint / "model.safetensors": None}
        cfg = GPTConfig(**config)
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise SystemExit(f"--init {checkpoint}: not a checkpoint dir (config.json + model.safetensors) nor the "
                         f"files of a gpu_train.py run (run.json + its weights): {error}") from None
    for path, digest in files.items():
        if not path.is_file():
            hint = ("were all of the run's files copied?" if digest else "`scripts/device_tree.py leave-out` keeps "
                    "python-small's training weights from a device call unless given them with `--keep`")
            raise SystemExit(f"--init {checkpoint}: {path.name} is not there ({hint})")
        if digest and hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            raise SystemExit(f"--init {checkpoint}: {path.name} is not the file run.json lists (cut short?)")
    shape = lambda c: (c.n_layer, c.n_head, c.n_embd, c.mlp_hidden)  # noqa: E731
    if shape(cfg) != shape(mine):
        raise SystemExit(f"--init {checkpoint}: its shape {cfg.n_layer}x{cfg.n_head}x{cfg.n_embd} is not --shape's "
                         f"{mine.n_layer}x{mine.n_head}x{mine.n_embd}")
    if cfg.context_length < mine.context_length or cfg.vocab_size > mine.vocab_size:
        raise SystemExit(f"--init {checkpoint}: context {cfg.context_length} and vocabulary {cfg.vocab_size} do not "
                         f"fit --block {mine.context_length} and this tokenizer's {mine.vocab_size}")
    return list(files)


def init_from(model: GPT, checkpoint: Path, files: list[Path]) -> None:
    """Load the checked weight files of a checkpoint of the same shape into `model`: its embedding rows go first,
    and the rows it lacks (the FIM tokens, the padding) keep their fresh initialisation, so the model goes on
    from what it knew instead of starting over."""
    weights = {name: tensor for path in files for name, tensor in load_file(str(path)).items()}
    state = model.state_dict()
    with torch.no_grad():
        for name, tensor in weights.items():
            if name not in state:
                raise SystemExit(f"--init {checkpoint}: {name} is not a weight of this model")
            rows = min(tensor.shape[0], state[name].shape[0])
            state[name][:rows].copy_(tensor[:rows])


def plan_shards(sizes: dict[str, int]) -> list[list[str]]:
    """The tensors' names, in order, greedily grouped into files of at most SHARD_BYTES (sizes in bytes)."""
    shards: list[list[str]] = [[]]
    size = 0
    for name, nbytes in sizes.items():
        if nbytes > SHARD_BYTES:
            raise SystemExit(f"{name} is {nbytes:,} bytes, over one file's {SHARD_BYTES:,}: choose a smaller shape")
        if size + nbytes > SHARD_BYTES and shards[-1]:
            shards.append([])
            size = 0
        shards[-1].append(name)
        size += nbytes
    return shards


def shard_weights(state: dict[str, torch.Tensor]) -> list[dict[str, torch.Tensor]]:
    """The tensors in bf16, grouped into files of at most SHARD_BYTES."""
    tensors = {name: tensor.detach().to(torch.bfloat16).contiguous().cpu() for name, tensor in state.items()}
    return [{name: tensors[name] for name in names}
            for names in plan_shards({name: t.numel() * t.element_size() for name, t in tensors.items()})]


def check_return_fits(cfg: GPTConfig, out: Path) -> None:
    """Refuse, before the corpus and the training, a shape whose files would not all come back from $OUT: the
    device tool returns at most RETURN_FILES files and RETURN_BYTES together, and leaves the rest behind."""
    if not os.environ.get("OUT") or out.resolve() != Path(os.environ["OUT"]).resolve():
        return
    with torch.device("meta"):
        state = GPT(cfg).state_dict()
    sizes = {name: tensor.numel() * 2 for name, tensor in state.items()}  # bf16
    files = len(plan_shards(sizes)) + len(OTHER_FILES)
    total = sum(sizes.values()) + BASE_TOKENIZER.stat().st_size + OTHER_BYTES
    if files > RETURN_FILES or total > RETURN_BYTES:
        raise SystemExit(f"--shape {cfg.n_layer}x{cfg.n_head}x{cfg.n_embd}: its files in $OUT would be {files} "
                         f"making {total / 2**20:.0f} MiB, and a device call returns at most {RETURN_FILES} files "
                         f"and {RETURN_BYTES // 2**20} MiB: choose a smaller shape")


def move_in(source: Path, target: Path) -> None:
    """Move a staged file into place: a rename on one file system; else a plain copy (no metadata, which a
    mounted $OUT may refuse) under a temporary name, then a rename, so `target` is always a whole file."""
    try:
        os.replace(source, target)
    except OSError as error:
        if error.errno != errno.EXDEV:
            raise
        tmp = target.with_name(f".{target.name}.tmp")
        shutil.copyfile(source, tmp)
        tmp.replace(target)
        source.unlink()


def write_run(out: Path, model: GPT, record: dict, staging: Path) -> None:
    """Weights, then run.json naming them with their checksums: a reader trusts only what run.json lists.
    The files are written in `staging` and only then moved into `out`, so a command killed while writing
    leaves in `out` no partial file (which would come back, counting against the 8 files and 64 MiB) and
    changes the weights run.json names only for the moment the moves take."""
    out.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    shards = shard_weights(model.state_dict())
    weights = {}
    for n, shard in enumerate(shards, 1):
        name = f"model-{n:02d}-of-{len(shards):02d}.safetensors"
        save_file(shard, str(staging / name))
        weights[name] = {"sha256": hashlib.sha256((staging / name).read_bytes()).hexdigest(), "tensors": sorted(shard)}
    tokenizer = {"sha256": hashlib.sha256((out / "tokenizer.json").read_bytes()).hexdigest()}
    (staging / "run.json").write_text(json.dumps({**record, "weights": weights, "tokenizer": tokenizer}, indent=1))
    for name in [*weights, "run.json"]:
        move_in(staging / name, out / name)
    for stale in out.glob("model-*.safetensors"):
        if stale.name not in weights:
            stale.unlink()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path(os.environ["OUT"]) if os.environ.get("OUT") else None,
                   help="where the files go (default: $OUT)")
    p.add_argument("--work", type=Path, default=Path("/tmp/completer-gpu-corpus"),
                   help="where the encoded corpus is kept, for a second call on the same machine")
    p.add_argument("--minutes", type=float, default=9.0, help="wall-clock budget of the whole command")
    p.add_argument("--shape", type=parse_shape, default=(8, 6, 192), help="LAYERSxHEADSxWIDTH")
    p.add_argument("--init", type=Path, default=None,
                   help="start from these weights of the same shape: a checkpoint dir (model.safetensors + "
                        "config.json), or the files an earlier run returned (run.json + model-*.safetensors)")
    p.add_argument("--block", type=int, default=1024, help="training window and the model's context")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--fim-rate", type=float, default=0.5)
    p.add_argument("--max-steps", type=int, default=None, help="stop after this many steps (a smoke run)")
    p.add_argument("--eval-every-s", type=float, default=60.0)
    p.add_argument("--eval-batches", type=int, default=16)
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile (always skipped on the CPU)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="processes reading the corpus")
    p.add_argument("--max-files", type=int, default=None, help="read at most this many files (a dry run)")
    p.add_argument("--stdlib-only", action="store_true", help="only the stdlib (a dry run)")
    p.add_argument("--source-dir", type=Path, default=None,
                   help="only the .py files under this folder, whose license is yours to vouch for (a dry run)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.out is None:
        p.error("--out is needed where $OUT is not set")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no CUDA device here (use --device cpu for a dry run)")
    started = STARTED
    budget = args.minutes * 60
    device = torch.device(args.device)
    torch.manual_seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True

    layers, heads, width = args.shape
    vocab = fim_tokenizer(BASE_TOKENIZER).get_vocab_size()
    cfg = GPTConfig(vocab_size=-(-vocab // VOCAB_MULTIPLE) * VOCAB_MULTIPLE, context_length=args.block,
                    n_layer=layers, n_head=heads, n_embd=width)
    check_return_fits(cfg, args.out)  # these two refuse in seconds what would otherwise fail minutes later
    init = init_files(args.init, cfg) if args.init is not None else []
    summary = prepare_corpus(args.work, args)
    tokenizer_path = args.work / "tokenizer.json"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "tokenizer.json").write_bytes(tokenizer_path.read_bytes())
    tokenizer = Tokenizer.from_file(str(tokenizer_path))
    fim_ids = tuple(tokenizer.token_to_id(t) for t in FIM_TOKENS)
    newline_id = tokenizer.encode("\n", add_special_tokens=False).ids[0]
    train_tokens = np.fromfile(args.work / "train.bin", dtype=np.uint16)
    val_tokens = np.fromfile(args.work / "val.bin", dtype=np.uint16)
    if len(train_tokens) < 4 * (args.block + 1) or len(val_tokens) < args.block + 2:
        raise SystemExit(f"the corpus is too small for windows of {args.block} tokens: "
                         f"{len(train_tokens):,} train and {len(val_tokens):,} validation tokens")

    if tokenizer.get_vocab_size() != vocab:
        raise SystemExit(f"{tokenizer_path}: {tokenizer.get_vocab_size()} tokens, not {BASE_TOKENIZER}'s {vocab}")
    model = GPT(cfg)
    if args.init is not None:
        init_from(model, args.init, init)
    model = model.to(device)
    log(f"model {layers}x{heads}x{width}: {model.num_params():,} parameters (vocabulary {vocab} padded to "
        f"{cfg.vocab_size}){', from ' + str(args.init) if args.init else ''}, "
        f"batch {args.batch_size} x {args.block} tokens")
    decay = [p_ for p_ in model.parameters() if p_.dim() >= 2]
    no_decay = [p_ for p_ in model.parameters() if p_.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), fused=device.type == "cuda")
    autocast = device.type == "cuda"

    def loss_of(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
            logits = model(x)  # (B, T, V)
        return F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), y.reshape(-1))

    step_loss = torch.compile(loss_of) if device.type == "cuda" and not args.no_compile else loss_of
    windows = Windows(train_tokens, args.block, args.batch_size, args.fim_rate, fim_ids, newline_id, args.seed, device)
    record = {
        "config": {**cfg.to_dict(), "tokenizer_vocab_size": vocab},
        "fim": {"tokens": dict(zip(("prefix", "suffix", "middle"), FIM_TOKENS)),
                "ids": dict(zip(("prefix", "suffix", "middle"), fim_ids)), "rate": args.fim_rate,
                "orders": ["psm", "spm"]},
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "machine": {"python": sys.version.split()[0], "torch": torch.__version__, "platform": platform.platform(),
                    "device": torch.cuda.get_device_name() if device.type == "cuda" else platform.processor() or "cpu",
                    "cpus": os.cpu_count()},
        "corpus": {k: v for k, v in summary.items() if k != "key"},
        "history": [],
    }
    staging = args.work / "staging"  # beside the corpus, out of $OUT
    train_budget = budget - (time.time() - started) - max(20.0, 0.05 * budget)  # room for the last eval and files
    log(f"training for {train_budget:.0f} s")
    train_start = last_eval = last_save = time.time()
    step, tokens_seen, timed_from, timed_tokens = 0, 0, None, 0
    stopped = "budget"
    while True:
        elapsed = time.time() - train_start
        if elapsed >= train_budget:
            break
        if args.max_steps is not None and step >= args.max_steps:
            stopped = "max_steps"
            break
        lr = lr_at(step, elapsed, train_budget, args.lr, args.warmup, args.max_steps)
        for group in opt.param_groups:
            group["lr"] = lr
        x, y = windows.next()
        loss = step_loss(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        tokens_seen += x.numel()
        if step == 10:  # compiled and warm: time the throughput from here
            if device.type == "cuda":
                torch.cuda.synchronize()
            timed_from, timed_tokens = time.time(), tokens_seen
        if step % 50 == 0 or step == 1:
            rate = (tokens_seen - timed_tokens) / (time.time() - timed_from) if timed_from and step > 10 else 0.0
            log(f"step {step} loss {loss.item():.4f} lr {lr:.2e} tokens {tokens_seen:,} ({rate:,.0f} tokens/s) "
                f"epoch {tokens_seen / len(train_tokens):.2f}")
        if time.time() - last_eval >= args.eval_every_s:
            metrics = evaluate(model, val_tokens, args.block, min(64, args.batch_size), args.eval_batches, device,
                               autocast, fim_ids, newline_id)
            record["history"].append({"step": step, "tokens": tokens_seen,
                                      "seconds": round(time.time() - train_start, 1),
                                      "train_loss": loss.item(), "lr": lr, **metrics})
            log(json.dumps(record["history"][-1]))
            last_eval = time.time()
        if time.time() - last_save >= SAVE_EVERY_S:
            write_run(args.out, model, {**record, "final": False, "step": step, "tokens": tokens_seen}, staging)
            last_save = time.time()
    windows.close()
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.time() - train_start
    metrics = evaluate(model, val_tokens, args.block, min(64, args.batch_size), args.eval_batches, device, autocast,
                       fim_ids, newline_id)
    throughput = (tokens_seen - timed_tokens) / (time.time() - timed_from) if timed_from else tokens_seen / seconds
    record["history"].append({"step": step, "tokens": tokens_seen, "seconds": round(seconds, 1), "final": True,
                              "stopped": stopped, **metrics})
    record.update(final=True, step=step, tokens=tokens_seen, train_seconds=round(seconds, 1),
                  tokens_per_second=round(throughput), epochs=round(tokens_seen / len(train_tokens), 3),
                  peak_gpu_bytes=torch.cuda.max_memory_allocated() if device.type == "cuda" else None,
                  command_seconds=round(time.time() - started, 1))
    write_run(args.out, model, record, staging)
    log(f"done: {step} steps, {tokens_seen:,} tokens ({throughput:,.0f} tokens/s), {json.dumps(metrics)}; "
        f"files in {args.out}")


if __name__ == "__main__":
    main()
