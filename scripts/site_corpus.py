"""Build a training corpus from the running interpreter itself: its stdlib and the permissively licensed
distributions installed beside it, so a machine with no network (the lent GPU machine) can train.

Each installed distribution is judged by its own metadata (License-Expression, License, the license
classifiers): MIT, BSD, Apache-2.0, PSF, ISC and the like are kept; copyleft, unknown or missing
licenses are skipped and listed in the summary. The held-out benchmark packages are left out by name
and by module (a vendored copy of one too), and so are test-data dumps. The files then pass the same
filters as scripts/corpus.py (huge, minified, generated, not Python 3, duplicates) and the same split:
the validation files are those whose path corpus.py would put there, so no file of the model card's
validation split becomes training material here.
"""
from __future__ import annotations

import re
import sys
import sysconfig
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from importlib import metadata
from multiprocessing import Pool
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import content_digest, is_validation, normalise, normalized_name, rejection  # noqa: E402

HELDOUT_LIST = Path(__file__).resolve().parent / "heldout_packages.txt"
PERMISSIVE = re.compile(r"\b(MIT|BSD|0BSD|Apache|PSF|Python Software Foundation|ISC|Unlicense|zlib|HPND|CC0|"
                        r"Public Domain|Redistribution and use in source and binary forms|"
                        r"Permission is hereby granted, free of charge)\b", re.IGNORECASE)
RESTRICTIVE = re.compile(r"\b(A?GPL|LGPL|GNU|MPL|Mozilla|EPL|Eclipse|CDDL|Proprietary|Commercial|Non-Commercial|SSPL|"
                         r"BUSL|Commons Clause|Good, not Evil)\b", re.IGNORECASE)
LICENSE_FIELD_HEAD = 300  # characters of a License field read: the license's name, or its text's opening
TEST_DATA_DIRS = frozenset({"testdata", "test_data", "fixtures", "test_files", "baseline_images"})
TEST_DIRS = frozenset({"tests", "test", "testing"})


@dataclass(frozen=True)
class HeldOut:
    """The held-out benchmark packages: their normalized names and the modules they install."""

    names: frozenset[str]
    modules: frozenset[str]

    def covers_path(self, path: str) -> bool:
        """True for a file of a held-out module at any depth (vendored copies too)."""
        parts = path.split("/")
        return any(part in self.modules or (part.endswith(".py") and part[:-3] in self.modules) for part in parts)


def read_heldout(path: Path = HELDOUT_LIST) -> tuple[list[str], HeldOut]:
    """The pins ("name==version") and the held-out names and modules of heldout_packages.txt."""
    pins, names, modules = [], set(), set()
    for raw in path.read_text().splitlines():
        words = raw.split("#", 1)[0].split()
        if not words:
            continue
        if "==" not in words[0] or len(words) < 2:
            raise SystemExit(f"{path}: {raw.strip()!r} needs name==version then the modules it installs")
        pins.append(words[0])
        names.add(normalized_name(words[0].split("==")[0]))
        modules.update(words[1:])
    return pins, HeldOut(frozenset(names), frozenset(modules))


def license_of(meta: metadata.PackageMetadata) -> tuple[str, bool]:
    """(what the metadata declares of the license, in short; whether it is permissive). The most precise
    declaration decides: License-Expression (SPDX), else the license classifiers, else the head of the
    License field. Only that head: wheels append the notices of the binaries they bundle to the field
    (scipy's names libgfortran's GPL-3.0 with the GCC exception), which do not cover the Python sources.
    Permissive means a permissive license is named and nothing restrictive is, so "MIT OR GPL-3.0" is
    skipped too."""
    expression = (meta.get("License-Expression") or "").strip()
    classifiers = [c.split("::")[-1].strip() for c in meta.get_all("Classifier") or [] if c.startswith("License ::")]
    field = (meta.get("License") or "").strip()
    if expression:
        said = [expression]
    elif classifiers:
        said = classifiers
    elif field and field.upper() != "UNKNOWN":
        said = [field[:LICENSE_FIELD_HEAD]]
    else:
        return "none given", False
    text = " | ".join(said)
    short = " | ".join(s.splitlines()[0][:60] for s in said if s.strip())
    return short, bool(PERMISSIVE.search(text)) and not RESTRICTIVE.search(text)


def is_test_data(path: str) -> bool:
    """Fixture and data dumps inside a package's tests: data, not code anyone types."""
    parts = path.split("/")[:-1]
    if any(part in TEST_DATA_DIRS for part in parts):
        return True
    return any(part in TEST_DIRS for part in parts) and any(part in ("data", "files", "samples") for part in parts)


