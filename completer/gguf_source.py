"""A GGUF file (llama.cpp, Ollama, LM Studio) unpacked as a Hugging Face checkpoint folder the converter reads.

Users of llama.cpp-based tools hold their models as GGUF files, not as safetensors folders. `unpack` writes one's
config.json and tokenizer.json (the vocabulary, merges and pre-tokenizer the file names, rebuilt for the
tokenizers library) into a folder `completer convert` then reads like a checkpoint's; `read_tensors` gives its
tensors in fp32 under their Hugging Face names (every quantized block dequantized by the `gguf` package,
llama.cpp's own reader), when the converter asks for them. What llama.cpp's converter changed is undone:
LLaMA's query and key rows are permuted back to the Hugging Face rotary layout, GPT-2's weights transposed back.

Only what the graph runs is accepted: the llama, qwen2, qwen3, starcoder2, starcoder and gpt2 architectures,
byte-level BPE vocabularies ("gpt2" in GGUF) whose pre-tokenizer is known here. Anything else is one line naming it.
"""
from __future__ import annotations

import json
import math
import mmap
import stat
import struct
from functools import partial
from pathlib import Path

import numpy as np

from .types import ModelError

ARCHITECTURES = ("llama", "qwen2", "qwen3", "starcoder2", "starcoder", "gpt2")
"""general.architecture values unpacked, each to the config.json model_type of the same name but `starcoder`:
StarCoder and StarCoderBase, transformers' gpt_bigcode."""
LEARNED_POSITIONS = ("starcoder", "gpt2")  # GPT-2's tensor names and layout; StarCoder's has one key/value head
GPT2_CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
"""GPT-2's weights kept as [in, out] (its Conv1D), which llama.cpp's converter transposes."""

_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
_QWEN2 = (r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
          r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_LLAMA3 = (r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
           r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
PRE_TOKENIZERS: dict[str, tuple[str, ...]] = {
    "qwen2": (_QWEN2,),
    "llama-bpe": (_LLAMA3,),
    "llama3": (_LLAMA3,),
    "smollm": (r"\p{N}", _GPT2),
    "starcoder": (r"\p{N}", _GPT2),
    "refact": (r"\p{N}", _GPT2),
    "gpt-2": (_GPT2,),
    "deepseek-coder": ("[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+", r"\p{N}"),
    # what llama.cpp splits with when a file names no pre-tokenizer (files converted before it recorded one),
    # warning that quality is degraded: the model is then fed what llama.cpp feeds it
    "default": (r"[\p{P}\$\+<=>\^~\|]+", r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
                r"\p{N}+", "[0-9][0-9][0-9]"),
}
"""The regular expressions llama.cpp splits text with for each `tokenizer.ggml.pre` name, in order (each splits
the pieces the one before left), before the byte-level BPE."""
IGNORES_MERGES = ("llama-bpe", "llama3")  # a piece that is a whole token is that token, as llama.cpp does

NORMAL, CONTROL, USER_DEFINED, UNUSED = 1, 3, 4, 5  # gguf.TokenType
GLOBAL_TENSORS = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
                  "output_norm.bias": "model.norm.bias", "output.weight": "lm_head.weight"}
LAYER_TENSORS = {
    "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm", "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
    "attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm",  # qwen3
}
STARCODER2_MLP = {"ffn_up": "mlp.c_fc", "ffn_down": "mlp.c_proj"}
GPT2_TENSORS = {"token_embd.weight": "transformer.wte.weight", "position_embd.weight": "transformer.wpe.weight",
                     "output_norm.weight": "transformer.ln_f.weight", "output_norm.bias": "transformer.ln_f.bias",
                     "output.weight": "lm_head.weight"}
GPT2_LAYER = {"attn_norm": "ln_1", "attn_qkv": "attn.c_attn", "attn_output": "attn.c_proj", "ffn_norm": "ln_2",
                   "ffn_up": "mlp.c_fc", "ffn_down": "mlp.c_proj"}
STARCODER2_WINDOW = 4096  # GGUF files of StarCoder2 do not record the window its attention slides over


class GGUFError(ModelError):
    """Why a GGUF file cannot be unpacked, in one line."""


def unpack(path: Path, folder: Path) -> dict:
    """Write the GGUF file at `path` into `folder` as config.json, tokenizer.json and a README.md naming its
    license; return what the manifest records of it."""
    reader, meta, arch = _open(path)
    tokenizer, vocab_size = _tokenizer(meta, path)
    embedding = next((t for t in reader.tensors if t.name == "token_embd.weight"), None)
    if embedding is not None:  # the model's rows, which may pad the vocabulary's
        vocab_size = max(vocab_size, int(embedding.shape[-1]))
    config = _config(meta, arch, vocab_size, tied=not any(t.name == "output.weight" for t in reader.tensors))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer), encoding="utf-8")
    license_name = meta.text("general.license", "unknown (not named in the GGUF file)")
    (folder / "README.md").write_text(f"---\nlicense: {license_name}\n---\n", encoding="utf-8")
    return {"gguf": path.name, "gguf_architecture": arch, "gguf_name": meta.text("general.name", ""),
            "gguf_pre_tokenizer": meta.text("tokenizer.ggml.pre", "default"),
            "gguf_types": sorted({t.tensor_type.name for t in reader.tensors})}


