"""The bundle's tokenizer, plus the byte view of every token that token healing needs."""
from __future__ import annotations

import bisect
from functools import lru_cache
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from .types import ModelError

END_OF_TEXT = "<|endoftext|>"
BLANK_BYTES = b" \t\r\n"  # what cannot start the code of a line


@lru_cache(maxsize=1)
def _byte_decoder() -> dict[str, int]:
    """Inverse of GPT-2's byte-to-printable-character map used by byte-level BPE."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(
        range(ord("®"), ord("ÿ") + 1))
    chars = printable[:]
    n = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(printable, chars)}


def _after_all_starting_with(prefix: bytes) -> bytes | None:
    """The least byte string above every string that starts with `prefix` (None: no bound, the prefix is
    all 0xff bytes), so a bisection finds where the tokens that start with it end."""
    stripped = prefix.rstrip(b"\xff")
    return stripped[:-1] + bytes([stripped[-1] + 1]) if stripped else None


def _check_ids(path: Path, vocab: dict[str, int], size: int) -> None:
    """Refuse a vocabulary with an id past the model's `size` ids: the model has no row for it, so its
    encoding would fail in the model's first call (the tokenizers library counts tokens, not ids)."""
    token, idx = max(vocab.items(), key=lambda item: item[1], default=("", -1))
    if idx >= size:
        raise ModelError(f"{path}: token {token!r} has id {idx:,}, past the model's {size:,} tokens "
                         "(a damaged tokenizer.json?)")