@dataclass
class Source:
    """One origin of files: the stdlib or an installed distribution."""

    origin: str  # "stdlib" or "name==version"
    license: str
    files: list[tuple[str, Path]]  # (path as the split sees it, file on disk)


@dataclass
class Plan:
    """What the corpus will read, and what it skipped before reading a file, with the reason."""

    sources: list[Source] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # origin -> why


def stdlib_source() -> Source:
    root = Path(sysconfig.get_paths()["stdlib"])
    files = [(p.relative_to(root).as_posix(), p) for p in sorted(root.rglob("*.py"))
             if not p.relative_to(root).as_posix().startswith(("site-packages/", "dist-packages/"))]
    return Source("stdlib", "PSF-2.0", files)


def folder_source(root: Path) -> Source:
    """The .py files under one folder, as one source (dry runs and tests)."""
    files = [(p.relative_to(root).as_posix(), p) for p in sorted(root.rglob("*.py"))]
    return Source(f"folder:{root.name}", "given", files)


def distribution_sources(heldout: HeldOut, distributions: Iterable[metadata.Distribution] | None = None) -> Plan:
    """Every installed distribution with its .py files, or the reason it is skipped."""
    plan = Plan()
    seen_names: set[str] = set()
    dists = sorted(distributions if distributions is not None else metadata.distributions(),
                   key=lambda d: normalized_name(d.metadata["Name"] or ""))
    for dist in dists:
        name = normalized_name(dist.metadata["Name"] or "")
        origin = f"{name}=={dist.version}"
        if not name or name in seen_names:  # the same name twice on sys.path: the first one is imported
            continue
        seen_names.add(name)
        short, permissive = license_of(dist.metadata)
        if name in heldout.names:
            plan.skipped[origin] = "held-out benchmark package"
            continue
        if not permissive:
            plan.skipped[origin] = f"license: {short}"
            continue
        files = []
        for entry in dist.files or []:
            rel = entry.as_posix()
            if not rel.endswith(".py") or rel.startswith("..") or "__pycache__" in rel:
                continue
            files.append((rel, Path(dist.locate_file(entry))))
        if not files:
            plan.skipped[origin] = "no Python files listed in its RECORD"
            continue
        plan.sources.append(Source(origin, short, files))
    return plan


def read_one(item: tuple[str, str, Path]) -> tuple[str, str, str | None, str | None]:
    """(origin, path, normalised text or None, why not). Runs in the worker processes."""
    origin, rel, path = item
    try:
        data = path.read_bytes()
    except OSError:
        return origin, rel, None, "unreadable"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return origin, rel, None, "not utf-8"
    reason = rejection(text)
    return (origin, rel, None, reason) if reason else (origin, rel, normalise(text), None)


@dataclass
class Corpus:
    """The kept files by split, as (origin, path, text), and the tallies for the summary."""

    train: list[tuple[str, str, str]] = field(default_factory=list)
    val: list[tuple[str, str, str]] = field(default_factory=list)
    rejected: dict[str, int] = field(default_factory=dict)
    duplicates: int = 0
    heldout_files: int = 0
    test_data_files: int = 0


def candidates(sources: list[Source], heldout: HeldOut, corpus: Corpus, max_files: int | None) -> Iterator[tuple]:
    count = 0
    for source in sources:
        for rel, path in source.files:
            if heldout.covers_path(rel):
                corpus.heldout_files += 1
                continue
            if is_test_data(rel):
                corpus.test_data_files += 1
                continue
            if max_files is not None and count >= max_files:
                return
            count += 1
            yield source.origin, rel, path


def build(sources: list[Source], heldout: HeldOut, workers: int, max_files: int | None = None) -> Corpus:
    """Read and filter the files on `workers` processes, then dedup and split them in a fixed order."""
    corpus = Corpus()
    items = list(candidates(sources, heldout, corpus, max_files))
    seen: set[str] = set()
    with Pool(max(1, workers)) as pool:
        for origin, rel, text, reason in pool.imap(read_one, items, chunksize=64):
            if text is None:
                corpus.rejected[reason] = corpus.rejected.get(reason, 0) + 1
                continue
            digest = content_digest(text)
            if digest in seen:
                corpus.duplicates += 1
                continue
            seen.add(digest)
            (corpus.val if is_validation(rel) else corpus.train).append((origin, rel, text))
    return corpus