_SCALAR_BYTES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}  # GGUF value types
_STRING, _ARRAY = 8, 9
LISTED_KEYS = ("general.architecture", "general.name", "tokenizer.ggml.model", "tokenizer.ggml.pre", "split.count")


def header(path: Path, keys: tuple[str, ...] = LISTED_KEYS, parameters: bool = False) -> dict[str, object]:
    """The text and number values of `keys` in the GGUF file at `path`, read from its header alone, skipping the
    vocabulary's arrays: what `completer models` shows of a file without the seconds gguf's reader spends on
    them; with `parameters`, also how many values its tensors hold ("parameters"), from the tensor descriptions
    after the values. Raises GGUFError for a file that is not GGUF or whose header is damaged."""
    wanted, found = set(keys), {}
    try:
        if not stat.S_ISREG(path.stat().st_mode):  # a FIFO would block open() forever
            raise GGUFError(f"{path}: not a regular file")
        with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            if data[:4] != b"GGUF" or struct.unpack_from("<I", data, 4)[0] not in (2, 3):
                raise GGUFError(f"{path}: not a GGUF file of version 2 or 3")
            count, offset = struct.unpack_from("<Q", data, 16)[0], 24

            def text_end(at: int) -> int:
                end = at + 8 + struct.unpack_from("<Q", data, at)[0]
                if end > len(data):
                    raise GGUFError(f"{path}: the header ends inside a text at byte {at}")
                return end

            def text(at: int) -> tuple[str, int]:
                end = text_end(at)
                return data[at + 8:end].decode("utf-8", "replace"), end

            def skip(kind: int, at: int, depth: int = 0) -> int:
                if kind == _STRING:
                    return text_end(at)
                if kind == _ARRAY:
                    if depth > 8:  # llama.cpp's files nest arrays one level at most
                        raise GGUFError(f"{path}: arrays nested too deep at byte {at}")
                    item, length = struct.unpack_from("<IQ", data, at)
                    at += 12
                    if item in _SCALAR_BYTES:
                        return at + length * _SCALAR_BYTES[item]
                    for _ in range(length):
                        at = skip(item, at, depth + 1)
                        if at > len(data):
                            raise GGUFError(f"{path}: the header ends inside an array at byte {at}")
                    return at
                if kind not in _SCALAR_BYTES:
                    raise GGUFError(f"{path}: unknown GGUF value type {kind} at byte {at}")
                return at + _SCALAR_BYTES[kind]

            for _ in range(count):
                if not parameters and not wanted - found.keys():
                    break
                if offset >= len(data):
                    raise GGUFError(f"{path}: the header ends before its {count} values")
                key, offset = text(offset)
                kind = struct.unpack_from("<I", data, offset)[0]
                offset += 4
                if key in wanted and kind == _STRING:
                    found[key], offset = text(offset)
                elif key in wanted and kind in (4, 5, 10, 11):
                    found[key] = struct.unpack_from({4: "<I", 5: "<i", 10: "<Q", 11: "<q"}[kind], data, offset)[0]
                    offset += _SCALAR_BYTES[kind]
                else:
                    offset = skip(kind, offset)
            if parameters:
                found["parameters"] = _tensor_values(data, offset, struct.unpack_from("<Q", data, 8)[0], text_end,
                                                     path)
    except (OSError, ValueError, struct.error) as exc:  # mmap of an empty file, a read past the end
        raise GGUFError(f"{path}: the GGUF header cannot be read ({type(exc).__name__}: {exc})") from exc
    return found


