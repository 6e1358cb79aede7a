"""`completer models`: the models other tools have downloaded onto this machine, and whether `completer convert`
reads each one.

The places are:
- the Hugging Face cache, and llama.cpp's LLAMA_CACHE, which has the same layout (hf_cache.py). They hold
  checkpoint folders, and GGUF repositories with one entry per file;
- Ollama's store (ollama_store.py) and Tabby's (tabby_store.py);
- LM Studio's models folder;
- the GGUF files of llama.cpp's older flat cache.

Only file headers are read. Nothing is loaded, converted or downloaded.
"""
from __future__ import annotations

import json
import os
import shlex  # a path with spaces, as LM Studio's folders may have, shown as one shell word
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from . import ollama_store, safetensors_header, tabby_store
from .convertible import SUPPORTED_TYPES, convert_extra_install, convert_extra_missing
from .hf_cache import CachedModel, cached_models, caches, file_or_unknown, gguf_files, pick_gguf, quant_tag


@dataclass(frozen=True)
class LocalModel:
    source: str  # what `completer convert` takes to read it
    store: str  # the place it was found in (PLACES)
    kind: str | None  # the config's model_type, or the GGUF file's architecture
    why_not: str | None  # why `completer convert` would refuse it; None when it converts
    path: str
    parameters: int | None = None  # how many weights, from the files' headers; None when they cannot be read


PLACES = ("Hugging Face cache", "Ollama", "Tabby", "LM Studio", "llama.cpp cache")


def lm_studio_folders() -> list[Path]:
    """LM Studio's models folders: today's, then the one versions before 0.3 used."""
    return [Path.home() / ".lmstudio" / "models", Path.home() / ".cache" / "lm-studio" / "models"]


