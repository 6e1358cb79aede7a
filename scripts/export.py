"""Export a training checkpoint to a runtime bundle: ONNX with the beam step inside, INT8, manifest.

    python scripts/export.py --checkpoint ~/.cache/completer/checkpoints/run --out models/python-small

Writes into --out: model.onnx (INT8; the graph a single search runs), model_batched.onnx (INT8; the graph the
engine's scheduler runs when several searches share a call, `--batch-slots` of them), tokenizer.json,
manifest.json (checksums of every file), and training/ (the fp32 safetensors weights and config, for resuming
and fine-tuning; never loaded at run time). The fp32 ONNX goes to --fp32-out (default: the cache dir) for evaluation.

    python scripts/export.py --out models/python-small --graphs-only

builds a bundle's graphs again from its own training/ weights after a change to the graph builder
(completer/graph/), and updates only the manifest's checksums and sizes.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from safetensors.numpy import load_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from completer.bundle import sha256_file as sha256  # noqa: E402
from completer.graph import DEFAULT_SLOTS, kv_layout, optimize, own_architecture, own_decoder, quantize  # noqa: E402
from paths import cache_dir, corpus_dir  # noqa: E402
from shards import corpus_shards, shard_cursors  # noqa: E402

FORMAT_VERSION = 5  # 3: graphs with search slots (completer/graph/decoder.py), the batched one beside;
# 4: no slot_rows in the one-slot graph; 5: its KV with an axis of 1 after the KV heads
BATCHED_MODEL = "model_batched.onnx"


def batched_record(slots: int) -> dict:
    """The manifest's entry for the batched graph: its file, its slots and the KV shapes it takes."""
    return {"file": BATCHED_MODEL, "slots": slots, "kv_layout": kv_layout(slots)}


def newline_id(tokenizer_path: Path) -> int:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_path))
    ids = tokenizer.encode("\n", add_special_tokens=False).ids
    if len(ids) != 1:
        raise SystemExit(f"{tokenizer_path}: a newline must be exactly one token, got {ids}")
    return ids[0]


def write_manifest(out: Path, config: dict, tokenizer_newline: int, fp32_bytes: int, training: dict,
                   name: str, fusions: dict[str, int], batch_slots: int) -> dict:
    manifest_path = out / "manifest.json"
    manifest = {
        "format_version": FORMAT_VERSION,
        "name": name,
        "architecture": {**{k: config[k] for k in ("n_layer", "n_head", "n_embd", "vocab_size", "context_length")},
                         **({"mlp_width": config["mlp_width"]} if config.get("mlp_width") else {})},
        "context_length": config["context_length"],
        "vocab_size": config["vocab_size"],
        "newline_token_id": tokenizer_newline,
        "special_tokens": {"end_of_text": 0},
        "kv_layout": kv_layout(1),
        "quantization": "onnxruntime dynamic INT8 (QInt8 weights) of weight MatMuls and embeddings",
        "fp32_onnx_bytes": fp32_bytes,
        "graph_fusions": fusions,
        **({"batched_model": batched_record(batch_slots)} if batch_slots > 1 else {}),
        "files": {f: {"sha256": sha256(out / f), "bytes": (out / f).stat().st_size}
                  for f in ("model.onnx", "tokenizer.json", *((BATCHED_MODEL,) if batch_slots > 1 else ()))},
        "training": training,
        "eval": {},  # results belong to one model.onnx: eval.py measures the new one
    }
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def write_graphs(weights: dict[str, np.ndarray], config: dict, out: Path, fp32_out: Path, batch_slots: int
                 ) -> dict[str, int]:
    """The INT8 graphs into `out`: model.onnx, and model_batched.onnx when `batch_slots` > 1 (else any old one
    is removed); the single graph's fp32 form stays at `fp32_out`. Returns the fusions onnxruntime applied."""
    fp32_out.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(own_decoder(weights, config, slots=1), str(fp32_out))
    fusions = optimize(fp32_out, own_architecture(config))
    with tempfile.TemporaryDirectory() as tmp:
        staged = Path(tmp) / "model.onnx"
        quantize(fp32_out, staged)
        shutil.copyfile(staged, out / "model.onnx")
        if batch_slots > 1:
            batched_fp32 = Path(tmp) / "batched.fp32.onnx"
            onnx.save(own_decoder(weights, config, slots=batch_slots), str(batched_fp32))
            optimize(batched_fp32, own_architecture(config))
            quantize(batched_fp32, Path(tmp) / BATCHED_MODEL)
            shutil.copyfile(Path(tmp) / BATCHED_MODEL, out / BATCHED_MODEL)
        elif (out / BATCHED_MODEL).exists():
            (out / BATCHED_MODEL).unlink()
    return fusions


