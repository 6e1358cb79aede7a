"""Find, verify and describe a model bundle: model.onnx, tokenizer.json and manifest.json.

Every file is checked against the manifest's sha256 before it is used, so a truncated download,
a disk error or a tampered file is refused with a message naming the file.
"""
from __future__ import annotations

import hashlib
import json
import os
import shlex
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from . import hf_cache
from .convertible import is_gguf_file
from .onnx_files import NotAGraph, external_files
from .types import ModelError

SUPPORTED_FORMATS = (1, 2, 3, 4, 5)
"""2: converted models (architecture family, end-of-text token, FIM order); 3: search slots; 4: a graph of one
slot without `slot_rows` (one softmax across prefix and suffix), which engines reading up to 3 cannot feed; 5: that
graph's KV inputs and outputs with an axis of 1 after the KV heads, [B, KV, 1, T, D], which engines reading up
to 4 would feed without it."""
DEFAULT_MODEL_NAME = "python-small"
REQUIRED_FILES = ("model.onnx", "tokenizer.json")  # and any other file the manifest lists (model.onnx.data)
DEFAULT_BEAMS = 4  # the beam width of a bundle whose manifest names none
MAX_BEAMS = 16


def _data_dirs() -> list[Path]:
    """Where pip puts a distribution's data files: this interpreter's prefix (a venv, pipx, a system install)
    or the user base of a `--user` install, under every install scheme this Python knows."""
    dirs = [Path(sys.prefix)]
    for scheme in sysconfig.get_scheme_names():
        try:
            dirs.append(Path(sysconfig.get_path("data", scheme)))
        except (KeyError, ValueError):  # a scheme for another platform, or a variable this one lacks
            continue
    return list(dict.fromkeys(dirs))


def default_bundle_dir() -> Path:
    """COMPLETER_MODEL, else the repo's models/ (editable install), else the installed data dir."""
    env = os.environ.get("COMPLETER_MODEL")
    if env:
        return Path(env)
    candidates = [Path(__file__).resolve().parent.parent / "models" / DEFAULT_MODEL_NAME]
    candidates += [data / "share" / "completer" / "models" / DEFAULT_MODEL_NAME for data in _data_dirs()]
    for candidate in candidates:
        if (candidate / "manifest.json").exists():
            return candidate
    return candidates[0]


def bundle_dir(path: str | Path | None) -> Path:
    """The bundle a modelPath names: a folder, or the bare name of a bundle that ships beside the default one
    ("python-base"); None is the default bundle."""
    if not path:
        return default_bundle_dir()
    directory = Path(path)
    if not _is_dir(directory) and len(directory.parts) == 1 and directory.name not in (".", ".."):
        beside = default_bundle_dir().parent / directory.name
        if _is_dir(beside):
            return beside
    return directory


