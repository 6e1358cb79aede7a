"""Models Ollama has pulled, found by the name `ollama run` takes.

Ollama keeps each model as a manifest, `manifests/HOST/NAMESPACE/MODEL/TAG` (JSON naming layers by digest), and
the layers as files named by their digest, `blobs/sha256-HEX`; the layer of media type
`application/vnd.ollama.image.model` is the GGUF file llama.cpp runs. `completer convert ollama:NAME` reads that
file after checking it against its digest. Only Ollama's files are read: Ollama need not be running, and
nothing is downloaded.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from .hf_cache import file_or_unknown
from .types import ModelError

PREFIX = "ollama:"
DEFAULT_HOST, DEFAULT_NAMESPACE, DEFAULT_TAG = "registry.ollama.ai", "library", "latest"
MODEL_LAYER = "application/vnd.ollama.image.model"
DIGEST = re.compile(r"^sha256[:-]([0-9a-f]{64})$")
PART = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")  # one part of a name; never "..", never a separator
HOST = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:-]*$")  # Ollama's hosts may name a port: localhost:5000
SERVICE_HOME = Path("/usr/share/ollama/.ollama/models")  # where Linux's install script's service keeps them


class OllamaError(ModelError):
    """Why an Ollama model cannot be read, in one line."""


def model_stores() -> list[Path]:
    """Where Ollama keeps models, as Ollama looks (OLLAMA_MODELS, else ~/.ollama/models), then the store of the
    system service Linux's install script sets up, which a user may be allowed to read."""
    if os.environ.get("OLLAMA_MODELS"):
        return [Path(os.environ["OLLAMA_MODELS"]).expanduser()]
    return [Path.home() / ".ollama" / "models", SERVICE_HOME]


@dataclass(frozen=True)
class OllamaModel:
    name: str  # as `ollama list` shows it: MODEL:TAG, NAMESPACE/MODEL:TAG or HOST/NAMESPACE/MODEL:TAG
    manifest: Path
    blob: Path | None  # the GGUF layer's file; None where the manifest has no GGUF layer
    digest: str | None  # its sha256, hex
    problem: str | None = None  # why its manifest cannot be read, where it cannot

    @property
    def source(self) -> str:
        """What `completer convert` takes to read this model."""
        return PREFIX + self.name


def parse_name(name: str) -> tuple[str, str, str, str]:
    """(host, namespace, model, tag) of a name as Ollama reads it: `qwen2.5-coder`, `qwen2.5-coder:1.5b-base`,
    `user/model:tag`, `hf.co/org/repo:Q8_0`; the parts it leaves out are Ollama's defaults."""
    rest, tag = name, DEFAULT_TAG
    if rest.rfind(":") > rest.rfind("/"):
        rest, tag = rest.rsplit(":", 1)
    parts = rest.split("/")
    host_ok = len(parts) < 3 or HOST.match(parts[0]) is not None
    if len(parts) > 3 or not host_ok or not all(PART.match(part) for part in [*parts[-2:], tag]):
        raise OllamaError(f"{name!r} is not an Ollama model name (MODEL[:TAG], NAMESPACE/MODEL[:TAG] or "
                          "HOST/NAMESPACE/MODEL[:TAG])")
    host, namespace = DEFAULT_HOST, DEFAULT_NAMESPACE
    if len(parts) == 3:
        host, namespace, model = parts
    elif len(parts) == 2:
        namespace, model = parts
    else:
        model = parts[0]
    return host, namespace, model, tag


def _shown(host: str, namespace: str, model: str, tag: str) -> str:
    """The name as `ollama list` shows it: the default host and namespace left out."""
    if host.lower() != DEFAULT_HOST:
        return f"{host}/{namespace}/{model}:{tag}"
    return f"{model}:{tag}" if namespace.lower() == DEFAULT_NAMESPACE else f"{namespace}/{model}:{tag}"


