"""`completer convert SOURCE --out BUNDLE`: a model on the user's disk as a bundle.

Reads config.json, *.safetensors and tokenizer.json from a local folder, from a model's snapshot in the local
Hugging Face cache named by its id (hf_cache.py), or from a GGUF file (gguf_source.py): a path, a file of a GGUF
repository in that cache, or a model Ollama or Tabby downloaded (ollama_store.py, tabby_store.py); never the
network, never a pickle. Builds the decoder graph with the beam step inside (completer/graph), quantizes its
weights to INT8 unless --fp32, and writes the bundle into a staging folder beside --out that takes --out's place
only when every file is written, so a failure leaves nothing half-written; what a converter killed outright left
there, the next conversion beside it removes.
"""
from __future__ import annotations

import _thread
import contextlib
import glob
import json
import os
import re
import shlex
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TextIO

from . import ollama_store, tabby_store
from .bundle import DEFAULT_BEAMS, MAX_BEAMS, sha256_file
from .converted import STOP_WITH_PARENT_ENV
from .convertible import convert_extra_install, convert_extra_missing, is_gguf_file
from .fim import FIM_TEMPLATES, TOKENIZER_TEMPLATES, general_model_name
from .hf_cache import REPOSITORY_ID, caches, find_snapshot, gguf_files, pick_gguf, quant_tag
from .interrupts import die_of_signal, interrupts_held
from .types import MIN_CONTEXT_TOKENS, EngineSettings, ModelError

FORMAT_VERSION = 5  # completer/bundle.py, SUPPORTED_FORMATS
MAX_SLOTS = 16  # searches one call of a converted graph may hold
DEFAULT_CONTEXT = 2048
SHA256_NAME = re.compile(r"^(?:sha256-)?([0-9a-f]{64})$")  # a Hugging Face blob's name, or an Ollama layer's
DEFAULT_WINDOW = 1024  # the window a converted bundle reads unless the user sets contextTokens (docs/benchmarks.md)


class ConvertError(ValueError):
    """Why a folder cannot be converted, in one line."""


def _tokenizer_json(folder: Path) -> dict:
    with interrupts_held():  # numpy's and onnx's modules: as convert's
        from .graph.huggingface import read_json

    path = folder / "tokenizer.json"
    spec = read_json(folder, "tokenizer.json", "download the model's tokenizer files too")
    model = spec.get("model") if isinstance(spec, dict) else None
    if not isinstance(model, dict) or model.get("type") != "BPE":
        kind = model.get("type") if isinstance(model, dict) else None
        raise ConvertError(f"{path}: a tokenizer of type {kind!r}; only byte-level BPE tokenizers are supported")
    if "ByteLevel" not in json.dumps([spec.get("pre_tokenizer"), spec.get("decoder")]):
        raise ConvertError(f"{path}: a BPE tokenizer that is not byte-level (SentencePiece-style); only "
                           "byte-level BPE tokenizers are supported")
    return spec


def _end_of_text(folder: Path, config: dict, vocab: dict[str, int]) -> str:
    """The token that separates documents: <|endoftext|> where the vocabulary has it, else the model's EOS."""
    if "<|endoftext|>" in vocab:
        return "<|endoftext|>"
    path = folder / "tokenizer_config.json"
    try:  # a regular file only: a FIFO would block the read forever
        eos = json.loads(path.read_text(encoding="utf-8")).get("eos_token") if path.is_file() else None
    except (OSError, ValueError, AttributeError, RecursionError):
        eos = None
    eos = eos.get("content") if isinstance(eos, dict) else eos
    if isinstance(eos, str) and eos in vocab:
        return eos
    eos_id = config.get("eos_token_id")
    eos_id = eos_id[0] if isinstance(eos_id, list) and eos_id else eos_id
    by_id = {idx: token for token, idx in vocab.items()}
    if isinstance(eos_id, int) and eos_id in by_id:
        return by_id[eos_id]
    raise ConvertError(f"{folder}: no end-of-text token (<|endoftext|>, or an eos_token in tokenizer_config.json)")


def _fim(tokenizer) -> dict | None:
    """The FIM template whose three markers the tokenizer has as added tokens, if any (deepseek-coder's are
    not marked special; the engine never generates them either way)."""
    added = {t.content for t in tokenizer.get_added_tokens_decoder().values()}
    for template, beside in TOKENIZER_TEMPLATES:
        markers = FIM_TEMPLATES[template]
        if all(m in added for m in (*markers, *beside)):
            ids = [tokenizer.token_to_id(m) for m in markers]
            return {"order": "psm", "template": template, "tokens": dict(zip(("prefix", "suffix", "middle"), markers)),
                    "ids": dict(zip(("prefix", "suffix", "middle"), ids))}
    return None