def export(checkpoint: Path, out: Path, tokenizer: Path, fp32_out: Path, name: str,
           corpora: dict[str, Path] | None = None, batch_slots: int = DEFAULT_SLOTS) -> dict:
    config = json.loads((checkpoint / "config.json").read_text())
    weights = load_file(str(checkpoint / "model.safetensors"))
    nl = newline_id(tokenizer)
    out.mkdir(parents=True, exist_ok=True)
    fusions = write_graphs(weights, config, out, fp32_out, batch_slots)
    if tokenizer.resolve() != (out / "tokenizer.json").resolve():
        shutil.copyfile(tokenizer, out / "tokenizer.json")
    training_dir = out / "training"
    training_dir.mkdir(exist_ok=True)
    for file in ("model.safetensors", "config.json"):
        shutil.copyfile(checkpoint / file, training_dir / file)
    state_path = checkpoint / "train_state.json"
    training: dict = {"parameters": int(sum(np.prod(v.shape) for v in weights.values()))}
    cursors: dict[str, int] = {}
    block = config["context_length"]
    if state_path.exists():
        state = json.loads(state_path.read_text())
        cursors = dict(shard_cursors(state))
        block = state.get("block", block)
        slim = {"step": state.get("step"), "tokens": state.get("tokens"), "block": block, "cursors": cursors,
                "history": state.get("history", [])[-1:]}
        training.update(steps=state.get("step"), tokens=state.get("tokens"),
                        last_eval=(state.get("history") or [{}])[-1])
        if "gpu_run" in state:  # import_gpu_run.py: trained on a GPU machine's own corpus, in one run
            run = state["gpu_run"]
            training.update(epochs=run.get("epochs"), device=(run.get("machine") or {}).get("device"),
                            train_seconds=run.get("train_seconds"), tokens_per_second=run.get("tokens_per_second"))
        if "grown" in state:  # grow.py deepened it: say from what, and when
            slim["grown"] = training["grown"] = state["grown"]
        (training_dir / "train_state.json").write_text(json.dumps(slim, indent=1))
    corpora = corpora or {}
    missing = [name for name in cursors if cursors[name] and name not in corpora]
    if missing:
        print(f"warning: the run trained on shards not found here, left out of the manifest: {missing}")
    trained_on = [name for name in corpora if cursors.get(name)] or list(corpora)
    shards = [shard_record(corpora[name], cursors.get(name, 0) * block) for name in trained_on]
    if shards:
        training["corpus_shards"] = shards
    return write_manifest(out, config, nl, fp32_out.stat().st_size, training, name, fusions, batch_slots)


def rebuild_graphs(bundle: Path, fp32_out: Path) -> dict:
    """Build a bundle's graphs again from its own training/ weights with this tree's graph builder, and update
    the manifest's checksums and sizes: what changes when the builder does and the weights do not. The
    training record, the tokenizer and the model card stay as they are."""
    manifest_path = bundle / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    config = json.loads((bundle / "training" / "config.json").read_text())
    weights = load_file(str(bundle / "training" / "model.safetensors"))
    batch_slots = (manifest.get("batched_model") or {}).get("slots", 1)
    fusions = write_graphs(weights, config, bundle, fp32_out, batch_slots)
    files = ["model.onnx", *((BATCHED_MODEL,) if batch_slots > 1 else ())]
    manifest["format_version"] = FORMAT_VERSION
    manifest["kv_layout"] = kv_layout(1)
    if batch_slots > 1:
        manifest["batched_model"] = batched_record(batch_slots)
    manifest["fp32_onnx_bytes"] = fp32_out.stat().st_size
    manifest["graph_fusions"] = fusions
    for name in files:
        manifest["files"][name] = {"sha256": sha256(bundle / name), "bytes": (bundle / name).stat().st_size}
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def shard_record(corpus: Path, tokens_seen: int) -> dict:
    """What the manifest says of one corpus shard: its splits, what was dropped, its token counts, and
    how many of its training tokens this model saw (windows consumed times the window length)."""
    record: dict = {"name": corpus.name, "tokens_seen": tokens_seen}
    summary_path, tokens_path = corpus / "summary.json", corpus / "tokens.json"
    if summary_path.exists():
        summary = json.loads(summary_path.read_text())
        record.update({split: summary[split] for split in ("train", "val")})
        record.update(rejected=summary.get("rejected", {}), duplicates=summary.get("duplicates", 0),
                      sources=len(summary.get("origins", {})))
    if tokens_path.exists():
        record["tokens"] = json.loads(tokens_path.read_text())
    return record