def find(name: str, stores: list[Path] | None = None) -> OllamaModel:
    """The model `name` names in the first store that holds it, with its GGUF layer; OllamaError naming the stores
    when none does, or why the model there has no GGUF layer."""
    parts = parse_name(name)
    searched = stores if stores is not None else model_stores()
    for store in searched:
        manifest = store / "manifests" / Path(*parts)
        try:
            present = manifest.is_file()
        except PermissionError as exc:
            raise OllamaError(f"Ollama's store {store} cannot be read by this user ({exc.strerror}); it may belong "
                              "to the ollama service: join its group, or set OLLAMA_MODELS") from exc
        if present:
            model = _read(store, manifest, _shown(*parts))
            if model.blob is None:
                raise OllamaError(f"Ollama's {model.name} has no GGUF layer ({MODEL_LAYER}) in its manifest; models "
                                  "Ollama stores as safetensors tensors are not read here")
            return model
    where = " or ".join(str(store) for store in searched)
    raise OllamaError(f"Ollama has no model {_shown(*parts)} in {where} (`ollama list` shows what it has; "
                      "`ollama pull` fetches one; OLLAMA_MODELS names another store)")


def _read(store: Path, manifest: Path, name: str) -> OllamaModel:
    try:
        layers = json.loads(manifest.read_text(encoding="utf-8")).get("layers")
    except (OSError, ValueError, RecursionError, AttributeError) as exc:
        raise OllamaError(f"Ollama's manifest of {name} ({manifest}) cannot be read: {exc}") from exc
    for layer in layers if isinstance(layers, list) else []:
        if isinstance(layer, dict) and layer.get("mediaType") == MODEL_LAYER:
            digest = DIGEST.match(str(layer.get("digest", "")))
            if digest is None:
                raise OllamaError(f"Ollama's manifest of {name} ({manifest}) names its model by no sha256 digest")
            return OllamaModel(name, manifest, store / "blobs" / f"sha256-{digest.group(1)}", digest.group(1))
    return OllamaModel(name, manifest, None, None)


def installed(stores: list[Path] | None = None) -> list[OllamaModel]:
    """Every model in the stores, sorted by name; one whose manifest cannot be read says why (`problem`)."""
    found: dict[str, OllamaModel] = {}
    for store in stores if stores is not None else model_stores():
        try:
            manifests = sorted(path for path in (store / "manifests").glob("*/*/*/*") if file_or_unknown(path))
        except OSError:
            continue
        for manifest in manifests:
            parts = manifest.relative_to(store / "manifests").parts
            name = _shown(*parts)
            if name in found:
                continue
            try:
                found[name] = _read(store, manifest, name)
            except OllamaError as exc:  # listed with the reason, so the user sees what `ollama list` may not
                found[name] = OllamaModel(name, manifest, None, None, str(exc))
    return [found[name] for name in sorted(found)]


def gguf_path(model: OllamaModel) -> Path:
    """The GGUF file of a model `find` gave, checked against the digest its manifest names it by; OllamaError
    otherwise."""
    from .bundle import sha256_file

    assert model.blob is not None and model.digest is not None, "find() gives only models with a GGUF layer"
    if not model.blob.is_file():  # missing, or not a regular file (a FIFO would block the check below)
        raise OllamaError(f"Ollama's {model.name}: its GGUF layer {model.blob} is missing or not a regular file; "
                          f"`ollama pull {model.name}` fetches it again")
    try:
        actual = sha256_file(model.blob)
    except OSError as exc:
        raise OllamaError(f"Ollama's {model.name}: its GGUF file {model.blob} cannot be read ({exc.strerror or exc})"
                          ) from exc
    if actual != model.digest:
        raise OllamaError(f"Ollama's {model.name}: its GGUF file {model.blob} does not match its digest (sha256 "
                          f"{actual}, expected {model.digest}); `ollama pull {model.name}` fetches it again")
    return model.blob