def llama_cpp_flat_cache() -> Path:
    """Where llama.cpp's `-hf` kept GGUF files before it took the Hugging Face cache's layout."""
    if os.environ.get("LLAMA_CACHE"):
        return Path(os.environ["LLAMA_CACHE"]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "llama.cpp"


def local_models(supported: tuple[str, ...]) -> list[LocalModel]:
    """Every model in every place, in the order of PLACES; `supported` are the model_types the converter reads."""
    found = [model for cached in cached_models() for model in _huggingface(cached, supported)]
    for model in ollama_store.installed():
        if model.blob is None:
            why = model.problem or "no GGUF layer in its manifest"
            found.append(LocalModel(model.source, "Ollama", None, why, str(model.manifest)))
        else:
            found.append(_gguf_model(model.source, "Ollama", model.blob))
    for model in tabby_store.installed():
        if model.gguf is None:
            found.append(LocalModel(model.source, "Tabby", None, "no GGUF file in its ggml folder",
                                    str(tabby_store.models_dir() / model.model_id)))
        else:
            found.append(_gguf_model(model.source, "Tabby", model.gguf))
    for store, folders in (("LM Studio", lm_studio_folders()), ("llama.cpp cache", [llama_cpp_flat_cache()])):
        for folder in folders:
            files = _loose_gguf_files(folder, recursive=store == "LM Studio")
            found += [_gguf_model(str(path), store, path) for path in files]
    return found


def _huggingface(model: CachedModel, supported: tuple[str, ...]) -> list[LocalModel]:
    """A cached checkpoint folder as one entry; a GGUF repository as one entry per file, each named as
    ORG/NAME:QUANT where that tag picks it (hf_cache.pick_gguf), else by its path."""
    if model.weights != "gguf":
        parameters, unreadable = _checkpoint_parameters(model.snapshot)
        why_not = _why_not(model, supported) or unreadable
        return [LocalModel(model.repository, "Hugging Face cache", model.model_type, why_not, str(model.snapshot),
                           parameters)]
    files = gguf_files(model.snapshot)
    entries = []
    for file in files:
        tag = quant_tag(file)
        picked = tag and pick_gguf(files, tag, model.repository) == file
        source = f"{model.repository}:{tag}" if picked else (model.repository if len(files) == 1 else str(file))
        entries.append(_gguf_model(source, "Hugging Face cache", file))
    return entries


def _why_not(model: CachedModel, supported: tuple[str, ...]) -> str | None:
    """Why `completer convert` would refuse a cached checkpoint folder, in a few words; None when it reads it."""
    if model.config_problem is not None:
        return model.config_problem
    if model.model_type is None and model.weights == "none":
        return "no config.json and no GGUF model file"
    if model.model_type not in supported:
        return f"model_type {model.model_type!r} is not supported"
    if model.weights != "safetensors":
        return "only PyTorch pickles, which are never loaded" if model.weights == "pickle only" else "no weights"
    return None if model.tokenizer else "no tokenizer.json"


def _checkpoint_parameters(snapshot: Path) -> tuple[int | None, str | None]:
    """The weights of a checkpoint folder's safetensors files (the shards its index names, if it has one), counted
    from their headers; and, where they cannot all be read, why, as the converter would refuse them: a shard or a
    file whose download did not finish (no file yet, or a link to a blob not there)."""
    index = snapshot / "model.safetensors.index.json"
    try:
        if index.is_file():
            names = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
            files = [snapshot / str(name) for name in names]
        else:
            files = sorted(snapshot.glob("*.safetensors"))
        missing = [file.name for file in files if not file.is_file()]
        if missing:
            return None, f"{', '.join(missing)} missing (a download that did not finish?)"
        return (sum(safetensors_header.parameters(file) for file in files) if files else None), None
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        return None, f"unreadable weights ({getattr(exc, 'strerror', None) or exc})"


def _gguf_model(source: str, store: str, path: Path) -> LocalModel:
    """A GGUF file's entry: its architecture, size and why the converter would refuse it, from its header alone."""
    from .gguf_source import GGUFError, header, unsupported

    try:
        found = header(path, parameters=True)
    except GGUFError as exc:
        return LocalModel(source, store, None, str(exc).removeprefix(f"{path}: "), str(path))
    arch = found.get("general.architecture")
    return LocalModel(source, store, arch if isinstance(arch, str) else None, unsupported(found), str(path),
                      found.get("parameters"))


def size_label(parameters: int | None) -> str:
    """135M, 1.5B: a model's size as model names give it."""
    if parameters is None:
        return "?"
    if parameters >= 10**9:
        return f"{parameters / 10**9:.1f}B"
    return f"{parameters / 10**6:.0f}M" if parameters >= 10**6 else f"{parameters / 10**3:.0f}K"


def _loose_gguf_files(folder: Path, recursive: bool) -> list[Path]:
    try:
        found = sorted(folder.rglob("*.gguf") if recursive else folder.glob("*.gguf"))
    except OSError:
        return []
    return [path for path in found if file_or_unknown(path) and "mmproj" not in path.name]


def places() -> dict[str, list[str]]:
    """The folders each place was looked for in."""
    return {"Hugging Face cache": [str(cache) for cache in caches()],
            "Ollama": [str(store) for store in ollama_store.model_stores()],
            "Tabby": [str(tabby_store.models_dir())],
            "LM Studio": [str(folder) for folder in lm_studio_folders()],
            "llama.cpp cache": [str(llama_cpp_flat_cache())]}


def unreadable() -> list[tuple[str, str]]:
    """(place, folder) for each folder looked in that exists, or may, but this user cannot list: Linux's Ollama
    service keeps its store where only its own group may read it."""
    found = []
    for place, folders in places().items():
        for folder in folders:
            try:
                with os.scandir(folder):
                    pass
            except (FileNotFoundError, NotADirectoryError):
                continue
            except OSError as exc:
                found.append((place, f"{folder} ({exc.strerror or exc})"))
    return found


def printable(text: str) -> str:
    """`text` with what a terminal would act on rather than show (a newline or an escape sequence in a file's name)
    and what is not UTF-8 (a name's undecodable bytes) written as Python escapes: each model stays on its line,
    and no file name drives the terminal."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape", "backslashreplace").decode("ascii")
                   for c in text)


def main(args) -> int:
    """`completer models [--json]`: listing needs only the runtime; converting needs the convert extra, which the
    output names when it is missing, as it names the places this user cannot read."""
    found = local_models(SUPPORTED_TYPES)
    missing = convert_extra_missing()
    install = f"completer convert needs the convert extra ({missing} is missing): {convert_extra_install()}"
    hidden = unreadable()
    if args.json:
        rows = [{**asdict(model), "id": model.source, "model_type": model.kind, "convertible": model.why_not is None,
                 "size": None if model.parameters is None else size_label(model.parameters)} for model in found]
        print(json.dumps({"places": places(), "models": rows, "convert_extra": missing is None,
                          "unreadable": [folder for _, folder in hidden]}, indent=1))
        return 0
    if hasattr(sys.stdout, "reconfigure"):  # a terminal that cannot show a name's characters gets escapes too
        sys.stdout.reconfigure(errors="backslashreplace")
    for place, folder in hidden:
        hint = " (the Ollama service's store: join the ollama group, or set OLLAMA_MODELS)" if place == "Ollama" else ""
        print(printable(f"{place}: cannot read {folder}; its models are not listed{hint}"))
    if not found:
        looked = "; ".join(f"{place}: {', '.join(folders)}" for place, folders in places().items())
        print(printable(f"no models found ({looked})"))
        return 0
    width = max(len(printable(model.source)) for model in found)
    for place in PLACES:
        listed = [model for model in found if model.store == place]
        if listed:
            print(f"{place}:")
        for model in listed:
            verdict = (f"converts: completer convert {shlex.quote(model.source)} --out BUNDLE" if model.why_not is None
                       else model.why_not)
            print(printable(f"  {printable(model.source):<{width}}  {model.kind or '?':<12}  "
                            f"{size_label(model.parameters):>6}  {verdict}"))
    if missing is not None:
        print(install)
    return 0