def _is_dir(path: Path) -> bool:
    """Path.is_dir, with a name the system refuses (too long, say) a folder that is not there."""
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass(frozen=True)
class Bundle:
    path: Path
    manifest: dict

    @property
    def name(self) -> str:
        return str(self.manifest.get("name", self.path.name))

    @property
    def model_path(self) -> Path:
        return self.path / "model.onnx"

    @property
    def tokenizer_path(self) -> Path:
        return self.path / "tokenizer.json"

    @property
    def context_length(self) -> int:
        return int(self.manifest["context_length"])

    @property
    def architecture(self) -> dict:
        return dict(self.manifest["architecture"])

    @property
    def end_of_text_token(self) -> str:
        """The token that starts a document (our own bundles: <|endoftext|>)."""
        token = self.manifest.get("end_of_text_token")
        return token if isinstance(token, str) and token else "<|endoftext|>"

    @property
    def learned_positions(self) -> bool:
        """Whether the model has a table of learned positions (GPT-2's family, our own models among them), rather
        than rotary ones."""
        return self.architecture.get("family", "gpt2") == "gpt2"

    @property
    def fim_order(self) -> str | None:
        """"spm" (our own FIM bundles) or "psm" (released FIM models), or None."""
        fim = self.manifest.get("fim")
        order = fim.get("order") if isinstance(fim, dict) else None
        return order if order in ("spm", "psm") else None

    @property
    def fim_template(self) -> str | None:
        """The released family whose FIM markers the bundle's tokenizer has ("qwen", ...: completer/fim.py), as
        `completer convert` found it; None for our own bundles and left-to-right ones."""
        fim = self.manifest.get("fim")
        template = fim.get("template") if isinstance(fim, dict) and self.fim_order else None
        return template if isinstance(template, str) else None

    @property
    def fim_ids(self) -> tuple[int, int, int] | None:
        """(prefix, suffix, middle) token ids of a fill-in-the-middle bundle in an order the engine builds
        (fim_order); None for a left-to-right bundle."""
        fim = self.manifest.get("fim")
        ids = fim.get("ids") if isinstance(fim, dict) and self.fim_order else None
        if not isinstance(ids, dict) or not all(isinstance(ids.get(k), int) for k in ("prefix", "suffix", "middle")):
            return None
        return ids["prefix"], ids["suffix"], ids["middle"]

    @property
    def languages(self) -> tuple[str, ...]:
        """The LSP language ids the model writes, which get suggestions unless the user names others
        (enabledLanguages): the manifest's "defaults"."languages" where it lists them (`completer convert
        --languages`); else every language ("*") for a model `completer convert` made (released code models are
        trained on many), and Python for our own."""
        listed = self._defaults.get("languages")
        if isinstance(listed, list) and listed and all(isinstance(name, str) and name for name in listed):
            return tuple(listed)
        return ("*",) if isinstance(self.manifest.get("conversion"), dict) else ("python",)

    @property
    def default_beams(self) -> int:
        """The beam width the engine searches with unless the user sets one (the manifest's "defaults")."""
        return int(self._defaults.get("beams", DEFAULT_BEAMS))

    @property
    def default_context_tokens(self) -> int:
        """The window the engine reads unless the user sets one: a large model's whole context costs seconds
        of prefill and a slower step on a small CPU, so its bundle may name less (the manifest's "defaults")."""
        return int(self._defaults.get("context_tokens", self.context_length))

    @property
    def _defaults(self) -> dict:
        defaults = self.manifest.get("defaults")
        return defaults if isinstance(defaults, dict) else {}

    @property
    def batched_model(self) -> tuple[Path, int] | None:
        """The graph the scheduler runs when several searches share a call, and how many it holds (format 3,
        where the export wrote one); None: each search's calls run alone."""
        batched = self.manifest.get("batched_model")
        if not isinstance(batched, dict) or batched.get("file") not in self.manifest.get("files", {}):
            return None
        slots = batched.get("slots")
        if not isinstance(slots, int) or isinstance(slots, bool) or slots < 2:
            return None
        return self.path / batched["file"], slots

    @property
    def runtime_bytes(self) -> int:
        """The bundle's files' size on disk; where one is gone (the folder moved, deleted or converted again while
        its model runs from memory), the size its manifest gives, which loading checked, rather than an OSError."""
        listed = set(self.manifest.get("files", {})) | set(REQUIRED_FILES)
        return sum(self._size(name) for name in (*sorted(listed), "manifest.json"))

    def _size(self, name: str) -> int:
        try:
            return (self.path / name).stat().st_size
        except OSError:
            said = self.manifest.get("files", {}).get(name, {}).get("bytes")
            return said if isinstance(said, int) else 0


def _manifest_problem(manifest: object) -> str | None:
    """What makes a parsed manifest unusable, in words, or None: the fields the engine reads, with their types."""
    if not isinstance(manifest, dict):
        return "it is not a JSON object"
    files = manifest.get("files")
    if not isinstance(files, dict) or not all(isinstance(meta, dict) for meta in files.values()):
        return '"files" must map each file name to its {"sha256", "bytes"}'
    strays = [name for name in files if name in ("", ".", "..") or Path(name).name != name]
    if strays:  # a path elsewhere would have this machine's other files read, hashed and loaded as the model's
        return f'"files" must name files in the bundle\'s folder, not {json.dumps(strays[0])}'
    for key in ("format_version", "context_length", "newline_token_id"):
        value = manifest.get(key)
        if not isinstance(value, int) or isinstance(value, bool):
            return f'"{key}" must be an integer, not {json.dumps(value)}'
    if manifest["context_length"] < 2:
        return f'"context_length" must be at least 2, not {manifest["context_length"]}'
    if not isinstance(manifest.get("architecture"), dict):
        return '"architecture" must be an object'
    return (_architecture_problem(manifest["architecture"], manifest.get("tokenizer_vocab_size"))
            or _defaults_problem(manifest.get("defaults", {}), manifest["context_length"]))


def _architecture_problem(arch: dict, tokenizer_vocab_size: object) -> str | None:
    """What is wrong with the sizes the runtime shapes the model's caches and vocabulary by, or None."""
    keys = ["n_layer", "n_head", "vocab_size", "head_dim" if "head_dim" in arch else "n_embd"]  # else n_embd // n_head
    keys += ["n_kv_head"] if "n_kv_head" in arch else []  # else n_head
    sizes = {f'"architecture"."{key}"': arch.get(key) for key in keys}
    if tokenizer_vocab_size is not None:
        sizes['"tokenizer_vocab_size"'] = tokenizer_vocab_size
    for key, value in sizes.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            return f"{key} must be a whole number above 0, not {json.dumps(value)}"
    return None


def _defaults_problem(defaults: object, context_length: int) -> str | None:
    """What is wrong with the manifest's optional "defaults" (the settings a bundle chooses for itself), or None."""
    if not isinstance(defaults, dict):
        return '"defaults" must be an object'
    for key, low, high in (("beams", 1, MAX_BEAMS), ("context_tokens", 2, context_length)):
        value = defaults.get(key, low)
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            return f'"defaults"."{key}" must be an integer from {low} to {high}, not {json.dumps(value)}'
    return None