def _tensor_values(data, offset: int, tensors: int, text_end, path: Path) -> int:
    """The sum of the tensors' sizes, from the descriptions that follow the header's values: each a name, a
    count of axes, the axes, a type and an offset."""
    total = 0
    for _ in range(tensors):
        offset = text_end(offset)
        (axes,) = struct.unpack_from("<I", data, offset)
        if axes > 8:  # GGML_MAX_DIMS is 4
            raise GGUFError(f"{path}: a tensor with {axes} axes at byte {offset}")
        total += math.prod(struct.unpack_from(f"<{axes}Q", data, offset + 4))
        offset += 4 + 8 * axes + 4 + 8
    return total


def unsupported(found: dict[str, object]) -> str | None:
    """Why `completer convert` would refuse a file whose header says `found` (see `header`), in a few words; None
    when its header is one it reads."""
    arch, model = found.get("general.architecture"), found.get("tokenizer.ggml.model")
    pre = found.get("tokenizer.ggml.pre", "default")
    if arch not in ARCHITECTURES:
        return f"GGUF architecture {arch!r} is not supported"
    if model != "gpt2":
        return f"tokenizer {model!r} is not byte-level BPE"
    if pre not in PRE_TOKENIZERS:
        return f"pre-tokenizer {pre!r} is not supported"
    parts = found.get("split.count", 1)
    return f"one part of a file split into {parts}" if isinstance(parts, int) and parts > 1 else None


def read_tensors(path: Path) -> dict[str, object]:
    """Every tensor of the GGUF file at `path` under its Hugging Face name (unknown names kept as they are, so
    the converter refuses what it would not run), each dequantized to fp32 when it is read (graph/lazy.py);
    LLaMA's query and key rows permuted back."""
    from .graph.lazy import Lazy  # the convert extra's, as is gguf's reader

    reader, meta, arch = _open(path)
    heads = meta.size(f"{arch}.attention.head_count")
    kv_heads = meta.size(f"{arch}.attention.head_count_kv", heads)
    out = {}
    for tensor in reader.tensors:
        name = _hf_name(tensor.name, arch)
        shape = tuple(int(n) for n in reversed(tensor.shape))
        read = partial(_dequantized, path, tensor)
        read(tensor_rows=slice(0, 1))  # a type gguf cannot read is refused now, before anything is built
        values = Lazy(shape, np.float32, lambda read=read, shape=shape: read(tensor_rows=None).reshape(shape),
                      rows=lambda first, last, read=read: read(tensor_rows=slice(first, last)))
        if arch == "llama" and name.endswith(("q_proj.weight", "k_proj.weight", "q_proj.bias", "k_proj.bias")):
            count = heads if "q_proj" in name else kv_heads  # biases were permuted too
            values = values.then(lambda rows, count=count: np.ascontiguousarray(_unpermute(rows, count)))
        elif arch == "gpt2" and name.endswith(GPT2_CONV1D):
            values = values.transposed()
        out[name] = values
    return out


def _dequantized(path: Path, tensor, tensor_rows: slice | None) -> np.ndarray:
    """A tensor's values (or a block of its leading rows) in fp32; a type gguf cannot read is refused by name.
    Read from the file, not through the reader's map, whose pages would stay resident once touched."""
    from gguf.quants import dequantize

    from .graph.safetensors_reader import finite

    mapped = tensor.data  # only its shape and dtype: [rows, ..., bytes or values of a row]
    by_rows = tensor_rows is not None and mapped.ndim >= 2  # a vector's quantized blocks are not rows
    rows = mapped.shape[0] if mapped.ndim else 1
    first, last = (min(tensor_rows.start, rows), min(tensor_rows.stop, rows)) if by_rows else (0, rows)
    row = int(np.prod(mapped.shape[1:]))
    data = np.fromfile(path, dtype=mapped.dtype, count=(last - first) * row,
                       offset=int(tensor.data_offset) + first * row * mapped.dtype.itemsize)
    if data.size != (last - first) * row:
        raise GGUFError(f"{path}: tensor {tensor.name!r} is cut short (the file changed or was truncated while it "
                        "was read)")
    data = data.reshape((last - first, *mapped.shape[1:]) if mapped.ndim else ())
    try:
        values = np.ascontiguousarray(dequantize(data, tensor.tensor_type), dtype=np.float32)
    except (NotImplementedError, ValueError, TypeError) as exc:
        raise GGUFError(f"{path}: tensor {tensor.name!r} of type {tensor.tensor_type.name} cannot be read "
                        f"({exc})") from exc
    if not finite(values):
        raise GGUFError(f"{path}: tensor {tensor.name!r} holds NaN or infinite values (a corrupt file?)")
    return values[tensor_rows] if tensor_rows is not None and not by_rows and values.ndim else values


