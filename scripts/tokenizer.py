"""Train the byte-level BPE tokenizer on the corpus and encode the splits to uint16 token arrays.

Two properties the engine relies on:
- a newline is always a token of its own, so "end of line" is one id: the beam search's stop;
- the indentation at the start of a line is a piece of its own, so runs of spaces merge into
  compact indentation tokens instead of gluing onto the first word.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Iterator

import numpy as np
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent))
from paths import corpus_dir  # noqa: E402

END_OF_TEXT = "<|endoftext|>"


def build_tokenizer() -> Tokenizer:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\n"), behavior="isolated"),  # newline: always its own token
        pre_tokenizers.Split(Regex(r"^ +"), behavior="isolated"),  # indentation: its own piece
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


def iter_texts(path: Path, limit_bytes: int | None = None) -> Iterator[str]:
    total = 0
    with open(path) as handle:
        for line in handle:
            text = json.loads(line)["text"]
            total += len(text)
            yield text
            if limit_bytes is not None and total >= limit_bytes:
                return


def train(corpus: Path, vocab_size: int, sample_mb: int) -> Tokenizer:
    tokenizer = build_tokenizer()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=[END_OF_TEXT], show_progress=True,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(iter_texts(corpus / "train.jsonl", sample_mb * 1_000_000), trainer=trainer)
    return tokenizer


def encode_split(tokenizer: Tokenizer, src: Path, dst: Path, batch: int = 256) -> int:
    """Write the split as one uint16 stream, files separated by <|endoftext|>."""
    eot = tokenizer.token_to_id(END_OF_TEXT)
    total = 0
    texts: list[str] = []
    with open(dst, "wb") as out:
        def flush() -> int:
            count = 0
            for enc in tokenizer.encode_batch(texts, add_special_tokens=False):
                ids = np.asarray(enc.ids + [eot], dtype=np.uint16)
                out.write(ids.tobytes())
                count += len(ids)
            texts.clear()
            return count
        for text in tqdm(iter_texts(src), desc=f"encode {src.stem}", unit="file"):
            texts.append(text)
            if len(texts) >= batch:
                total += flush()
        total += flush()
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=None)
    parser.add_argument("--vocab-size", type=int, default=8192)
    parser.add_argument("--sample-mb", type=int, default=60, help="corpus MB to learn merges from")
    parser.add_argument("--out", type=Path, default=None, help="tokenizer.json path (default: corpus dir)")
    parser.add_argument("--encode-with", type=Path, default=None, metavar="TOKENIZER_JSON",
                        help="encode with this existing tokenizer instead of training one: a further shard "
                             "must keep the ids the model was trained on")
    args = parser.parse_args()
    corpus = args.corpus or corpus_dir()
    if args.encode_with is not None and args.out is not None:
        raise SystemExit("--encode-with encodes with an existing tokenizer; --out names a new one to train")
    if args.encode_with is not None:
        if not args.encode_with.is_file():
            raise SystemExit(f"--encode-with {args.encode_with}: no such tokenizer file")
        tokenizer = Tokenizer.from_file(str(args.encode_with))
    else:
        tokenizer = train(corpus, args.vocab_size, args.sample_mb)
        tokenizer.save(str(args.out or corpus / "tokenizer.json"))
    assert tokenizer.get_vocab_size() <= 65535, "token ids are stored as uint16"
    counts = {split: encode_split(tokenizer, corpus / f"{split}.jsonl", corpus / f"{split}.bin")
              for split in ("train", "val")}
    (corpus / "tokens.json").write_text(json.dumps(counts))
    for split, n in counts.items():
        print(f"{split}: {n:,} tokens")


if __name__ == "__main__":
    main()