def replace_section(text: str, key: str, body: str) -> str:
    start, end = f"<!-- {key}:start -->", f"<!-- {key}:end -->"
    if start not in text or end not in text:
        return text
    head, rest = text.split(start, 1)
    return head + start + "\n" + body.strip() + "\n" + end + rest.split(end, 1)[1]


def repeats_text(shards: list[dict]) -> str:
    """How many epochs of each shard training took, and how many tokens it saw more than once."""
    parts, repeated = [], 0
    for shard in shards:
        size = shard.get("tokens", {}).get("train", 0)
        if size and shard["tokens_seen"]:
            parts.append(f"{shard['tokens_seen'] / size:.2f} epochs of `{shard['name']}`")
            repeated += max(0, shard["tokens_seen"] - size)
    if not parts:
        return "no shard recorded"
    return ", ".join(parts) + (f" ({repeated:,} of those tokens were repeats)" if repeated else " (no token repeated)")


def fill_model_card(out: Path, manifest: dict, note: str = "") -> None:
    """Write MODEL.md's architecture, data and training sections from the manifest, and mark its eval
    section stale, so the card stays true to the bundle beside it."""
    card = out / "MODEL.md"
    if not card.exists():
        return
    training = manifest.get("training", {})
    shards = training.get("corpus_shards", [])
    data = ["| shard | split | files | lines | MB | tokens | tokens trained on |", "|---|---|---|---|---|---|---|"]
    for shard in shards:
        for split in ("train", "val"):
            if split in shard:
                c = shard[split]
                seen_here = f"{shard['tokens_seen']:,}" if split == "train" else "(held out)"
                data.append(f"| {shard['name']} | {split} | {c['files']:,} | {c['lines']:,} | {c['bytes'] / 1e6:.1f} | "
                            f"{shard.get('tokens', {}).get(split, 0):,} | {seen_here} |")
    for shard in shards:
        if "sources" in shard:
            rejected = ", ".join(f"{n} {why}" for why, n in sorted(shard["rejected"].items()))
            data.append(f"\n`{shard['name']}`: from {shard['sources']} sources; dropped {rejected}, and "
                        f"{shard['duplicates']} duplicates (of its own files or of an earlier shard's).")
    arch = manifest["architecture"]
    last = training.get("last_eval", {})
    seen = training.get("tokens") or 0
    lines = [
        f"* {training.get('parameters', 0):,} parameters ({arch['n_layer']} layers, {arch['n_head']} heads, width "
        f"{arch['n_embd']}, vocabulary {arch['vocab_size']:,}, context {arch['context_length']:,}).",
        f"* {training.get('steps', 0):,} AdamW steps: {seen:,} tokens seen; "
        + (f"{training['epochs']:.2f} epochs of the corpus." if training.get("epochs") and not shards
           else f"{repeats_text(shards)}."),
        f"* Last validation: loss {last.get('val_loss', float('nan')):.3f} nats/token"
        + (f", next-token accuracy {100 * last['val_accuracy']:.1f} %." if "val_accuracy" in last else "."),
        f"* INT8 `model.onnx` {manifest['files']['model.onnx']['bytes'] / 1e6:.2f} MB vs fp32 ONNX "
        f"{manifest['fp32_onnx_bytes'] / 1e6:.2f} MB (ratio "
        f"{manifest['files']['model.onnx']['bytes'] / manifest['fp32_onnx_bytes']:.3f}).",
    ]
    for grown in training.get("grown", []):
        what, how = [], []
        if grown["factor"] > 1:
            what.append(f"Deepened from {grown['n_layer']} to {grown['n_layer'] * grown['factor']} layers")
            how.append(f"each block followed by {grown['factor'] - 1} cop{'y' if grown['factor'] == 2 else 'ies'} "
                       f"of itself with zeroed output projections")
        if grown.get("mlp_width"):
            what.append(f"{'its' if what else 'Its'} MLPs widened from {grown['mlp_from']:,} to "
                        f"{grown['mlp_width']:,} hidden units")
            how.append("the new units with zeroed output weights")
        lines.append(f"* {' and '.join(what)} by `scripts/grow.py` at step {grown['step']:,} "
                     f"({grown['tokens']:,} tokens), {'; '.join(how)}, then trained on.")
    if note:
        lines.append(f"* {note}")
    shape = (f"{arch['n_layer']} layers, {arch['n_head']} heads, width {arch['n_embd']}, MLP {arch.get('mlp_width') or 4 * arch['n_embd']}, "
             f"learned positions over a {arch['context_length']:,}-token context, tied\ninput/output embeddings, "
             f"pre-LayerNorm, exact GELU, no biases in linear layers.")
    text = replace_section(card.read_text(), "arch", shape)
    if shards:  # a GPU run's corpus is described by the card itself, from its run.json
        text = replace_section(text, "data", "\n".join(data))
    text = replace_section(text, "eval", "Not measured yet for this `model.onnx`: run "
                                         "`python scripts/eval.py --positions 1000 --update-model-card`.")
    card.write_text(replace_section(text, "training", "\n".join(lines)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, default=None, help="dir with model.safetensors + config.json")
    parser.add_argument("--tokenizer", type=Path, default=None)
    parser.add_argument("--out", type=Path, required=True, help="bundle dir, e.g. models/python-small")
    parser.add_argument("--fp32-out", type=Path, default=None)
    parser.add_argument("--name", default=None)
    parser.add_argument("--training-note", default="", help="a sentence for the model card (budget, hardware)")
    parser.add_argument("--batch-slots", type=int, default=DEFAULT_SLOTS,
                        help="searches one batched call holds (model_batched.onnx); 0 or 1: no batched graph")
    parser.add_argument("--graphs-only", action="store_true",
                        help="only build --out's graphs again from its own training/ weights (after a change to "
                             "the graph builder), keeping its manifest's records and its model card")
    args = parser.parse_args()
    fp32_out = args.fp32_out or cache_dir() / "export" / f"{args.out.name}.fp32.onnx"
    if args.graphs_only:
        needed = [args.out / name for name in ("manifest.json", "training/config.json", "training/model.safetensors")]
        if missing := [str(path) for path in needed if not path.is_file()]:
            raise SystemExit(f"export.py --graphs-only: {args.out} is not a bundle with its training weights "
                             f"(missing {', '.join(missing)})")
        manifest = rebuild_graphs(args.out, fp32_out)
        sizes = [f"{name} {meta['bytes'] / 1e6:.2f} MB" for name, meta in manifest["files"].items()
                 if name.endswith(".onnx")]
        print(f"{args.out}: graphs built again ({', '.join(sizes)}); fp32 graph at {fp32_out}")
        return
    checkpoint = args.checkpoint or cache_dir() / "checkpoints" / "run"
    tokenizer = args.tokenizer or corpus_dir() / "tokenizer.json"
    manifest = export(checkpoint, args.out, tokenizer, fp32_out, args.name or args.out.name,
                      corpus_shards(), args.batch_slots)
    fill_model_card(args.out, manifest, args.training_note)
    model_bytes = manifest["files"]["model.onnx"]["bytes"]
    print(f"{args.out}: model.onnx {model_bytes / 1e6:.2f} MB INT8 vs fp32 {manifest['fp32_onnx_bytes'] / 1e6:.2f} MB"
          f" (ratio {model_bytes / manifest['fp32_onnx_bytes']:.3f}); fp32 graph at {fp32_out}")


if __name__ == "__main__":
    main()