def _open(path: Path) -> tuple[object, _Metadata, str]:
    """The file's reader (it maps the file; tensors are read when asked), its metadata and its architecture."""
    reader_class = _bounded_reader()  # without the gguf package: ModuleNotFoundError, which names the extra
    try:
        reader = reader_class(str(path))
    except Exception as exc:  # the reader raises ValueError, struct errors or IndexError on a damaged file
        raise GGUFError(f"{path}: not a GGUF file gguf can read ({type(exc).__name__}: {exc})") from exc
    _check_layout(reader, path)
    meta = _Metadata(reader, path)
    parts = meta.value("split.count", 1)
    if isinstance(parts, int) and parts > 1:
        raise GGUFError(f"{path}: one part of a GGUF split into {parts}; join them first "
                        "(llama.cpp's llama-gguf-split --merge FIRST_PART OUT.gguf) and convert the joined file")
    arch = meta.text("general.architecture")
    if arch not in ARCHITECTURES:
        raise GGUFError(f"{path}: GGUF architecture {arch!r} is not supported (supported: {', '.join(ARCHITECTURES)})")
    return reader, meta, arch


def _check_layout(reader, path: Path) -> None:
    """Refuse tensors whose bytes overlap or do not start on the file's alignment, as llama.cpp refuses them: a
    corrupt offset would read another tensor's bytes as this one's, and the model converted would be silently
    wrong (gguf's reader checks neither)."""
    placed = sorted((int(t.data_offset), int(t.data_offset) + int(t.n_bytes), t.name) for t in reader.tensors
                    if t.n_bytes)
    for begin, _, name in placed:
        if (begin - reader.data_offset) % reader.alignment:
            raise GGUFError(f"{path}: tensor {name!r} does not start on the file's {reader.alignment}-byte alignment "
                            "(corrupt header)")
    for (_, end, name), (begin, _, other) in zip(placed, placed[1:]):
        if begin < end:
            raise GGUFError(f"{path}: tensors {name!r} and {other!r} share bytes (corrupt header)")


def _bounded_reader() -> type:
    """gguf's reader, refusing a read past the end of the file: its own returns fewer items than asked and goes on,
    so an array whose declared length is corrupt (2**40 entries) loops over it and fills memory."""
    from gguf import GGUFReader  # an ImportError, which the converter reports in one line, where too old

    class BoundedReader(GGUFReader):
        def _get(self, offset, dtype, count=1, override_order=None):
            found = super()._get(offset, dtype, count, override_order)
            if len(found) < int(count):
                raise ValueError(f"the file ends inside a value at byte {offset}")
            return found

    return BoundedReader