def _model_card_text(folder: Path) -> str | None:
    card = folder / "README.md"
    try:  # a regular file only: a FIFO would block the read forever
        return card.read_text(encoding="utf-8", errors="replace").removeprefix("\ufeff") if card.is_file() else None
    except OSError:
        return None


def _front_matter(text: str) -> list[str]:
    return text.split("\n---", 1)[0].splitlines()[1:] if text.startswith("---") else []


def _license(folder: Path) -> str:
    """The license named in the model card's front matter (README.md), as the source declares it."""
    text = _model_card_text(folder)
    if text is None:
        return "unknown (no README.md; see the source's model card)"
    for line in _front_matter(text):
        if line.startswith("license:"):
            return line.split(":", 1)[1].strip().strip("'\"") or "unknown"
    return "unknown (not declared in README.md; see the source's model card)"


def _model_names(source: Path, config: dict, origin: Origin | None) -> list[str]:
    """What the model is called wherever the checkpoint says: the name it is converted by (a folder, a Hugging
    Face id, an Ollama or Tabby name, a GGUF file), config.json's `_name_or_path`, a GGUF file's `general.name`,
    and its model card's title and tags. Not the card's `base_model`, which names a code model's general parent, nor
    a tag that is the architecture's name (config.json's model_type: Unsloth tags every Qwen2.5 fine-tune `qwen2`,
    Coder's too). A folder is named by its own name even when given as `.`."""
    names = [origin.name if origin else source.name, None if origin else source.resolve().name,
             config.get("_name_or_path"), (origin.record.get("gguf_name") if origin else None)]
    text = _model_card_text(source) or ""
    tags, in_tags = [], False
    for line in _front_matter(text):
        if not line.startswith((" ", "-")):
            in_tags = line.startswith("tags:")
            inline = line[len("tags:"):].strip() if in_tags else ""
            tags += inline.strip("[]").split(",") if inline.startswith("[") else [inline]  # tags: [a, b]
        elif in_tags and line.strip().startswith("- "):
            tags.append(line.strip()[2:])
    architecture = str(config.get("model_type", "")).lower()
    names += [tag for tag in (tag.strip().strip("'\"") for tag in tags) if tag.lower() != architecture]
    body = text.split("\n---", 1)[1] if text.startswith("---") and "\n---" in text else text
    names.append(next((line[2:] for line in body.splitlines() if line.startswith("# ")), None))
    return list(dict.fromkeys(name.strip() for name in names if isinstance(name, str) and name.strip()))


def _fim_choice(tokenizer, asked: bool | None, names: list[str]) -> tuple[dict | None, str | None]:
    """The FIM template the bundle records, and why a template the tokenizer has is left out when no flag asked
    (`asked` None): the model's names say it is its family's general model, not trained to fill in."""
    found = _fim(tokenizer) if asked is not False else None
    if asked and found is None:
        raise ConvertError("--fim: the tokenizer has no fill-in-the-middle markers of a template the engine knows "
                           f"({', '.join(FIM_TEMPLATES)})")
    if found is None or asked:
        return found, None
    general = general_model_name(found["template"], names)
    if general is None:
        return found, None
    return None, (f"{general} is a general model, not one trained to fill in the middle, though its tokenizer has "
                  f"the markers: it completes from the text before the cursor (--fim turns fill-in-the-middle on)")


class _ReadOnce(dict):
    """The checkpoint's weights, each let go once the graph builder has taken it (graph/decoder.py takes each
    once), with whatever reading it left behind (graph/lazy.py)."""

    def __getitem__(self, key: str) -> object:
        return self.pop(key)

    def get(self, key: str, default: object = None) -> object:
        return self.pop(key, default)


class _Progress:
    """What the conversion is doing, on stderr, only when it is a terminal or asked for (--progress): each step
    on a line of its own, and a bar over the layers while the graph is built."""

    def __init__(self, total: int, shown: bool) -> None:
        self.total, self.shown = total, shown

    def __call__(self, done: int) -> None:
        if self.shown:
            filled = round(30 * done / self.total)
            end = "\n" if done == self.total else ""
            print(f"\rlayers [{'#' * filled}{'.' * (30 - filled)}] {done}/{self.total}", end=end, file=sys.stderr,
                  flush=True)

    def step(self, text: str) -> None:
        if self.shown:
            print(text, file=sys.stderr, flush=True)


