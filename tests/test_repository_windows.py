"""scripts/repository_windows.py, on a package made here: the windows that hold the workspace's snippets before the
file, the tokens they score, and the paired measure of whether a model reads the snippets."""
from __future__ import annotations

import numpy as np
from tokenizers import Tokenizer

import repository_windows as rw
from completer.repository import RepositoryContext

PRICES = "def total(items):\n    return sum(item.price for item in items)\n\n\nTAX = 0.2\n"


def _package() -> rw.Packages:
    helpers = "".join(f"def shipping_cost_{i}(order):\n    return order.weight * RATE_{i}\n\n\n" for i in range(30))
    files = [("shop==1.0", f"shop/m{i}.py", helpers.replace("shipping", f"s{i}")) for i in range(3)]
    return rw.Packages([*files, ("shop==1.0", "shop/prices.py", PRICES)])


def test_the_snippets_go_first_each_closed_by_end_of_text_the_best_nearest_the_file():
    other = "import os\nimport sys\n\nROOT = os.getcwd()\n"
    repository = RepositoryContext("shop", "shop/cart.py", (("shop/prices.py", PRICES), ("shop/paths.py", other)))
    ids = rw.end_of_text_head(repository, 500, lambda text: [ord(c) for c in text], 3)
    assert "".join("|" if i == 3 else chr(i) for i in ids) == other + "|" + PRICES.rstrip("\n") + "\n|"
    assert len(rw.end_of_text_head(repository, 60, lambda text: [ord(c) for c in text], 3)) <= 60
    assert rw.end_of_text_head(repository, 20, lambda text: [ord(c) for c in text], 3) == []


def test_a_window_scores_the_file_alone_and_pairs_with_the_window_without_snippets():
    tokenizer = Tokenizer.from_file(str(rw.TOKENIZER))
    rows = rw.Rows(_package(), tokenizer, 256, seed=0)
    lines = rows.packages.files["shop==1.0"]["shop/m0.py"].split("\n")
    state = rows.rng.bit_generator.state
    ids, scored, after = rows.row("shop==1.0", "shop/m0.py", lines, 40, True)
    head = int(np.flatnonzero(ids == rw.END_OF_TEXT_ID)[0])
    text = tokenizer.decode(ids[:head].tolist())
    assert "order.weight" in text and ("s1_cost" in text or "s2_cost" in text)  # another file's helpers
    assert not scored[:head + 1].any() and scored[head + 2:].all() and len(ids) == 257
    rows.rng.bit_generator.state = state  # the same lines after the cursor
    plain, plain_scored, plain_after = rows.row("shop==1.0", "shop/m0.py", lines, 40, False)
    assert rw.END_OF_TEXT_ID not in plain[2:] and after == plain_after  # the same lines after the cursor


def test_the_measure_pairs_the_same_tokens_with_and_without_the_snippets():
    import torch
    from model import GPT, GPTConfig

    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=8192, context_length=256, n_layer=1, n_head=2, n_embd=32))
    tokenizer = Tokenizer.from_file(str(rw.TOKENIZER))
    found = rw.measure(model, rw.Rows(_package(), tokenizer, 256, seed=1), 4)
    assert found["windows"] == 4 and np.isfinite([found["with_snippets"], found["without"]]).all()
    assert abs(found["difference"] - (found["with_snippets"] - found["without"])) < 1e-6