def _not_a_bundle(directory: Path, named: str) -> str:
    """Why `directory` (the modelPath `named`) is no bundle: a model another tool keeps, which `completer convert`
    makes a bundle of, says so and how."""
    convert = (f"; make a bundle of it with `completer convert {shlex.quote(named)} --out BUNDLE` and set modelPath "
               "to BUNDLE")
    if named.startswith(("ollama:", "tabby:")):
        return f"{named} names a model another tool keeps, not a bundle{convert}"
    if directory.is_file():
        return (f"{directory} is a GGUF file, not a bundle{convert}" if is_gguf_file(directory)
                else f"{directory} is not a directory")
    if (directory / "config.json").is_file():
        return f"{directory} is a Hugging Face checkpoint folder, not a bundle{convert}"
    repository = named.partition(":")[0]
    if not directory.exists() and hf_cache.REPOSITORY_ID.match(repository):  # a Hugging Face id, not downloaded
        where = " or ".join(map(str, hf_cache.caches()))
        return (f"model bundle not found: {named} is not a folder, and no local Hugging Face cache ({where}) holds "
                f"{repository}; download it first (hf download {repository}), and it is converted the first time "
                f"it is used")
    if not directory.is_dir():
        return f"model bundle not found: {directory} is not a directory"
    return f"model bundle {directory} has no manifest.json"


def load_bundle(path: str | Path | None = None, verify: bool = True) -> Bundle:
    """Read the manifest and verify every listed file; raise ModelError naming what is wrong."""
    directory = bundle_dir(path)
    manifest_path = directory / "manifest.json"
    try:
        found = manifest_path.is_file()
    except (OSError, ValueError) as exc:
        raise ModelError(f"model bundle {directory} cannot be read ({getattr(exc, 'strerror', None) or exc})") from exc
    if not found:
        named_by = " (the folder COMPLETER_MODEL names)" if not path and os.environ.get("COMPLETER_MODEL") else ""
        raise ModelError(_not_a_bundle(directory, str(path)) + named_by)
    try:
        manifest = json.loads(manifest_path.read_bytes())
    except OSError as exc:
        raise ModelError(f"{manifest_path}: cannot be read ({exc.strerror or exc})") from exc
    except (ValueError, RecursionError) as exc:  # RecursionError: arrays nested thousands deep
        raise ModelError(f"{manifest_path}: unreadable manifest, not JSON ({exc})") from exc
    problem = _manifest_problem(manifest)
    if problem:
        raise ModelError(f"{manifest_path}: incomplete or malformed manifest: {problem}")
    files, version = manifest["files"], manifest["format_version"]
    if version not in SUPPORTED_FORMATS:
        raise ModelError(f"{manifest_path}: format_version {version} is not supported (this version reads "
                         f"{', '.join(map(str, SUPPORTED_FORMATS))}); a newer completer wrote it")
    for name in REQUIRED_FILES:
        if name not in files:
            raise ModelError(f"{manifest_path}: lists no checksum for {name}")
    for name, meta in files.items():
        file_path = directory / name
        try:  # a name the system refuses (longer than a file name may be): one line, not an OSError
            size = file_path.stat().st_size if file_path.is_file() else None
        except OSError as exc:
            raise ModelError(f"model file {file_path} cannot be read ({exc.strerror or exc})") from exc
        if size is None:
            raise ModelError(f"model file missing: {file_path}")
        if verify:
            if "bytes" in meta and size != meta["bytes"]:
                raise ModelError(f"model file {file_path} is {size} bytes, the manifest says {meta['bytes']}"
                                 " (truncated or replaced)")
            try:
                digest = sha256_file(file_path)
            except OSError as exc:
                raise ModelError(f"model file {file_path} cannot be read ({exc.strerror or exc})") from exc
            if digest != meta.get("sha256"):
                raise ModelError(f"model file {file_path} fails its sha256 check (corrupt or modified)")
    for name in files:
        if name.endswith(".onnx"):
            _check_external_data(directory / name, files, manifest_path)
    return Bundle(directory, manifest)


def _check_external_data(graph: Path, files: dict, manifest_path: Path) -> None:
    """Refuse a graph that reads a file the manifest lists no checksum for (its weights in a `.data` file beside
    it): onnxruntime would load that file unchecked, whatever it holds."""
    try:
        unlisted = sorted(external_files(graph) - set(files))
    except NotAGraph as exc:
        raise ModelError(f"model file {graph} is not an ONNX graph ({exc or 'its fields cannot be read'})") from None
    except OSError as exc:
        raise ModelError(f"model file {graph} cannot be read ({exc.strerror or exc})") from exc
    if unlisted:
        raise ModelError(f"model file {graph} reads {json.dumps(unlisted[0])}, which {manifest_path} lists no "
                         "checksum for: not loading a file unchecked")
