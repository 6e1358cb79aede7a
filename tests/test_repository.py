"""The workspace's snippets laid out as files (completer/repository.py): the head a Qwen2.5-Coder-style model
reads in tokens, within its budget, and the form the server sends it to the worker in."""
from __future__ import annotations

from completer.repository import CHARS_PER_TOKEN, RepositoryContext, repository_head, repository_head_ids
from lsp import framing

NAME, SEP = 1000, 1001
PRICES = "def total(items):\n    return sum(item.price for item in items)\n\n\nTAX = 0.2\n"


def _characters(text: str) -> list[int]:
    """A tokenizer of one id per character: a head's length in tokens is its length in characters."""
    return [ord(c) for c in text]


def _text(ids: list[int]) -> str:
    return "".join({NAME: "<|repo_name|>", SEP: "<|file_sep|>"}.get(i, chr(i)) for i in ids)


def test_the_head_in_tokens_is_the_text_head_with_each_marker_one_id():
    repository = RepositoryContext("shop", "shop/cart.py", (("shop/prices.py", PRICES),))
    ids = repository_head_ids("qwen", repository, 500, _characters, (NAME, SEP))
    assert ids.count(NAME) == 1 and ids.count(SEP) == 2 and ids[0] == NAME
    assert _text(ids) == repository_head("qwen", repository, 500 * CHARS_PER_TOKEN)
    assert _text(ids) == "<|repo_name|>shop\n<|file_sep|>shop/prices.py\n" + PRICES.rstrip("\n") + "\n" \
        + "<|file_sep|>shop/cart.py\n"


def test_the_head_shrinks_to_its_budget_down_to_the_folder_and_the_path_alone():
    long = "\n".join(f"value_{i} = compute({i})" for i in range(200)) + "\n"
    repository = RepositoryContext("shop", "shop/cart.py", (("shop/long.py", long), ("shop/prices.py", PRICES)))
    for budget in (400, 200, 150):
        ids = repository_head_ids("qwen", repository, budget, _characters, (NAME, SEP))
        assert len(ids) <= budget and _text(ids).endswith("<|file_sep|>shop/cart.py\n")
        assert "shop/long.py\nvalue_0 = compute(0)\nvalue_1 = compute(1)\nvalue_2" in _text(ids)  # whole lines
    bare = repository_head_ids("qwen", repository, 40, _characters, (NAME, SEP))
    assert _text(bare) == "<|repo_name|>shop\n<|file_sep|>shop/cart.py\n"  # no room for three lines of a file
    assert repository_head_ids("qwen", repository, 10, _characters, (NAME, SEP)) == []


def test_the_worker_is_sent_the_places_and_rebuilds_the_context_with_the_snippets():
    repository = RepositoryContext("shop", "shop/cart.py", (("shop/prices.py", PRICES), ("shop/tax.py", "T = 1\n")))
    message = framing.decode(framing.encode({"repository": repository})[framing.HEADER.size:])
    assert message["repository"] == {"name": "shop", "path": "shop/cart.py", "paths": ["shop/prices.py", "shop/tax.py"]}
    assert RepositoryContext.from_message(message["repository"], [PRICES, "T = 1\n"]) == repository
    for bad in (None, "shop", {"name": "shop", "path": "a.py", "paths": ["one.py"]},  # a path for each snippet
                {"name": "shop", "path": 3, "paths": ["x.py", "y.py"]},
                {"name": "shop", "path": "a.py", "paths": [1, 2]}):
        assert RepositoryContext.from_message(bad, [PRICES, "T = 1\n"]) is None


def test_a_blank_snippet_lays_out_no_file():
    """An empty file's window (an empty __init__.py) says nothing: it is not laid out as a file of blank lines."""
    repository = RepositoryContext("shop", "shop/cart.py", (("shop/__init__.py", ""), ("shop/blank.py", "\n \n"),
                                                            ("shop/prices.py", PRICES)))
    head = repository_head("qwen", repository)
    assert "__init__.py" not in head and "blank.py" not in head and "\n\n<|file_sep|>" not in head
    assert head.startswith("<|repo_name|>shop\n<|file_sep|>shop/prices.py\ndef total(items):\n")