def _check_out(source: Path, out: Path, force: bool) -> None:
    """--out must be a new folder, an empty one, or (with --force) a bundle: never the checkpoint, a folder
    that holds it, or the working directory, which replacing it would delete."""
    target = Path(os.path.realpath(out))  # not Path.resolve, which raises RuntimeError on a symlink loop
    for precious, what in ((Path(os.path.realpath(source)), "the checkpoint folder"),
                           (Path(os.path.realpath(Path.cwd())), "the working directory")):
        if target == precious or target in precious.parents:
            raise ConvertError(f"--out {out} is or holds {what}; choose a new folder for the bundle")
    _check_reachable(out)
    if not out.exists() or (out.is_dir() and not any(out.iterdir())):
        return
    if not out.is_dir():  # a file, even an empty one, or a device: never replaced, --force or not
        raise ConvertError(f"--out {out} exists and is not a folder; choose a new folder for the bundle")
    if not force:
        raise ConvertError(f"{out} exists and is not empty; choose another --out, or --force to replace it")
    if not (out.is_dir() and (out / "manifest.json").is_file()):
        raise ConvertError(f"{out} is not a bundle (no manifest.json); --force replaces only a bundle")


def _check_reachable(out: Path) -> None:
    """Refuse an --out no bundle can be moved to, before the conversion rather than after it: a symbolic link (the
    bundle would take the place of the link, not of the folder it names), or a path through something that is not
    a folder."""
    if os.path.islink(out) and out.exists():
        raise ConvertError(f"--out {out} is a symbolic link; give the folder it names, {os.path.realpath(out)}")
    if os.path.islink(out):
        raise ConvertError(f"--out {out} is a symbolic link to nothing (or a loop of links); choose a new folder "
                           "for the bundle")
    for above in out.parents:  # the nearest that is there must be a folder, one this user can write in
        if os.path.lexists(above):
            if not above.is_dir():
                raise ConvertError(f"--out {out}: {above} is not a folder")
            _check_writable(out, above)
            return


def _check_writable(out: Path, folder: Path) -> None:
    """Make and remove a folder in `folder`, as the bundle's staging folder will be made: refused by --out's name
    now, not later with the errno of a hidden folder the user never named. Permissions alone do not tell (root
    writes anywhere but in /proc, or on a read-only mount)."""
    try:
        with _scratch_folder(f".{out.name}.converting-", folder):
            pass
    except OSError as exc:
        raise ConvertError(f"--out {out}: cannot write in {folder} ({exc.strerror or exc})") from exc


def _as_mkdir_makes(folder: Path) -> None:
    """Give `folder`, made private by mkdtemp, the mode os.mkdir gives under this process's umask: a bundle is
    read by whoever the user lets read their folders (a shared /opt/models), not by its maker alone."""
    probe = folder / ".mode"
    probe.mkdir()
    try:
        folder.chmod(probe.stat().st_mode & 0o777)
    finally:
        probe.rmdir()


def _position_limit(config: dict) -> int:
    value = config.get("n_positions") or config.get("max_position_embeddings") or DEFAULT_CONTEXT
    if not isinstance(value, int) or isinstance(value, bool) or value < 2:
        raise ConvertError(f"config.json: the model's positions must be a whole number, not {value!r}")
    return value