class Tokens:
    """Encoding, decoding and the prefix queries token healing asks of the vocabulary."""

    def __init__(self, path: Path, vocab_size: int | None = None, end_of_text: str = END_OF_TEXT) -> None:
        """`vocab_size`: the model's, when it pads the tokenizer's with ids no text encodes to (never generated);
        `end_of_text`: the token that starts a document."""
        try:
            self.tokenizer = Tokenizer.from_file(str(path))
        except Exception as exc:  # the tokenizers library raises a bare Exception for a file it cannot parse
            raise ModelError(f"{path}: not a tokenizer that the tokenizers library can read ({exc})") from exc
        # Text is text: a document that spells "<|fim_middle|>" or "<|endoftext|>" gets those characters, not
        # the markers (the engine places the markers itself).
        self.tokenizer.encode_special_tokens = True
        own_size = self.tokenizer.get_vocab_size()
        self.vocab_size = max(own_size, vocab_size or 0)
        newline = self.tokenizer.encode("\n", add_special_tokens=False).ids
        if len(newline) != 1:
            raise ModelError(f"{path}: a newline must be one token")
        self.newline_id = newline[0]
        self.end_of_text_id = self.tokenizer.token_to_id(end_of_text)
        if self.end_of_text_id is None:
            raise ModelError(f"{path}: has no {end_of_text} token")
        decoder = _byte_decoder()
        added = self.tokenizer.get_added_tokens_decoder()
        self._added = set(added)
        self._path = path
        specials = {token.content: idx for idx, token in added.items() if token.special}
        vocab = self.tokenizer.get_vocab()
        _check_ids(path, vocab, self.vocab_size)
        self.token_bytes: list[bytes] = [b""] * self.vocab_size
        for token, idx in vocab.items():
            if token == end_of_text or token in specials:  # markers, not text: they spell nothing
                continue
            if idx in added:  # an added token is stored as its text, not in the byte-level alphabet
                self.token_bytes[idx] = added[idx].content.encode("utf-8")
                continue
            try:
                self.token_bytes[idx] = bytes(decoder[c] for c in token)
            except KeyError:
                raise ModelError(f"{path}: token {token!r} is not byte-level BPE; only byte-level BPE "
                                 "tokenizers are supported") from None
        # The markers a line may not contain (a FIM model's <|fim_prefix|> and kin) and the ids past the
        # tokenizer's own that only pad the model's vocabulary; end of text ends a line.
        self.banned_ids = sorted({idx for token, idx in specials.items() if token != end_of_text}
                                 | set(range(own_size, self.vocab_size)))
        self.generable = np.ones(self.vocab_size, dtype=bool)  # [V]
        self.generable[self.banned_ids] = False
        # Tokens whose bytes hold a newline: any of them can end a line. In our own vocabularies that is the
        # newline token alone; byte-level BPE vocabularies of released models merge "\n" into others ("):\n").
        self.ends_line = np.asarray([b"\n" in b for b in self.token_bytes])  # [V]
        self.ends_line[self.newline_id] = True
        self.isolates_newlines = int(self.ends_line.sum()) == 1
        self._index_bytes()

    def _index_bytes(self) -> None:
        """The views of `token_bytes` that healing's prefix queries bisect."""
        order = sorted(range(self.vocab_size), key=lambda i: self.token_bytes[i])
        self._sorted_ids = np.asarray(order, dtype=np.int64)
        self._sorted_bytes = [self.token_bytes[i] for i in order]
        self._by_bytes: dict[bytes, int] = {b: i for i, b in enumerate(self.token_bytes) if b}
        self.starts_code = np.asarray([bool(b) and b[0] not in BLANK_BYTES for b in self.token_bytes])  # [V]

    def ban_markers(self, ids: Sequence[int]) -> None:
        """Never generate the prompt markers `ids`, which spell nothing, even where the tokenizer does not call
        them special (deepseek-coder's FIM tokens)."""
        strays = [idx for idx in ids if idx not in self._added]
        if strays:
            raise ModelError(f"{self._path}: marker ids {strays} are not among the tokenizer's added tokens "
                             "(a manifest from another model?)")
        for idx in ids:
            self.token_bytes[idx] = b""
        self.banned_ids = sorted(set(self.banned_ids) | set(ids))
        self.generable[self.banned_ids] = False
        self.ends_line[list(ids)] = False
        if ids:
            self._index_bytes()

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def encode_split(self, text: str, at: int) -> tuple[list[int], int]:
        """Tokens of `text` encoded whole, and how many of them end at or before character `at`."""
        encoding = self.tokenizer.encode(text, add_special_tokens=False)
        before = bisect.bisect_right([end for _, end in encoding.offsets], at)
        return encoding.ids, before

    def encode_many(self, texts: list[str]) -> list[list[int]]:
        """Each text's tokens, encoded in one batch (the tokenizer spreads it over its threads)."""
        return [encoding.ids for encoding in self.tokenizer.encode_batch(texts, add_special_tokens=False)]

    def decode_bytes(self, ids: list[int]) -> bytes:
        return b"".join(self.token_bytes[i] for i in ids)

    def after_healed(self, generated: list[int], healed: bytes) -> str | None:
        """What `generated` inserts at the cursor: its text past the typed bytes it re-spells first (token
        healing), without trailing whitespace; None when it does not spell them."""
        raw = self.decode_bytes(generated)
        if not raw.startswith(healed):
            return None
        line = raw[len(healed):].split(b"\n", 1)[0]  # a token that ends the line may carry text before its newline
        line = line.split(b"\r", 1)[0]  # a lone carriage return breaks the line for LSP clients too
        return line.decode("utf-8", errors="ignore").rstrip()

    def line_ends_in(self, token: int, owed: bytes) -> bool:
        """Whether `token`, generated while the typed bytes `owed` are still unspelled, ends the line: it is
        end of text, or it holds a newline past those bytes (a healed token may re-spell the previous newline)."""
        if token == self.end_of_text_id:
            return True
        return bool(self.ends_line[token]) and b"\n" in self.token_bytes[token][len(owed):]

    def allowed_for(self, remaining: bytes, then_code: bool = False) -> np.ndarray:
        """Mask [V] of tokens that may come next while `remaining` typed bytes are still unspelled:
        tokens that start with all of it, or that are a non-empty prefix of it. With `then_code`,
        a token that goes past `remaining` must go on with code, not more whitespace."""
        mask = np.zeros(self.vocab_size, dtype=bool)
        lo = bisect.bisect_left(self._sorted_bytes, remaining)
        after = _after_all_starting_with(remaining)
        hi = bisect.bisect_left(self._sorted_bytes, after, lo) if after is not None else len(self._sorted_bytes)
        mask[self._sorted_ids[lo:hi]] = True
        if then_code:  # the range holds only tokens that start with the typed indentation: a few
            size = len(remaining)
            for at in range(lo, hi):
                piece = self._sorted_bytes[at]
                if len(piece) > size and piece[size] in BLANK_BYTES:
                    mask[self._sorted_ids[at]] = False
        for end in range(1, len(remaining)):
            idx = self._by_bytes.get(remaining[:end])
            if idx is not None:
                mask[idx] = True
        return mask
