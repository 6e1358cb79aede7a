"""Averaging checkpoints (scripts/average.py): the mean of one lineage's weights, its train state carried
over without optimizer moments, its own validation loss recorded, and other shapes refused."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from average import average
from model import GPT, GPTConfig
from train import load_model

TINY = GPTConfig(vocab_size=96, context_length=32, n_layer=2, n_head=2, n_embd=16)


def checkpoint(directory: Path, seed: int, cfg: GPTConfig = TINY, step: int = 40) -> GPT:
    torch.manual_seed(seed)
    model = GPT(cfg)
    directory.mkdir()
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(directory / "model.safetensors"))
    (directory / "config.json").write_text(json.dumps(cfg.to_dict()))
    state = {"step": step, "tokens": step * 128, "cursors": {"corpus": step * 4}, "block": 32,
             "history": [{"step": step, "val_loss": 9.0}], "adam_steps": {"wte.weight": float(step)}}
    (directory / "train_state.json").write_text(json.dumps(state))
    return model


def test_the_mean_of_two_checkpoints_is_their_elementwise_mean(tmp_path: Path):
    first, second = checkpoint(tmp_path / "a", seed=1, step=40), checkpoint(tmp_path / "b", seed=2, step=60)
    val = tmp_path / "val.bin"
    np.random.default_rng(0).integers(0, TINY.vocab_size, 4096, dtype=np.uint16).tofile(val)
    state = average([tmp_path / "a", tmp_path / "b"], tmp_path / "mean", val=val, batches=2, batch_size=2)

    mean = load_model(tmp_path / "mean")
    for name, tensor in mean.state_dict().items():
        expected = (first.state_dict()[name].double() + second.state_dict()[name].double()) / 2
        torch.testing.assert_close(tensor, expected.float(), rtol=0, atol=0)
    assert set(load_file(str(tmp_path / "mean" / "model.safetensors"))) == set(first.state_dict())

    saved = json.loads((tmp_path / "mean" / "train_state.json").read_text())
    assert saved == state
    assert saved["step"] == 60 and saved["cursors"] == {"corpus": 240}, "the last checkpoint's data position"
    assert "adam_steps" not in saved and not (tmp_path / "mean" / "optimizer.safetensors").exists()
    last = saved["history"][-1]
    assert last["averaged"] == ["a", "b"] and saved["averaged"] == [["a", "b"]]
    assert 0 < last["val_loss"] < 9.0, "the mean's own loss (random weights: about ln 96 = 4.6), not the run's"


def test_checkpoints_of_another_shape_or_a_single_one_are_refused(tmp_path: Path):
    checkpoint(tmp_path / "a", seed=1)
    checkpoint(tmp_path / "wide", seed=2, cfg=GPTConfig(**{**TINY.to_dict(), "n_embd": 32}))
    with pytest.raises(SystemExit, match="differ in shape"):
        average([tmp_path / "a", tmp_path / "wide"], tmp_path / "out")
    with pytest.raises(SystemExit, match="at least two"):
        average([tmp_path / "a"], tmp_path / "out")
    with pytest.raises(SystemExit, match="val.bin is missing"):
        average([tmp_path / "a", tmp_path / "a"], tmp_path / "out", val=tmp_path / "val.bin")
    with pytest.raises(SystemExit, match="config.json is missing"):
        average([tmp_path / "a", tmp_path / "nothing"], tmp_path / "out")
    assert not (tmp_path / "out").exists()
