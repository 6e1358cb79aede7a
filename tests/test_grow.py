"""Deepening a checkpoint (scripts/grow.py): the deeper model computes what the trained one did, its
data stream continues where the old run stopped, and train.py trains it."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from grow import grow
from model import GPT, GPTConfig
from train import load_model

REPO = Path(__file__).resolve().parent.parent
TINY = GPTConfig(vocab_size=96, context_length=32, n_layer=2, n_head=2, n_embd=16)


def trained_looking_checkpoint(directory: Path) -> GPT:
    """A checkpoint as train.py writes it, with every weight (LayerNorms too) away from its init value,
    so a grown copy that dropped or misplaced any tensor would compute something else."""
    torch.manual_seed(3)
    model = GPT(TINY)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    directory.mkdir()
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(directory / "model.safetensors"))
    (directory / "config.json").write_text(json.dumps(TINY.to_dict()))
    state = {"step": 40, "tokens": 40 * 4 * 32, "cursors": {"corpus": 160}, "block": 32, "history": [],
             "adam_steps": {"wte.weight": 40.0}}
    (directory / "train_state.json").write_text(json.dumps(state))
    moments = {f"{name}.{kind}": torch.ones_like(p) for name, p in model.named_parameters()
               for kind in ("exp_avg", "exp_avg_sq")}
    save_file(moments, str(directory / "optimizer.safetensors"))
    return model


def test_a_grown_model_computes_what_the_old_one_did(tmp_path: Path):
    old = trained_looking_checkpoint(tmp_path / "old")
    grown_cfg = grow(tmp_path / "old", tmp_path / "grown", factor=2)
    grown = load_model(tmp_path / "grown")
    assert grown_cfg.n_layer == 4 and grown.cfg == grown_cfg
    assert grown.num_params() > old.num_params()
    idx = torch.randint(0, TINY.vocab_size, (2, TINY.context_length))
    with torch.no_grad():
        torch.testing.assert_close(grown(idx), old(idx), rtol=0, atol=1e-5)

    state = json.loads((tmp_path / "grown" / "train_state.json").read_text())
    assert state["cursors"] == {"corpus": 160} and state["tokens"] == 40 * 4 * 32 and state["block"] == 32
    assert "adam_steps" not in state and not (tmp_path / "grown" / "optimizer.safetensors").exists(), (
        "old block 1's moments would land on new block 1, a copy of old block 0: none are carried")
    assert state["grown"] == [{"from": "old", "n_layer": 2, "factor": 2, "step": 40,
                               "tokens": 40 * 4 * 32}]


def test_the_new_blocks_learn(tmp_path: Path):
    """A silent copy must not stay silent: its zeroed output projections get a gradient."""
    trained_looking_checkpoint(tmp_path / "old")
    grow(tmp_path / "old", tmp_path / "grown", factor=3)
    grown = load_model(tmp_path / "grown")
    idx = torch.randint(0, TINY.vocab_size, (2, TINY.context_length + 1))
    loss, _ = grown.loss(idx[:, :-1], idx[:, 1:])
    loss.backward()
    for layer in (1, 2, 4, 5):  # the copies; 0 and 3 are the old blocks
        block = grown.blocks[layer]
        assert torch.count_nonzero(block.attn.proj.weight) == 0 and torch.count_nonzero(block.mlp.proj.weight) == 0
        assert block.attn.proj.weight.grad.abs().sum() > 0 and block.mlp.proj.weight.grad.abs().sum() > 0


def test_train_py_trains_a_grown_checkpoint_from_its_cursors(tmp_path: Path):
    trained_looking_checkpoint(tmp_path / "old")
    grow(tmp_path / "old", tmp_path / "grown", factor=2)
    shard = tmp_path / "corpus"
    shard.mkdir()
    rng = np.random.default_rng(0)
    for split in ("train", "val"):
        rng.integers(0, TINY.vocab_size, 32 * 400, dtype=np.uint16).tofile(shard / f"{split}.bin")
    cmd = [sys.executable, str(REPO / "scripts" / "train.py"), "--init", str(tmp_path / "grown"), "--data",
           str(shard), "--out", str(tmp_path / "run"), "--max-steps", "3", "--batch-size", "4", "--warmup", "2",
           "--eval-batches", "1", "--minutes", "2"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    state = json.loads((tmp_path / "run" / "train_state.json").read_text())
    assert state["step"] == 43 and state["cursors"] == {"corpus": 160 + 3 * 4}
    assert load_model(tmp_path / "run").cfg.n_layer == 4


def test_a_checkpoint_without_train_state_grows_into_one_train_py_can_start(tmp_path: Path):
    trained_looking_checkpoint(tmp_path / "old")
    (tmp_path / "old" / "train_state.json").unlink()
    grow(tmp_path / "old", tmp_path / "grown", factor=2)
    state = json.loads((tmp_path / "grown" / "train_state.json").read_text())
    assert (state["step"], state["tokens"], state["cursors"], state["history"]) == (0, 0, {}, [])


@pytest.mark.parametrize("problem", ["factor 1", "missing source", "out taken", "weights unlike config"])
def test_bad_requests_are_refused_before_anything_is_written(tmp_path: Path, problem: str):
    trained_looking_checkpoint(tmp_path / "old")
    source, out, factor = tmp_path / "old", tmp_path / "grown", 2
    if problem == "factor 1":
        factor = 1
    elif problem == "missing source":
        source = tmp_path / "nowhere"
    elif problem == "out taken":
        grow(source, out, 2)
    else:
        (source / "config.json").write_text(json.dumps({**TINY.to_dict(), "n_layer": 1}))
    before = sorted(p.name for p in tmp_path.rglob("*"))
    with pytest.raises(SystemExit) as refused:
        grow(source, out, factor)
    assert str(refused.value) and "Traceback" not in str(refused.value)
    if problem == "weights unlike config":
        assert "does not match its config.json" in str(refused.value)
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_the_model_card_says_the_model_was_grown(tmp_path: Path):
    import export

    (tmp_path / "MODEL.md").write_text("# card\n<!-- arch:start -->\nOLD-SHAPE\n<!-- arch:end -->\n"
                                       "<!-- training:start -->\nOLD-TRAINING\n<!-- training:end -->\n")
    manifest = {"architecture": {"n_layer": 8, "n_head": 6, "n_embd": 192, "vocab_size": 8192,
                                 "context_length": 1024},
                "files": {"model.onnx": {"bytes": 2}}, "fp32_onnx_bytes": 8,
                "training": {"parameters": 5, "steps": 20, "tokens": 2000,
                             "grown": [{"from": "run", "n_layer": 4, "factor": 2, "step": 15545, "tokens": 127344640}]}}
    export.fill_model_card(tmp_path, manifest)
    card = (tmp_path / "MODEL.md").read_text()
    assert ("Deepened from 4 to 8 layers by `scripts/grow.py` at step 15,545 (127,344,640 tokens), each block "
            "followed by 1 copy of itself") in card
    assert "8 layers, 6 heads, width 192, MLP 768, learned positions over a 1,024-token context" in card
    assert "OLD-SHAPE" not in card and "OLD-TRAINING" not in card


def test_widened_mlps_compute_what_the_old_ones_did(tmp_path: Path):
    old = trained_looking_checkpoint(tmp_path / "old")
    grown_cfg = grow(tmp_path / "old", tmp_path / "wide", factor=1, mlp_width=6 * TINY.n_embd)
    wide = load_model(tmp_path / "wide")
    assert grown_cfg.mlp_hidden == 6 * TINY.n_embd and grown_cfg.n_layer == TINY.n_layer and wide.cfg == grown_cfg
    assert wide.num_params() == old.num_params() + TINY.n_layer * 2 * 2 * TINY.n_embd * TINY.n_embd
    new_units = wide.blocks[0].mlp.fc.weight[4 * TINY.n_embd:]
    assert new_units.abs().sum() > 0, "the new units need input weights, or their gradients stay zero"
    idx = torch.randint(0, TINY.vocab_size, (2, TINY.context_length))
    with torch.no_grad():
        torch.testing.assert_close(wide(idx), old(idx), rtol=0, atol=1e-5)
    loss, _ = wide.loss(idx[:, :-1], idx[:, 1:])
    loss.backward()
    assert wide.blocks[0].mlp.proj.weight.grad[:, 4 * TINY.n_embd:].abs().sum() > 0, "the new units must learn"
    state = json.loads((tmp_path / "wide" / "train_state.json").read_text())
    assert state["grown"][-1]["mlp_from"] == 4 * TINY.n_embd and state["grown"][-1]["mlp_width"] == 6 * TINY.n_embd

    deeper_and_wider = grow(tmp_path / "old", tmp_path / "both", factor=2, mlp_width=5 * TINY.n_embd)
    both = load_model(tmp_path / "both")
    assert deeper_and_wider.n_layer == 2 * TINY.n_layer and deeper_and_wider.mlp_hidden == 5 * TINY.n_embd
    with torch.no_grad():
        torch.testing.assert_close(both(idx), old(idx), rtol=0, atol=1e-5)
    with pytest.raises(SystemExit, match="must exceed"):
        grow(tmp_path / "wide", tmp_path / "narrower", factor=1, mlp_width=4 * TINY.n_embd)


def test_the_model_card_says_the_mlps_were_widened(tmp_path: Path):
    import export

    (tmp_path / "MODEL.md").write_text("<!-- arch:start -->\n<!-- arch:end -->\n<!-- training:start -->\n"
                                       "<!-- training:end -->\n")
    manifest = {"architecture": {"n_layer": 8, "n_head": 6, "n_embd": 192, "vocab_size": 8192,
                                 "context_length": 1024, "mlp_width": 1536},
                "files": {"model.onnx": {"bytes": 2}}, "fp32_onnx_bytes": 8,
                "training": {"parameters": 5, "steps": 20, "tokens": 2000,
                             "grown": [{"from": "run", "n_layer": 4, "factor": 2, "step": 15545, "tokens": 127344640},
                                       {"from": "python-small", "n_layer": 8, "factor": 1, "step": 39162,
                                        "tokens": 320815104, "mlp_from": 768, "mlp_width": 1536}]}}
    export.fill_model_card(tmp_path, manifest)
    card = (tmp_path / "MODEL.md").read_text()
    assert "Deepened from 4 to 8 layers by `scripts/grow.py` at step 15,545" in card
    assert ("Its MLPs widened from 768 to 1,536 hidden units by `scripts/grow.py` at step 39,162 (320,815,104 "
            "tokens), the new units with zeroed output weights, then trained on.") in card
    assert "8 layers, 6 heads, width 192, MLP 1536," in card