def convert(source: Path, out: Path, int8: bool = True, context: int | None = None, name: str | None = None,
            force: bool = False, progress: bool | None = None, fim: bool | None = None, slots: int = 1,
            window: int | None = None, beams: int = DEFAULT_BEAMS, origin: Origin | None = None,
            languages: tuple[str, ...] | None = None) -> dict:
    """Convert the checkpoint folder `source` into the bundle `out`; returns the manifest. `fim=False` leaves
    out the FIM template for a model whose tokenizer has the markers but that was not trained to fill in, and
    `fim=True` keeps it even where the model's names say it is a general model (None: the names decide, `_fim_choice`).
    `origin` names a folder that stands for something else (a Hugging Face cache snapshot, an unpacked GGUF file:
    `checkpoint_folder`).
    `slots` > 1 builds the one graph with that many search slots, so that many searches share each call
    (completer/scheduler.py), at the cost of the empty slots' operators when a search runs alone; a large
    model's weights are not held twice, as a second, batched graph would hold them. `window` and `beams` are
    the bundle's defaults, the engine's settings unless the user sets contextTokens and beams: the graph holds
    `context` positions, and a user may read that many later without converting again. `languages`, the LSP
    language ids the model writes, are those that get suggestions unless the user sets enabledLanguages
    (None: every language, as released code models are trained on many)."""
    with interrupts_held():  # extension modules, whose initialisation a Ctrl-C would turn into an ImportError
        import onnxruntime  # noqa: F401  (imported here, held, for the fusion and quantization that need it)
        from tokenizers import Tokenizer

        from .graph import decoder_model, fuse_saved, save
        from .graph.huggingface import architecture, canonical_weights, load_weights, read_config
        from .tokens import Tokens

    source, out = Path(source), Path(out)
    if not source.is_dir():
        raise ConvertError(f"{source}: not a folder or a GGUF file (give the folder the model was downloaded to)")
    _check_out(origin.location if origin is not None and origin.location else source, out, force)
    config = read_config(source)
    limit = _position_limit(config)
    context = min(limit, DEFAULT_CONTEXT) if context is None else context
    if not 2 <= context <= limit:
        raise ConvertError(f"--context {context} is outside what the model was trained for (2 to {limit:,})")
    window = min(context, DEFAULT_WINDOW) if window is None else window
    smallest = min(context, EngineSettings.max_tokens + MIN_CONTEXT_TOKENS)  # the engine reads no less than this
    if not smallest <= window <= context:
        raise ConvertError(f"--default-context {window} must be between {smallest} and the bundle's context, "
                           f"{context:,}")
    if not 1 <= beams <= MAX_BEAMS:
        raise ConvertError(f"--default-beams {beams} must be between 1 and {MAX_BEAMS}")
    if not 1 <= slots <= MAX_SLOTS:
        raise ConvertError(f"--batch-slots {slots} must be between 1 and {MAX_SLOTS}")
    arch = architecture(config, context)
    _tokenizer_json(source)
    try:
        tokenizer = Tokenizer.from_file(str(source / "tokenizer.json"))
    except Exception as exc:  # the tokenizers library raises a bare Exception for a file it cannot parse
        raise ConvertError(f"{source / 'tokenizer.json'}: the tokenizers library cannot read it ({exc})") from exc
    own_vocab = tokenizer.get_vocab_size()
    if own_vocab > arch.vocab_size:
        raise ConvertError(f"tokenizer.json has {own_vocab:,} tokens, more than the model's {arch.vocab_size:,}")
    end_of_text = _end_of_text(source, config, tokenizer.get_vocab())
    fim_template, fim_declined = _fim_choice(tokenizer, fim, _model_names(source, config, origin))
    if fim_declined:
        print(f"no fill-in-the-middle: {fim_declined}", file=sys.stderr)
    read = origin.read_weights if origin is not None and origin.read_weights else partial(load_weights, source)
    report = _Progress(arch.n_layer, sys.stderr.isatty() if progress is None else progress)
    report.step(f"reading the weights ({arch.n_layer} layers)")
    weights = _ReadOnce(canonical_weights(read(), arch, config))
    try:  # after the weights' shapes are checked: it holds a row per id of the config's vocabulary
        tokens = Tokens(source / "tokenizer.json", vocab_size=arch.vocab_size, end_of_text=end_of_text)
    except ModelError as exc:
        raise ConvertError(str(exc)) from exc
    out.parent.mkdir(parents=True, exist_ok=True)
    with _scratch_folder(f".{out.name}.converting-", out.parent) as staging:  # becomes `out` when whole
        report.step("building the graph, its weights in INT8" if int8 else "building the graph")
        model = decoder_model(arch, weights, context, slots=slots, on_layer=report, quantized=int8,
                              weights_file=staging / "model.onnx.data")  # the weights are written as made
        del weights
        save(model, staging / "model.onnx")
        report.step("optimizing the graph")
        fusions = fuse_saved(model, staging / "model.onnx", arch)
        del model
        shutil.copyfile(source / "tokenizer.json", staging / "tokenizer.json")
        defaults = {"beams": beams, "context_tokens": window, **({"languages": list(languages)} if languages else {})}
        fim_record = {"template": fim_template, "asked": fim, "declined": fim_declined}
        manifest = _manifest(source, staging, out, arch, context, name or out.name, config, tokens, own_vocab, end_of_text,
                             fim_record, int8, fusions, slots, defaults, origin)
        (staging / "MODEL.md").write_text(_model_card(manifest), encoding="utf-8")
        _as_mkdir_makes(staging)
        if out.exists():
            shutil.rmtree(out) if out.is_dir() else out.unlink()
        os.replace(staging, out)
    return manifest


@contextlib.contextmanager
def _scratch_folder(prefix: str, beside: Path | None) -> Iterator[Path]:
    """A new folder, removed afterwards however the conversion ends, unless it was moved (the bundle made). Made
    and removed with interrupts held off: one landing half-way would leave the folder, or what the removal had
    not reached yet, where nothing removes it (a converter whose parent was killed stops by an interrupt)."""
    folder, held = None, None
    try:
        with interrupts_held():
            _clear_abandoned(prefix, beside)
            folder, held = _made_and_held(prefix, beside)
        yield folder
    finally:
        if folder is not None:
            with interrupts_held():
                shutil.rmtree(folder, ignore_errors=True)
        if held is not None:
            os.close(held)