class _Metadata:
    """The file's key/value metadata, read with the types it should have or refused in one line."""

    def __init__(self, reader, path: Path) -> None:
        self.fields, self.path = reader.fields, path

    def value(self, key: str, default: object = None) -> object:
        field = self.fields.get(key)
        if field is None:
            return default
        try:
            return field.contents()
        except Exception as exc:
            raise GGUFError(f"{self.path}: metadata {key!r} cannot be read ({exc})") from exc

    def text(self, key: str, default: str | None = None) -> str:
        found = self.value(key, default)
        if not isinstance(found, str):
            raise GGUFError(f"{self.path}: metadata {key!r} is missing or not text")
        return found

    def number(self, key: str, default: float | None = None) -> float:
        found = self.value(key, default)
        if isinstance(found, bool) or not isinstance(found, (int, float)) or not math.isfinite(found):
            raise GGUFError(f"{self.path}: metadata {key!r} is missing or not a number")  # inf, NaN: no size
        return found

    def size(self, key: str, default: int | None = None) -> int:
        """A count or width (heads, layers, the hidden size): a whole number above 0, since the sizes are divided
        by one another and a 0 would fail as a bare ZeroDivisionError, far from the key that was wrong."""
        found = self.number(key, default)
        if found != int(found) or found < 1:
            raise GGUFError(f"{self.path}: metadata {key!r} must be a whole number above 0, not {found!r}")
        return int(found)

    def texts(self, key: str) -> list[str]:
        found = self.value(key)
        if not isinstance(found, list) or not all(isinstance(item, str) for item in found):
            raise GGUFError(f"{self.path}: metadata {key!r} is missing or not a list of text")
        return found


def _config(meta: _Metadata, arch: str, vocab_size: int, tied: bool) -> dict:
    """The config.json of the checkpoint the file was converted from, as far as the graph reads it."""
    if arch in LEARNED_POSITIONS:
        return _gpt2_config(meta, arch, vocab_size, tied)
    heads = meta.size(f"{arch}.attention.head_count")
    config = {
        "model_type": arch,
        "hidden_size": meta.size(f"{arch}.embedding_length"),
        "intermediate_size": meta.size(f"{arch}.feed_forward_length"),
        "num_hidden_layers": meta.size(f"{arch}.block_count"),
        "num_attention_heads": heads,
        "num_key_value_heads": meta.size(f"{arch}.attention.head_count_kv", heads),
        "max_position_embeddings": int(meta.number(f"{arch}.context_length")),
        "rope_theta": float(meta.number(f"{arch}.rope.freq_base", 10000.0)),
        "vocab_size": vocab_size, "tie_word_embeddings": tied,
    }
    key_length = meta.value(f"{arch}.attention.key_length")
    if not isinstance(key_length, int):
        key_length = config["hidden_size"] // heads  # llama.cpp's head size where the file names none
    if key_length != config["hidden_size"] // heads or arch == "qwen3":  # Qwen3's config.json without it: 128
        config["head_dim"] = key_length
    scaling = meta.value(f"{arch}.rope.scaling.type")
    if scaling not in (None, "none"):
        config["rope_scaling"] = {"rope_type": scaling, "factor": meta.value(f"{arch}.rope.scaling.factor")}
    if arch == "starcoder2":  # every released StarCoder2 attends over a window of 4,096 tokens
        window = meta.value(f"{arch}.attention.sliding_window")
        config.update(norm_epsilon=float(meta.number(f"{arch}.attention.layer_norm_epsilon", 1e-5)),
                      hidden_act="gelu_pytorch_tanh", use_bias=True,
                      sliding_window=window if isinstance(window, int) else STARCODER2_WINDOW)
    else:
        config.update(rms_norm_eps=float(meta.number(f"{arch}.attention.layer_norm_rms_epsilon", 1e-6)),
                      hidden_act="silu")
    eos = meta.value("tokenizer.ggml.eos_token_id")
    if isinstance(eos, int):
        config["eos_token_id"] = eos
    return config


def _gpt2_config(meta: _Metadata, arch: str, vocab_size: int, tied: bool) -> dict:
    """The config.json of a `gpt2` file (GPT-2 itself; llama.cpp's converter copies its tied embeddings into an
    output head, which the converter finds equal and ties again) or a `starcoder` one (transformers' gpt_bigcode:
    GPT-2 with one key/value head, whose fused q/k/v rows llama.cpp reads as [q | k | v]). llama.cpp's converter
    writes every StarCoder with one; a file that says otherwise is refused, since gpt_bigcode's several heads are
    interleaved by head."""
    config = {"n_embd": meta.size(f"{arch}.embedding_length"),
              "n_layer": meta.size(f"{arch}.block_count"),
              "n_head": meta.size(f"{arch}.attention.head_count"),
              "n_positions": int(meta.number(f"{arch}.context_length")),
              "n_inner": meta.size(f"{arch}.feed_forward_length"),
              "layer_norm_epsilon": float(meta.number(f"{arch}.attention.layer_norm_epsilon", 1e-5)),
              "vocab_size": vocab_size}
    if arch == "gpt2":
        config.update(model_type="gpt2", activation_function="gelu_new", tie_word_embeddings=True)
    else:
        kv_heads = meta.number("starcoder.attention.head_count_kv", 1)
        if kv_heads != 1:
            raise GGUFError(f"{meta.path}: a starcoder file with {kv_heads} key/value heads; only StarCoder's one "
                            "(multi-query attention) is read")
        config.update(model_type="gpt_bigcode", multi_query=True, activation_function="gelu_pytorch_tanh",
                      tie_word_embeddings=tied)
    eos = meta.value("tokenizer.ggml.eos_token_id")
    return {**config, "eos_token_id": eos} if isinstance(eos, int) else config


