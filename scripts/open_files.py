"""Which other files a user editing one validation file might have open, two ways.

`open_files`: the files of the same project and split nearest it in the directory tree. The split is by file
group, so these are files the model never trained on, as a user's own project is; but they are drawn without
regard to what the file uses, so they stand for open files that are merely of the same project.
eval.py and fit_repeats.py both use it, so the shares are fitted on what the evaluation then measures.

`imported_files`: the project's modules that the file imports, from either split. These are the files a user
would have open beside the one they edit, but most are training files: the model has seen them, so it may
already know some of what they hold (which, if anything, understates what searching them adds).
"""
from __future__ import annotations

import ast
from collections.abc import Iterable


def shared_directories(a: str, b: str) -> int:
    """How many leading directories the two paths have in common."""
    count = 0
    for left, right in zip(a.split("/")[:-1], b.split("/")[:-1]):
        if left != right:
            break
        count += 1
    return count


def open_files(keys: Iterable[tuple[str, str]], count: int) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """For each (origin, path), up to `count` other keys of the same origin, nearest first: most directories
    shared, then by path. A project with one file in the split gives that file none."""
    by_origin: dict[str, list[str]] = {}
    for origin, path in keys:
        by_origin.setdefault(origin, []).append(path)
    chosen = {}
    for origin, paths in by_origin.items():
        for path in paths:
            others = sorted((p for p in paths if p != path), key=lambda p: (-shared_directories(path, p), p))
            chosen[(origin, path)] = [(origin, p) for p in others[:count]]
    return chosen


def imported_modules(text: str, path: str) -> list[str]:
    """The dotted names a module's imports may refer to, module-level imports first, relative imports resolved
    against `path`'s package. `from a.b import c` gives both a.b.c (c may be a submodule) and a.b."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    package = path.removesuffix(".py").split("/")[:-1]  # a/b/c.py and a/b/__init__.py are both in package a.b
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module.split(".") if node.module else []
            if node.level:
                if node.level - 1 >= len(package):  # above the top package
                    continue
                base = package[:len(package) - (node.level - 1)] + base
            names += [".".join(base + [alias.name]) for alias in node.names if alias.name != "*"]
            if base:
                names.append(".".join(base))
    return list(dict.fromkeys(names))


def imported_files(text: str, key: tuple[str, str], paths: set[tuple[str, str]], count: int) -> list[tuple[str, str]]:
    """Up to `count` files of `key`'s project (among `paths`) that its imports name, in import order: the
    modules a user editing the file would open beside it."""
    origin, path = key
    found: list[tuple[str, str]] = []
    for name in imported_modules(text, path):
        stem = name.replace(".", "/")
        for candidate in ((origin, f"{stem}.py"), (origin, f"{stem}/__init__.py")):
            if candidate in paths and candidate != key and candidate not in found:
                found.append(candidate)
                break
        if len(found) >= count:
            break
    return found