def _made_and_held(prefix: str, beside: Path | None) -> tuple[Path, int | None]:
    """A new folder, and an open descriptor of it that holds its flock while the conversion lives (None without
    flock, on Windows): what a converter killed outright (SIGKILL, out of memory) leaves is then known by its lock
    having gone, and cleared by the next conversion beside it (`_clear_abandoned`)."""
    while True:
        folder = Path(tempfile.mkdtemp(prefix=prefix, dir=beside))
        try:
            import fcntl
        except ImportError:
            return folder, None
        held = os.open(folder, os.O_RDONLY)
        fcntl.flock(held, fcntl.LOCK_EX)  # waits for a conversion that found it unlocked a moment ago and clears it
        with contextlib.suppress(OSError):
            if os.path.samestat(os.fstat(held), os.stat(folder)):
                return folder, held
        os.close(held)  # cleared as abandoned before the lock was taken: make another


def _clear_abandoned(prefix: str, beside: Path | None) -> None:
    """Remove the folders named `prefix`* beside which no live conversion holds its lock: a converter killed
    outright left them, half-written (a partial model.onnx.data as large as the model); never taken for a bundle,
    but nothing else would ever remove them."""
    try:
        import fcntl

        found = list(Path(beside or tempfile.gettempdir()).glob(glob.escape(prefix) + "*"))
    except (ImportError, OSError):
        return
    for folder in found:
        if folder.is_symlink() or not folder.is_dir():
            continue
        try:
            held = os.open(folder, os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
            shutil.rmtree(folder, ignore_errors=True)
        except OSError:  # a live conversion's (BlockingIOError), or one this user cannot lock
            pass
        finally:
            os.close(held)


def _manifest(source: Path, staging: Path, out: Path, arch, context: int, name: str, config: dict, tokens, own_vocab: int,
              end_of_text: str, fim: dict, int8: bool, fusions: dict, slots: int, defaults: dict,
              origin: Origin | None) -> dict:
    """The bundle's manifest; a folder that stands for something else is named by its `origin`. `fim`: the
    template found (or None), the flag that asked (None: none did) and why a template found was left out."""
    from .graph import kv_layout

    files = {f.name: {"sha256": sha256_file(f), "bytes": f.stat().st_size}
             for f in sorted(staging.iterdir()) if f.name.startswith(("model.onnx", "tokenizer.json"))}
    named = origin.command if origin else [str(source)]
    words = [shlex.quote(word) for word in (*named, "--out", str(out))]  # a path with spaces stays one word
    command = " ".join(["completer convert", *words] + ([] if int8 else ["--fp32"]) +
                       [f"--context {context}", f"--default-context {defaults['context_tokens']}",
                        f"--default-beams {defaults['beams']}"] + ([f"--batch-slots {slots}"] if slots > 1 else []) +
                       ([f"--languages {shlex.quote(','.join(defaults['languages']))}"] if "languages" in defaults
                        else []) + ({True: ["--fim"], False: ["--no-fim"]}.get(fim["asked"], [])))
    manifest = {
        "format_version": FORMAT_VERSION,
        "name": name,
        "architecture": arch.manifest(),
        "context_length": context,
        "defaults": defaults,
        "vocab_size": arch.vocab_size,
        "tokenizer_vocab_size": own_vocab,
        "newline_token_id": tokens.newline_id,
        "end_of_text_token": end_of_text,
        "source": {"folder": origin.name if origin else source.name, "model_type": config.get("model_type"),
                   "architectures": config.get("architectures"), "license": _license(source),
                   "config_sha256": sha256_file(source / "config.json"),
                   "tokenizer_sha256": sha256_file(source / "tokenizer.json")},
        "conversion": {"command": command},
        "quantization": ("dynamic INT8 in onnxruntime's form: weight MatMuls INT8 per output column, embedding "
                         "tables uint8, activations quantized per call" if int8 else "none (fp32)"),
        "graph_fusions": fusions,
        "search_slots": slots,
        "kv_layout": kv_layout(slots),
        "files": files,
    }
    if origin:
        manifest["source"].update(origin.record)
    if fim["template"] is not None:
        manifest["fim"] = fim["template"]
    elif fim["declined"]:
        manifest["fim_declined"] = fim["declined"]
    (staging / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return manifest


def _described(source: dict) -> str:
    """Where the bundle's weights came from, in words for its model card."""
    kind = ", ".join([source["model_type"], *(source.get("architectures") or [])])
    if source.get("gguf"):
        types = f"tensor types {', '.join(source.get('gguf_types', []))}, dequantized to fp32 before this conversion"
        if source.get("gguf_pre_tokenizer") == "default":
            types += "; it names no pre-tokenizer, so text is split as llama.cpp splits it then"
        if source.get("ollama"):
            return (f"Ollama's model `{source['ollama']}`, its GGUF file sha256 `{source['ollama_digest']}` "
                    f"({kind}; {types})")
        if source.get("tabby"):
            return f"Tabby's model `{source['tabby']}`, its GGUF file `{source['gguf']}` ({kind}; {types})"
        if source.get("huggingface_cache"):
            return (f"the GGUF file `{source['folder']}` at commit `{source['revision']}` in the local Hugging Face "
                    f"cache ({kind}; {types})")
        return f"the GGUF file `{source['gguf']}` ({kind}; {types})"
    if source.get("huggingface_cache"):
        return f"`{source['folder']}` at commit `{source['revision']}` in the local Hugging Face cache ({kind})"
    return f"the local Hugging Face checkpoint `{source['folder']}` ({kind})"


def _model_card(manifest: dict) -> str:
    arch, source = manifest["architecture"], manifest["source"]
    fim = manifest.get("fim")
    return "\n".join([
        f"# {manifest['name']}",
        "",
        f"Converted by `completer convert` from {_described(source)}.",
        "",
        f"- License declared by the source: **{source['license']}**. The converted weights carry the same license.",
        f"- Shape: {arch['n_layer']} layers, {arch['n_head']} query heads, {arch['n_kv_head']} key/value heads, "
        f"width {arch['hidden']}, vocabulary {arch['vocab_size']:,}; context {manifest['context_length']:,} tokens.",
        f"- Defaults (the settings `contextTokens`, `beams` and `enabledLanguages` override them): a window of "
        f"{manifest['defaults']['context_tokens']:,} tokens, {manifest['defaults']['beams']} beams, suggestions "
        f"in {', '.join(manifest['defaults'].get('languages', ['every language']))}.",
        f"- Weights: {manifest['quantization']}.",
        f"- Fill-in-the-middle: {fim['template'] + ' template, prompted prefix-suffix-middle' if fim else 'none'}"
        + (f" ({manifest['fim_declined']})." if "fim_declined" in manifest else "."),
        f"- Command: `{manifest['conversion']['command']}`",
        (f"- Configuration and tokenizer: read from the GGUF file's metadata, as the config.json (sha256 "
         f"`{source['config_sha256']}`) and tokenizer.json (sha256 `{source['tokenizer_sha256']}`) they make."
         if source.get("gguf") else
         f"- Source files: config.json sha256 `{source['config_sha256']}`, tokenizer.json sha256 "
         f"`{source['tokenizer_sha256']}`."),
        "",
        "Quality and speed are the source model's and this machine's: measure them with scripts/eval.py and "
        "scripts/bench_lsp.py against this folder.",
        "",
    ])


@dataclass(frozen=True)
class Origin:
    """What a checkpoint folder stands for when it is not simply the folder named: the manifest's name for it,
    the words of the command that converts it again, and what else the manifest's `source` records."""

    name: str
    command: list[str]
    record: dict
    read_weights: Callable[[], dict] | None = None  # where the folder has no weights: what reads them (a GGUF file)
    location: Path | None = None  # the file the folder stands for, which --out must never hold (a GGUF file)


@contextlib.contextmanager
def checkpoint_folder(source: str, revision: str = "main", beside: Path | None = None
                      ) -> Iterator[tuple[Path, Origin | None]]:
    """The checkpoint folder `source` names, and its origin when it is not that folder itself: a folder is itself;
    a GGUF file's config and tokenizer are written into a temporary folder (`beside` the bundle), removed
    afterwards, and the origin reads its tensors when the converter asks. What is no file or folder here may name
    a model another tool keeps: `ollama:NAME` Ollama's (ollama_store.py), `tabby:ID` Tabby's (tabby_store.py), and
    ORG/NAME[:QUANT] a snapshot in the local Hugging Face cache at `revision` (hf_cache.py), a checkpoint folder or a
    GGUF file picked by QUANT."""
    path = Path(source).expanduser()
    repository, _, tag = source.partition(":")
    here = path.is_dir() or path.is_file()
    cached = not here and REPOSITORY_ID.match(repository) is not None
    if not cached and revision != "main":
        raise ConvertError(f"--revision names a version in the Hugging Face cache; {source} is not read from there")
    if here and is_gguf_file(path):
        _check_blob(path)
        with _gguf_folder(path, Origin(path.name, [str(path)], {}), beside) as found:
            yield found
        return
    if not here and source.startswith((ollama_store.PREFIX, tabby_store.PREFIX)):
        with _gguf_folder(*_tool_model(source), beside) as found:
            yield found
        return
    if not cached:
        yield path, None
        return
    snapshot = find_snapshot(repository, revision)
    if snapshot is None:
        where = " or ".join(map(str, caches()))
        raise ConvertError(f"{source}: no such folder, and no local Hugging Face cache ({where}) holds a snapshot of "
                           f"{repository} at {revision!r}; download it first (hf download {repository})")
    files = gguf_files(snapshot)
    # a GGUF repository may carry a config.json too (TheBloke's do): a checkpoint folder is one with safetensors
    checkpoint = (snapshot / "config.json").exists() and (any(snapshot.glob("*.safetensors")) or not files)
    if checkpoint and not tag:
        print(f"reading {source} from the local Hugging Face cache: {snapshot}", file=sys.stderr)
        yield snapshot, Origin(source, [source, "--revision", snapshot.name],
                               {"huggingface_cache": True, "revision": snapshot.name})
        return
    if checkpoint:
        raise ConvertError(f"{source}: {repository} is a checkpoint folder, not GGUF files a tag ({tag}) picks from")
    file = pick_gguf(files, tag, repository)
    print(f"reading {file.relative_to(snapshot)} of {repository} from the local Hugging Face cache: {file}",
          file=sys.stderr)
    _check_blob(file)
    own = quant_tag(file)
    again = own if own and pick_gguf(files, own, repository) == file else tag  # the tag that picks it again
    named = f"{repository}:{again}" if again else repository
    origin = Origin(f"{repository}/{file.relative_to(snapshot)}", [named, "--revision", snapshot.name],
                    {"huggingface_cache": True, "revision": snapshot.name})
    with _gguf_folder(file, origin, beside) as found:
        yield found


def _tool_model(source: str) -> tuple[Path, Origin]:
    """The GGUF file of the model `ollama:NAME` or `tabby:ID` names, checked against its recorded sha256, and its
    origin."""
    if source.startswith(ollama_store.PREFIX):
        model = ollama_store.find(source[len(ollama_store.PREFIX):])
        print(f"reading Ollama's {model.name}: checking {model.blob} against its digest", file=sys.stderr)
        record = {"ollama": model.name, "ollama_digest": model.digest}
        return ollama_store.gguf_path(model), Origin(model.source, [model.source], record)
    found = tabby_store.find(source[len(tabby_store.PREFIX):])
    checked = ("checking it against the sha256 its tabby.json names" if found.sha256
               else "its tabby.json names no sha256")
    print(f"reading Tabby's {found.model_id} from {found.gguf}: {checked}", file=sys.stderr)
    record = {"tabby": found.model_id, **({"tabby_sha256": found.sha256} if found.sha256 else {})}
    return tabby_store.gguf_path(found), Origin(found.source, [found.source], record)


@contextlib.contextmanager
def _gguf_folder(path: Path, origin: Origin, beside: Path | None) -> Iterator[tuple[Path, Origin]]:
    """The GGUF file at `path` unpacked into a temporary folder, and `origin` completed with what reads it."""
    with interrupts_held():  # numpy's and gguf's modules: as convert's
        from .gguf_source import read_tensors, unpack

    with _scratch_folder(".gguf-", beside) as folder:
        record = {**unpack(path, folder), **origin.record}
        if record["gguf_pre_tokenizer"] == "default":
            print(f"warning: {path.name} names no pre-tokenizer (a file converted before llama.cpp recorded one); "
                  "its text is split as llama.cpp then splits it, which llama.cpp warns degrades the model's "
                  "suggestions: a newer conversion of the model is better", file=sys.stderr)
        yield folder, Origin(origin.name, origin.command, record, partial(read_tensors, path), path)


def _check_blob(file: Path) -> None:
    """A file named by its content's sha256, as the Hugging Face cache names its blobs and Ollama its layers
    (`sha256-HEX`), however it is reached (a snapshot's symlink, a path given), is checked against it, so a
    download cut short is refused before hours of use; ConvertError otherwise."""
    blob = Path(os.path.realpath(file))  # not Path.resolve, which raises RuntimeError on a symlink loop
    named = SHA256_NAME.match(blob.name)
    if named is None:
        return
    try:
        actual = sha256_file(blob)
    except OSError as exc:
        raise ConvertError(f"{file}: cannot be read ({exc.strerror or exc}); download it again") from exc
    if actual != named.group(1):
        raise ConvertError(f"{file}: does not match the sha256 it is named by ({named.group(1)}); download it again")


def _languages(listed: str | None) -> tuple[str, ...] | None:
    """--languages python,javascript as LSP language ids; ConvertError for a list with nothing in it."""
    if listed is None:
        return None
    names = tuple(dict.fromkeys(name.strip().lower() for name in listed.split(",") if name.strip()))  # LSP's ids
    if not names or not all(re.fullmatch(r"[A-Za-z0-9_.+-]+|\*", name) for name in names):
        raise ConvertError(f"--languages {listed!r}: give LSP language ids separated by commas (python,javascript)")
    return names


class _ParentsStderr:
    """stderr of a converter that stops with its parent, which reads it: a line written once the parent is gone
    is dropped, not raised, since its death also closes stdin, and the interrupt that follows stops the conversion
    (`_stop_when_stdin_closes`). Raised, the broken pipe would be a second way out, racing that interrupt, which
    then landed in the removal of what was begun and left it behind."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _stop_when_stdin_closes() -> None:
    """Wait for stdin to close, then stop the conversion as Ctrl-C would: the process that started it and holds
    the other end (a server, lsp/model_sources.py, or the CLI, completer/converted.py) is gone, killed or not,
    and nobody waits for the bundle."""
    with contextlib.suppress(OSError):
        while os.read(0, 4096):  # the fd, not sys.stdin's buffer, whose lock a daemon thread must not hold at exit
            pass
    _thread.interrupt_main()


def main(args) -> int:
    if os.environ.get(STOP_WITH_PARENT_ENV):
        # a parent run in the background may have left SIGINT ignored, which interrupt_main would then be too
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sys.stderr = _ParentsStderr(sys.stderr)  # type: ignore[assignment]
        threading.Thread(target=_stop_when_stdin_closes, name="stop-with-parent", daemon=True).start()
    with _terminations_stop_it() as stopped_by:
        return _convert_main(args, stopped_by)


@contextlib.contextmanager
def _terminations_stop_it() -> Iterator[list[int]]:
    """SIGTERM and SIGHUP (`timeout`, a service stopping, the terminal closed) stop the conversion as Ctrl-C does,
    so that what it had begun is removed: killed by them outright, it left a staging folder as large as the model
    beside --out, which only another conversion into that --out would clear. Yields the list the signal that came
    is put in, and Ctrl-C's, which an extension module's initialisation may have turned into an ImportError; a
    signal ignored (nohup) stays ignored."""
    came: list[int] = []
    if os.name != "posix" or threading.current_thread() is not threading.main_thread():
        yield came
        return

    def interrupted(signum: int, frame) -> None:
        came.append(signum)
        signal.default_int_handler(signum, frame)

    def stop(signum: int, frame) -> None:
        came.append(signum)
        if callable(signal.getsignal(signal.SIGINT)):  # held off, as Ctrl-C is, while a folder is made or removed
            signal.raise_signal(signal.SIGINT)
        else:  # SIGINT ignored (a background job of a script): stop all the same
            signal.default_int_handler(signum, frame)

    replaced = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    for signum, handler in replaced.items():
        if handler is signal.SIG_DFL:
            signal.signal(signum, stop)
        elif signum == signal.SIGINT and handler is signal.default_int_handler:
            signal.signal(signum, interrupted)
    try:
        yield came
    finally:
        for signum, handler in replaced.items():
            signal.signal(signum, handler)


def _stopped(stopped_by: list[int]) -> int:
    """Say that the conversion stopped, then die of the signal that stopped it, as a shell's loop expects of Ctrl-C,
    not a traceback."""
    print("completer convert: stopped; nothing was written", file=sys.stderr)
    return die_of_signal(stopped_by[0] if stopped_by else signal.SIGINT)


def _convert_main(args, stopped_by: list[int]) -> int:
    try:
        out = Path(args.out)
        _check_reachable(out)  # before a GGUF file's folder is made beside it
        parent = Path(os.path.realpath(out)).parent
        beside = parent if parent.is_dir() else None
        with checkpoint_folder(args.source, getattr(args, "revision", "main"), beside) as (source, origin):
            manifest = convert(source, out, origin=origin, int8=not args.fp32, context=args.context,
                               progress=True if args.progress else None,
                               name=args.name, force=args.force,
                               fim=False if args.no_fim else (True if args.fim else None), slots=args.batch_slots,
                               window=args.default_context,
                               beams=DEFAULT_BEAMS if args.default_beams is None else args.default_beams,
                               languages=_languages(args.languages))
    except ImportError as exc:  # a module of the extra, or one that onnxruntime's optimizer imports when it runs
        if stopped_by:  # a Ctrl-C in an extension module's initialisation, which made it an ImportError
            return _stopped(stopped_by)
        missing = convert_extra_missing()
        if missing is not None:
            print(f"completer convert: needs the convert extra ({missing} is missing): {convert_extra_install()}",
                  file=sys.stderr)
        else:  # there, but it would not load: a version the converter cannot use, say
            print(f"completer convert: {exc} (a module the converter needs would not load; upgrading the convert "
                  f"extra may help: {convert_extra_install()} --upgrade)", file=sys.stderr)
        return 2
    except (ValueError, ModelError, OSError) as exc:
        print(f"completer convert: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # what it had begun is removed on the way out (convert, checkpoint_folder)
        return _stopped(stopped_by)
    size = sum(meta["bytes"] for meta in manifest["files"].values())
    print(f"wrote {args.out}: {manifest['architecture']['n_layer']} layers, {size / 2**20:,.1f} MiB"
          f"{', fill-in-the-middle (' + manifest['fim']['template'] + ')' if 'fim' in manifest else ''}; "
          f"use it with --model {shlex.quote(args.out)} or the modelPath setting")
    return 0