def _tokenizer(meta: _Metadata, path: Path) -> tuple[dict, int]:
    """tokenizer.json for the tokenizers library, and the vocabulary's size: the tokens in their byte-level
    spelling (as GGUF keeps them), the merges, the pre-tokenizer's splits; control, user-defined and unused
    tokens (the markers, and llama.cpp's [PAD] fillers) as added tokens, never read from text."""
    model = meta.text("tokenizer.ggml.model")
    if model != "gpt2":
        raise GGUFError(f"{path}: tokenizer {model!r} is not supported; only byte-level BPE (GGUF 'gpt2') tokenizers "
                        "are supported")
    pre = meta.text("tokenizer.ggml.pre", "default")
    if pre not in PRE_TOKENIZERS:
        raise GGUFError(f"{path}: pre-tokenizer {pre!r} is not supported (supported: {', '.join(PRE_TOKENIZERS)})")
    tokens = meta.texts("tokenizer.ggml.tokens")
    merges = meta.texts("tokenizer.ggml.merges")
    kinds = meta.value("tokenizer.ggml.token_type") or [NORMAL] * len(tokens)
    if not isinstance(kinds, list) or len(kinds) != len(tokens):
        raise GGUFError(f"{path}: tokenizer.ggml.token_type does not give a type for each token")
    vocab: dict[str, int] = {}
    added = []
    for idx, (token, kind) in enumerate(zip(tokens, kinds)):
        if kind in (CONTROL, USER_DEFINED, UNUSED):
            added.append({"id": idx, "content": token, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": kind != USER_DEFINED})
        vocab.setdefault(token, idx)
    splits = [{"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False}
              for regex in PRE_TOKENIZERS[pre]]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
    spec = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [*splits, byte_level]},
        "post_processor": None, "decoder": {**byte_level, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": pre in IGNORES_MERGES, "vocab": vocab, "merges": merges},
    }
    return spec, len(tokens)


def _hf_name(name: str, arch: str) -> str:
    if arch in LEARNED_POSITIONS:
        return _gpt2_name(name)
    if name in GLOBAL_TENSORS:
        return GLOBAL_TENSORS[name]
    parts = name.split(".")
    if len(parts) == 4 and parts[0] == "blk" and parts[1].isdigit():
        layer, kind, suffix = parts[1], parts[2], parts[3]
        mapped = (STARCODER2_MLP.get(kind) if arch == "starcoder2" else None) or LAYER_TENSORS.get(kind)
        if mapped is not None:
            return f"model.layers.{layer}.{mapped}.{suffix}"
    return name


def _gpt2_name(name: str) -> str:
    """GPT-2's (and gpt_bigcode's) name of a tensor of llama.cpp's `gpt2` or `starcoder` architecture."""
    if name in GPT2_TENSORS:
        return GPT2_TENSORS[name]
    parts = name.split(".")
    if len(parts) == 4 and parts[0] == "blk" and parts[1].isdigit() and parts[2] in GPT2_LAYER:
        return f"transformer.h.{parts[1]}.{GPT2_LAYER[parts[2]]}.{parts[3]}"
    return name


def _unpermute(rows: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's converter interleaves each LLaMA head's two rotary halves, row by row, for its rotation;
    the graph rotates halves, as transformers does: put each head's rows back."""
    return rows.reshape(heads, rows.shape[0] // heads // 2, 2, *rows.shape[1:]).swapaxes(1, 2).reshape(rows.shape)
