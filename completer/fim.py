"""Fill-in-the-middle templates of released code models: their three markers, and a prompt built from them.

`completer convert` finds a template by the markers a tokenizer holds; the remote backend is told the template
by a setting (or guesses it from the model's name), and sends the prompt as text, which inference servers
(llama.cpp, vLLM) tokenize with the markers as special tokens.
"""
from __future__ import annotations

import re

FIM_TEMPLATES: dict[str, tuple[str, str, str]] = {
    "qwen": ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"),
    "starcoder2": ("<fim_prefix>", "<fim_suffix>", "<fim_middle>"),
    "starcoder": ("<fim_prefix>", "<fim_suffix>", "<fim_middle>"),
    "deepseek": ("<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>"),
    "codellama": ("<PRE> ", " <SUF>", " <MID>"),
}
"""(prefix, suffix, middle) markers by family; every family is prompted prefix-suffix-middle."""

TOKENIZER_TEMPLATES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("qwen", ()), ("starcoder2", ("<repo_name>", "<file_sep>")), ("starcoder", ()), ("deepseek", ()))
"""The templates `completer convert` looks for in a tokenizer, in order, each with the tokens besides its three
markers that tell it from a template with the same markers: StarCoder2's repository markers, which StarCoder's
and SantaCoder's tokenizers lack (Code Llama's SentencePiece tokenizer is refused)."""

_NAME_PATTERNS = (
    ("qwen", re.compile(r"qwen.*coder", re.IGNORECASE)),
    ("starcoder2", re.compile(r"starcoder-?2(?!\d)", re.IGNORECASE)),
    ("starcoder", re.compile(r"starcoder|santacoder|stable-?code", re.IGNORECASE)),
    ("deepseek", re.compile(r"deepseek.*coder", re.IGNORECASE)),
    ("codellama", re.compile(r"code-?llama", re.IGNORECASE)),
)


GENERAL_FAMILIES: dict[str, re.Pattern] = {"qwen": re.compile(r"qwen", re.IGNORECASE)}
"""Templates whose markers the same family's general models carry in their tokenizer without having been trained to
fill in: Qwen2, Qwen2.5 and Qwen3's general, math and instruct models share Qwen2.5-Coder's vocabulary, FIM markers
and all, and answer a FIM prompt with noise."""


def general_model_name(template: str, names: list[str]) -> str | None:
    """The name that says a model whose tokenizer holds `template`'s markers is its family's general model, not
    the code model trained to fill in: one of `names` is of the family and none of them is of its code model. None
    when a name says it is the code model, or no name says anything (the markers are then taken at their word)."""
    code, family = dict(_NAME_PATTERNS).get(template), GENERAL_FAMILIES.get(template)
    if family is None or any(code is not None and code.search(name) for name in names):
        return None
    return next((name for name in names if family.search(name)), None)


def template_for_model(name: str) -> str | None:
    """The FIM template a served model most likely knows, from its name; None when the name says nothing (the
    prompt is then the text before the cursor alone)."""
    return next((template for template, pattern in _NAME_PATTERNS if pattern.search(name)), None)


def fim_prompt(template: str, prefix: str, suffix: str) -> str:
    """The prefix-suffix-middle prompt: the model's continuation is the text between `prefix` and `suffix`."""
    begin, hole, end = FIM_TEMPLATES[template]
    return f"{begin}{prefix}{hole}{suffix}{end}"
