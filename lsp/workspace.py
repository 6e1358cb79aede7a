"""The workspace folders, indexed in the background for the repository's snippets (completer/workspace.py).

What it reads: files in the enabled languages under each workspace folder, as an editor opens a folder;
`.gitignore` files are honoured (each for its own folder and below, matched as git matches them: lsp/gitignore.py),
the usual tool folders (.git, node_modules, virtual environments, caches) are skipped, no symlink is followed out
of the folder or to a file those rules leave out (nor, at a request's read, one a file became since), and files
over 1 MB or holding NUL bytes are skipped. A file that cannot be read is skipped
and logged once. Nothing leaves the machine: the index lives in the server's memory, within its budget.

Building it never delays a keystroke: it runs on a thread that gives the event loop the interpreter between
files, and a request asks the index only for what is already in it.
"""
from __future__ import annotations

import itertools
import json
import logging
import os
import stat
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from functools import lru_cache
from pathlib import Path
from urllib.parse import unquote, urlsplit

from pygls import uris

from completer.syntax import EXTENSION_LANGUAGES
from completer.workspace import FileEntry, Snippet, WorkspaceIndex, file_entry, first_line_at, identifiers_above, \
    lines_at
from lsp.exclusions import Exclusions
from lsp.gitignore import GitPatterns, pattern_lines

log = logging.getLogger(__name__)


NOTEBOOK_SUFFIX = ".ipynb"
MAX_NOTEBOOK_BYTES = 16 << 20
"""A Jupyter notebook's outputs (images in base64) make its file far larger than its code: read up to this much."""
NOTEBOOK_CODE_KEPT = 8 << 20
"""The characters of notebooks' code `read_source` keeps, by their file's identity and state: a lookup reads its
files again at each new line, and parsing a notebook's JSON of megabytes of outputs holds the interpreter, the event
loop's too, for tens of milliseconds."""


class _KeptCodes:
    """Notebooks' code by their file's identity and state (device, inode, size, times), the least recently read
    dropped past `limit` characters; shared by the index's threads."""

    def __init__(self, limit: int) -> None:
        self._codes: OrderedDict[tuple[int, ...], str | None] = OrderedDict()
        self._characters = 0
        self._limit = limit
        self._lock = threading.Lock()

    def get(self, key: tuple[int, ...]) -> tuple[bool, str | None]:
        """(whether the file in the state `key` was read before, its code)."""
        with self._lock:
            if key not in self._codes:
                return False, None
            self._codes.move_to_end(key)
            return True, self._codes[key]

    def put(self, key: tuple[int, ...], code: str | None) -> None:
        with self._lock:
            if key in self._codes:
                return
            self._codes[key] = code
            self._characters += len(code or "")
            while self._characters > self._limit and len(self._codes) > 1:
                self._characters -= len(self._codes.popitem(last=False)[1] or "")


_NOTEBOOK_CODES = _KeptCodes(NOTEBOOK_CODE_KEPT)


def _suffixes_by_language() -> dict[str, tuple[str, ...]]:
    suffixes: dict[str, tuple[str, ...]] = {}
    for suffix, language in sorted(EXTENSION_LANGUAGES.items()):
        suffixes[language] = (*suffixes.get(language, ()), suffix)
    suffixes["python"] = (*suffixes.get("python", ()), NOTEBOOK_SUFFIX)  # its code cells (notebook_code)
    return suffixes


LANGUAGE_SUFFIXES = _suffixes_by_language()
"""The file name endings of each language's files (an LSP id's), as completer/syntax.py names files."""
NOT_READ_FOR_ALL = frozenset({"plaintext", "json", "yaml", "toml", "markdown", "html", "css", "scss", "less"})
"""Data, prose, markup and style sheets: read when enabledLanguages names them, not for a model that writes every
language, whose documents they would only crowd out of the memory budget."""
LANGUAGE_FAMILIES = (frozenset({"javascript", "javascriptreact", "typescript", "typescriptreact"}),
                     frozenset({"c", "cpp", "cuda-cpp", "objective-c", "objective-cpp"}))
"""Languages whose files are context for one another: a TypeScript file calls JavaScript modules, C++ includes
C headers (`.h` files are C's by their name)."""
MAX_FILE_BYTES = 1 << 20
IGNORE_FILE = ".gitignore"
MAX_PATTERN_FILE_BYTES = 100 << 20  # git passes over a .gitignore larger than this ("excessively large")
SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".tox", ".nox",
                          ".mypy_cache", ".pytest_cache", ".ruff_cache", "site-packages", "dist", "build"})
SNIPPETS = 8  # windows of other files sent with a request
SAME_QUERY = 0.9  # snippets are picked again once the names above the cursor overlap less than this (Jaccard)
_SERIALS = itertools.count()
FULL_AFTER_REFUSALS = 50  # files in a row the memory budget refused: the build stops reading


def path_of(uri: str) -> Path | None:
    """The file a `file:` URI names, or None for other schemes (untitled documents, remote ones), for a URI that
    cannot be read (an unclosed `[` in its host), and for a path no file can have (a NUL in it, or a lone surrogate
    from a JSON escape, which every file system call refuses)."""
    if not uri.startswith("file:"):
        return None
    try:
        path = _fs_path(uri)
        os.fsencode(path or "")
    except ValueError:  # urllib's "Invalid IPv6 URL", and the UnicodeEncodeError of a lone surrogate
        return None
    return Path(path) if path and "\0" not in path else None


def _fs_path(uri: str) -> str:
    """pygls's `uris.to_fs_path` of a `file:` URI, with its percent-escapes decoded as the system decodes file names
    (os.fsdecode, as the walk names files): pygls decodes bytes that are no UTF-8 (a name in Latin-1 on Linux) as
    U+FFFD, a name no file has, which would leave such a folder unindexed and its files' events unmatched. A host of
    `localhost` names this machine (RFC 8089) where there are no UNC paths: pygls made `//localhost/...` of it, a
    path no file has, and a document so named escaped the excludeFiles patterns anchored to its workspace folder."""
    netloc, path = (unquote(part, encoding=sys.getfilesystemencoding(), errors=sys.getfilesystemencodeerrors())
                    for part in urlsplit(uri)[1:3])
    if netloc.lower() == "localhost" and not uris.IS_WIN:
        netloc = ""
    if netloc and path:  # a UNC path: file://server/share/...
        value = f"//{netloc}{path}"
    elif uris.RE_DRIVE_LETTER_PATH.match(path):  # file:///C:/...
        value = path[1].lower() + path[2:]
    else:
        value = path
    return value.replace("/", "\\") if uris.IS_WIN else value


def _shown(name: str) -> str:
    """A file name as text a tokenizer takes: the bytes of a name that is no UTF-8 (which os.fsdecode keeps as lone
    surrogates, which a tokenizer refuses) each shown as U+FFFD, as an editor shows them."""
    try:
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:  # a lone surrogate no byte stands for (a Windows name)
        return name.encode("utf-8", "replace").decode("utf-8")


def language_suffixes(languages: tuple[str, ...]) -> tuple[str, ...]:
    """The file name endings of the enabled languages' files, in a stable order ("*": every language known but
    NOT_READ_FOR_ALL)."""
    if "*" in languages:
        languages = tuple(language for language in LANGUAGE_SUFFIXES if language not in NOT_READ_FOR_ALL)
    return tuple(sorted({s for lang in languages for s in LANGUAGE_SUFFIXES.get(lang, ())}))


@lru_cache(maxsize=None)
def context_suffixes(language: str) -> tuple[str, ...]:
    """The endings of the files that are context for a document in `language`: its own language's and its
    family's (LANGUAGE_FAMILIES). A Python file's lines (its `#` header, its calls) are wrong in a Go one."""
    family = next((family for family in LANGUAGE_FAMILIES if language in family), (language,))
    return tuple(sorted({s for lang in family for s in LANGUAGE_SUFFIXES.get(lang, ())}))


def notebook_code(text: str) -> str | None:
    """A Jupyter notebook's Python code, as the index reads the file: its code cells' sources, an empty line between
    cells. None for a notebook of another language (its kernel's) and for text that is no notebook."""
    try:
        notebook = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        return None
    metadata = notebook.get("metadata") if isinstance(notebook.get("metadata"), dict) else {}
    named = [part.get(key) for part, key in ((metadata.get("language_info"), "name"),
                                             (metadata.get("kernelspec"), "language")) if isinstance(part, dict)]
    if any(isinstance(name, str) and name.lower() != "python" for name in named):
        return None
    cells = []
    for cell in notebook["cells"]:
        source = cell.get("source") if isinstance(cell, dict) and cell.get("cell_type") == "code" else None
        if isinstance(source, list) and all(isinstance(part, str) for part in source):
            source = "".join(source)
        if isinstance(source, str) and source.strip():
            cells.append(source.rstrip("\n"))
    return "\n\n".join(cells) + "\n" if cells else ""


def _reader(open_text: Callable[[str], str | None], may_read: Callable[[str], bool]) -> Callable[[str], str | None]:
    """A file's text: an open document's unsaved one (`open_text`), else the disk's where `may_read` lets it be
    read; None when unreadable."""
    def read(name: str) -> str | None:
        text = open_text(name)
        if text is not None:
            return notebook_code(text) if name.endswith(NOTEBOOK_SUFFIX) else text
        try:
            return read_source(Path(name)) if may_read(name) else None
        except OSError:
            return None
    return read


def normal_path(path: Path) -> Path:
    """The path the index knows a file by: its folder's real path (a symlinked workspace root, /tmp on
    macOS), the file's own name (a symlinked file is judged where it lies)."""
    return Path(os.path.realpath(path.parent)) / path.name


def size_limit(path: Path) -> int:
    """The most bytes of `path` the index reads: a notebook's JSON holds its outputs beside its code."""
    return MAX_NOTEBOOK_BYTES if path.name.endswith(NOTEBOOK_SUFFIX) else MAX_FILE_BYTES


def read_source(path: Path) -> str | None:
    """The file's text (a notebook's code: `notebook_code`), or None when it is over MAX_FILE_BYTES (a notebook
    over MAX_NOTEBOOK_BYTES), binary, or not a regular file (a FIFO or a device, which a file indexed earlier may
    have become: opened without waiting, and never read); raises OSError when unreadable."""
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        status = os.fstat(descriptor)
    except OSError:
        os.close(descriptor)
        raise
    notebook = path.name.endswith(NOTEBOOK_SUFFIX)
    key = (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns)
    regular = stat.S_ISREG(status.st_mode)
    kept, code = _NOTEBOOK_CODES.get(key) if notebook and regular else (False, None)  # read, and not changed since
    if kept or not regular:  # a FIFO, a device, a folder: closed here, as open() would not take a folder's descriptor
        os.close(descriptor)
        return code if kept else None
    limit = size_limit(path)
    with open(descriptor, "rb") as handle:
        data = handle.read(limit + 1)
    text = data.decode("utf-8", errors="replace") if len(data) <= limit and b"\0" not in data[:8192] else None
    if not notebook:
        return text
    code = notebook_code(text) if text is not None else None
    _NOTEBOOK_CODES.put(key, code)
    return code


def outermost_folders(roots: list[Path], reaches: Callable[[Path, Path], bool] = lambda outer, inner: True
                      ) -> list[Path]:
    """The folders of `roots` that can be looked at, resolved, in the client's order, each once and none inside
    another whose walk `reaches` it (its files are read with the outer one's): one the outer folder's walk passes
    over (in its node_modules, or a folder its .gitignore ignores) is walked as its own, as it is when opened alone.
    The order is the walk's, which decides what a memory budget too small for all of them holds: a set's order
    would change with each process's hash seed."""
    resolved = list(dict.fromkeys(folder for folder in map(_folder, roots) if folder is not None))
    return [root for root in resolved
            if not any(root != outer and root.is_relative_to(outer) and reaches(outer, root) for outer in resolved)]


def _folder(root: Path) -> Path | None:
    """`root` resolved, when it is a folder the system lets be looked at: a name longer than it takes raised
    OSError from is_dir(), out of initialize."""
    try:
        return root.resolve() if root.is_dir() else None
    except (OSError, ValueError):
        return None


class _Ignores:
    """The .gitignore files met on the way down, each applying to its folder and below; as in git, the deepest
    one with a pattern for a path decides (a subfolder's `!name` takes back what a folder above ignores)."""

    def __init__(self, specs: list[tuple[Path, GitPatterns]] | None = None) -> None:
        self.specs: list[tuple[Path, GitPatterns]] = list(specs or ())

    @classmethod
    def above(cls, root: Path) -> "_Ignores":
        """The .gitignore files from the top of the git repository that holds the workspace folder `root` (one
        opened on a subfolder of a repository) down to `root`'s parent, as git reads them there; none when `root`
        tops its own repository, is in none, or is itself ignored by them (a home folder kept in git with `*`
        ignored, whose projects are not its files)."""
        if (root / ".git").exists():
            return cls()
        between: list[Path] = []
        for folder in root.parents:
            between.append(folder)
            if (folder / ".git").exists():
                break
        else:
            return cls()
        ignores = cls()
        for folder in reversed(between):
            ignores.add(folder)
        if any(ignores.ignored(folder, is_dir=True) for folder in (*between[:-1], root)):
            return cls()
        return ignores

    def add(self, folder: Path) -> None:
        """The .gitignore of `folder`, after the .git/info/exclude of a repository whose top it is (git reads that
        below every .gitignore: the deepest is asked first), after the user's excludes file (`_global_excludes`),
        which git reads below both. A repository's top also gets an empty list of patterns that holds its
        core.ignoreCase for the files read below it (`_folds`)."""
        if (folder / ".git").exists():
            self.specs.append((folder, GitPatterns((), _ignore_case(folder))))
            self._read(folder, _global_excludes(folder))
        self._read(folder, _git_dir(folder) / "info" / "exclude")
        self._read(folder, folder / IGNORE_FILE, follow=False)

    def _read(self, folder: Path, patterns: Path, follow: bool = True) -> None:
        """Read a .gitignore file as git does (`pattern_lines`): a UTF-8 byte order mark (Notepad's) is no part of
        its first pattern, and a line that is no pattern (`obj\\`, a trailing backslash; `!` alone; `[a-`) matches
        nothing while the others hold. Letters match in either case where the repository's core.ignoreCase says
        so (macOS and Windows by default, as git init sets it there)."""
        try:
            lines = _pattern_lines(patterns, follow)
        except OSError:
            return
        if lines is None:
            return
        self.specs.append((folder, GitPatterns(lines, self._folds(folder))))

    def _folds(self, folder: Path) -> bool:
        """Whether patterns read in `folder` match letters in either case: the core.ignoreCase of the innermost
        repository holding it (a nested one's, then the outer's again after the walk leaves it)."""
        return next((spec.ignore_case for top, spec in reversed(self.specs) if folder.is_relative_to(top)),
                    _PLATFORM_IGNORES_CASE)

    def ignored(self, path: Path, is_dir: bool) -> bool:
        """Whether the files of patterns met ignore `path` (a folder where `is_dir`) itself: the deepest file with a
        pattern naming it decides, by its last such pattern. The folders on the way are the caller's to ask."""
        for folder, spec in reversed(self.specs):  # added top down: the deepest first
            try:
                relative = path.relative_to(folder).as_posix()
            except ValueError:
                continue
            if relative == ".":  # a folder's own patterns name what is in it, not it (`[!a]*/` ignored its folder)
                continue
            found = spec.deciding(relative, is_dir)
            if found is not None:  # None: no pattern of this file names it
                return not found.negated
        return False


_PLATFORM_IGNORES_CASE = sys.platform in ("darwin", "win32")
"""Whether git init sets core.ignoreCase on this system's usual file systems: the guess where git cannot be asked."""


@lru_cache(maxsize=64)
def _ignore_case(top: Path) -> bool:
    """The core.ignoreCase of the repository whose top is `top`: where it is true (macOS, Windows), git ignores
    `secrets.py` for a `Secrets.py` pattern, and so must the index. Unset, git takes it as false; without git, the
    system's usual setting."""
    try:
        found = subprocess.run(["git", "config", "--type=bool", "--get", "core.ignoreCase"], cwd=top, timeout=5,
                               stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="surrogateescape",
                               creationflags=getattr(subprocess, "CREATE_NO_WINDOW", 0))
    except (OSError, subprocess.SubprocessError):
        return _PLATFORM_IGNORES_CASE
    if found.returncode not in (0, 1):  # not unset (1) but refused: a repository of another owner (safe.directory)
        return _PLATFORM_IGNORES_CASE
    return found.stdout.strip() == "true"


@lru_cache(maxsize=64)
def _global_excludes(top: Path) -> Path:
    """The excludes file git reads for every repository, below its .gitignore files and info/exclude, as git names it
    for the repository whose top is `top` (core.excludesFile; by default $XDG_CONFIG_HOME/git/ignore or
    ~/.config/git/ignore): where a user keeps their own files out of every repository (GitHub's guide suggests
    `~/.gitignore_global`), which were indexed and sent as context. Asked of git once per repository; without git,
    the default."""
    try:
        found = subprocess.run(["git", "config", "--path", "--get", "core.excludesFile"], cwd=top, timeout=5,
                               stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="surrogateescape",
                               creationflags=getattr(subprocess, "CREATE_NO_WINDOW", 0))  # no console on Windows
        if found.returncode == 0 and found.stdout.strip():
            return top / os.path.expanduser(found.stdout.strip())  # an absolute path stays itself
    except (OSError, subprocess.SubprocessError):
        pass
    return Path(os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")) / "git" / "ignore"


def _git_dir(top: Path) -> Path:
    """The folder of git's files for a repository whose top may be `top`, where git finds its info/exclude: `.git`,
    or for a worktree or a submodule, whose `.git` is a file (`gitdir: path`), the folder that names, and for a
    worktree the main repository's (its `commondir`): a worktree's info/exclude was looked for in `.git/info/`, under
    a file, and the files its user keeps out of git there were read."""
    dot_git = top / ".git"
    try:
        named = _pattern_lines(dot_git, follow=False) if dot_git.is_file() else None
        if not named or not named[0].startswith("gitdir:"):
            return dot_git
        git_dir = top / named[0][len("gitdir:"):].strip()
        common = _pattern_lines(git_dir / "commondir", follow=True) if (git_dir / "commondir").is_file() else None
        return git_dir / common[0].strip() if common else git_dir
    except OSError:
        return dot_git


def _pattern_lines(path: Path, follow: bool) -> list[str] | None:
    """The lines of a .gitignore or an info/exclude file, or None where git reads none: not a regular file (a FIFO,
    whose open waited for a writer that never came: the walk's thread, or with nested workspace folders initialize,
    hung there), over MAX_PATTERN_FILE_BYTES, or a .gitignore that is a symlink (`follow` False: git follows none).
    Raises OSError when unreadable."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    descriptor = os.open(path, flags if follow else flags | getattr(os, "O_NOFOLLOW", 0))
    try:
        status = os.fstat(descriptor)
    except OSError:
        os.close(descriptor)
        raise
    if not stat.S_ISREG(status.st_mode) or status.st_size > MAX_PATTERN_FILE_BYTES:  # a folder's descriptor too,
        os.close(descriptor)  # which open() would not take
        return None
    with open(descriptor, "rb") as handle:
        return pattern_lines(handle.read(MAX_PATTERN_FILE_BYTES))


def _folders(top: Path) -> Iterator[tuple[str, list[str], list[str]]]:
    """`os.walk(top)`, top down, into no symlinked folder, passing over a folder that cannot be listed, and each
    folder's `dirs` pruned in place by the caller; without recursion: os.walk recursed once per level before Python
    3.12, and a folder nested a thousand deep raised RecursionError, which stopped the walk there, every file after it
    unindexed."""
    stack = [os.fspath(top)]
    while stack:
        folder = stack.pop()
        dirs, files, links = [], [], set()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    try:
                        is_dir = entry.is_dir()
                    except OSError:
                        is_dir = False
                    (dirs if is_dir else files).append(entry.name)
                    if is_dir and entry.is_symlink():
                        links.add(entry.name)
        except OSError:
            continue
        yield folder, dirs, files
        stack.extend(os.path.join(folder, name) for name in reversed(dirs) if name not in links)


def outermost(folders: list[Path]) -> list[Path]:
    """`folders` each once, but those inside another of them, in their order."""
    unique = list(dict.fromkeys(folders))
    return [folder for folder in unique if not any(other != folder and folder.is_relative_to(other)
                                                   for other in unique)]


def _named_or_under(name: str, paths: set[str]) -> bool:
    """Whether the file `name` is one of `paths` or lies in a folder of them."""
    while name not in paths:
        cut = name.rfind(os.sep)
        if cut <= 0:
            return False
        name = name[:cut]
    return True


class RequestsInFlight:
    """The completion requests in flight: an index's build pauses while there is one, so the cores stay with the
    search (docs/benchmarks.md, "The workspace as context"). The server keeps one for its lifetime and hands it
    to every index it builds, so an index built anew while a request runs (the setting turned off and on) waits
    for it too."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0
        self.idle = threading.Event()
        self.idle.set()

    def started(self) -> None:
        with self._lock:
            self._count += 1
            self.idle.clear()

    def ended(self) -> None:
        with self._lock:
            self._count = max(0, self._count - 1)
            if not self._count:
                self.idle.set()


class WorkspaceFiles:
    """The index of the workspace folders, built on a thread and kept up to date by the server's events."""

    def __init__(self, budget_mb: int, languages: tuple[str, ...], requests: RequestsInFlight | None = None,
                 exclusions: Exclusions | None = None) -> None:
        self.budget_mb = budget_mb  # what it was built for, with its suffixes and exclusions: a change builds it anew
        self.exclusions = exclusions or Exclusions(())  # excludeFiles: files never read
        self.serial = next(_SERIALS)  # which index this is: one built anew never passes for an older one
        self.index = WorkspaceIndex(budget_mb * 1024 * 1024)
        self.suffixes = language_suffixes(languages)
        self.roots: list[Path] = []
        self.folders: list[Path] = []  # every workspace folder, nested ones too: excludeFiles reads paths in them
        self.done = threading.Event()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._unreadable_logged = False
        self._above: dict[Path, _Ignores] = {}  # per workspace folder: the .gitignore files above it (`_Ignores.above`)
        self._memo: dict[str, tuple[tuple, list[Snippet], frozenset[str]]] = {}  # per document: key, snippets, names
        self._followers: dict[str, tuple[tuple, list[tuple[str, str]]]] = {}  # per document: (key, pairs)
        self._first_line: tuple[tuple, str | None] = ((), None)  # (excluded path, generation), the line
        self._building = False
        self._changed_while_building: set[str] = set()  # paths an event gave a newer text than the walk read
        self._batched: bool | None = None  # in `update_all`: whether a file was put, its generation moved at the end
        self.generation = 0  # moves with every change of the index from the disk: memoized snippets are then stale
        self.edits = 0  # moves with every open document's unsaved text indexed: snippets are picked again, unwaited
        self.requests = requests or RequestsInFlight()  # the build waits while any is in flight

    # -- building -----------------------------------------------------------------------------------
    def start(self, roots: list[Path]) -> None:
        self.roots = outermost_folders(roots, lambda outer, inner: self._walked(outer, inner) is not None)
        self.folders = [folder for folder in map(_folder, roots) if folder is not None]
        self._building = True
        threading.Thread(target=self._build, name="workspace-index", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _build(self) -> None:
        started, count, refused = time.perf_counter(), 0, 0
        try:
            for path in (path for root in self.roots for path in self._walk(root, root)):
                while not self.requests.idle.wait(0.5):  # yield to requests: index between them
                    if self._stop.is_set():
                        return
                if self._stop.is_set():
                    return
                before = self.index.skipped_for_budget
                count += self._index_file(path, building=True)
                refused = refused + 1 if self.index.skipped_for_budget > before else 0
                if refused >= FULL_AFTER_REFUSALS:  # a home or root folder: reading on would find no room
                    log.info("workspace index: the memory budget is full; the rest of the folders is not read")
                    break
                time.sleep(0)  # let the event loop run between files
        except Exception:  # a folder that vanishes mid-walk, or worse: the server goes on without an index
            log.exception("indexing the workspace stopped")
        finally:
            with self._lock:
                self.generation += 1  # once the index is whole: snippets picked from a part of it are stale
                self._building = False
                self._changed_while_building.clear()
            self.done.set()
        skipped = self.index.skipped_for_budget
        log.info("workspace index: %d files in %.1f s, %.1f MB%s", count, time.perf_counter() - started,
                 self.index.nbytes / 2**20, f"; {skipped} files left out for the memory budget" if skipped else "")

    def _walk(self, top: Path, root: Path, ignores: _Ignores | None = None):
        """The files under `top` to index, by `ignores`, the .gitignore files that count in `top` (`_walked`; by
        default those above the workspace folder `root` in its repository, `_Ignores.above`, for `top` = `root`) and
        those below it; a symlink counts as pointing out when it leaves `root`. Each folder's files, then its
        subfolders, in the order of their names: the file system's order (scandir's) differs between checkouts of the
        same files, and the first files read fill the memory budget. Only the .gitignore files of the folders on the
        way to the one walked are asked: each file was asked of every .gitignore met so far, and a thousand folders
        with one each took the walk 107 s, not 4."""
        ignores = ignores or _Ignores(self._ignores_above(root).specs)
        read_here = ignores.specs and ignores.specs[-1][0] == top  # `_walked` read top's own
        for folder, dirs, files in _folders(top):
            here = Path(folder)
            while ignores.specs and not here.is_relative_to(ignores.specs[-1][0]):  # a folder walked whole (the walk
                ignores.specs.pop()  # goes depth first): its .gitignore files say nothing of the folders after it
            if (".gitignore" in files or ".git" in dirs or ".git" in files) and not (here == top and read_here):
                ignores.add(here)
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.endswith(".egg-info")
                             and not ignores.ignored(here / d, is_dir=True))
            for name in sorted(files):
                path = here / name
                if not name.endswith(self.suffixes) or ignores.ignored(path, is_dir=False) \
                        or self.exclusions.excludes(path, self.folders, resolve=path.is_symlink()):
                    continue
                if path.is_symlink() and not self._link_readable(path, root):
                    continue
                if path.is_file():  # not a FIFO or a device, whose read would never end
                    yield path

    def _index_file(self, path: Path, building: bool = False) -> int:
        """Index one file (a file that became too big, binary or unreadable leaves the index); while the first
        build runs, the generation stays put, so a document's snippets are not picked again after every file,
        and the build never writes back a file an event has indexed since."""
        try:
            text = read_source(path)
        except OSError as exc:
            if not self._unreadable_logged:
                log.warning("workspace index: skipping unreadable files, first %s (%s)", path, exc.strerror or exc)
                self._unreadable_logged = True
            text = None
        return self._put(path, file_entry(text) if text is not None else None, building)

    def _put(self, path: Path, entry: FileEntry | None, building: bool = False, edit: bool = False) -> int:
        """Put `path`'s names and line hashes in the index (`entry`, found outside the lock, which a request's
        lookup takes), or take it out (None). An `edit` (an open document's unsaved text) moves `edits`, not the
        generation: a request then takes the snippets picked before, and new ones are picked after its search
        (lsp/repository_lookups.py), where a new generation would make it wait for them after every pause in
        typing."""
        with self._lock:
            if building and str(path) in self._changed_while_building:
                return 0
            if not building and self._building:
                self._changed_while_building.add(str(path))
            added = self.index.add(str(path), entry) if entry is not None else self.index.remove(str(path))
            if edit:
                self.edits += 1
            elif self._batched is not None and entry is not None:  # one taken out moves it at once
                self._batched = True
            elif not building:
                self.generation += 1
        return int(bool(added))

    def summary(self) -> dict:
        """What completer/info reports of the index: its folders, files, size against its budget, and whether
        the first walk is still running (read without the lock, which a lookup may hold for milliseconds: each
        figure is read whole)."""
        return {"folders": [str(root) for root in self.roots], "files": len(self.index.files),
                "megabytes": round(self.index.nbytes / 2**20, 2), "budget_mb": self.budget_mb,
                "left_out_for_budget": self.index.skipped_for_budget, "building": not self.done.is_set()}

    def holds_language(self, language: str) -> bool:
        """Whether the index reads files that are context for a document in `language` (`context_suffixes`)."""
        return bool(set(context_suffixes(language)) & set(self.suffixes))

    def place(self, path: Path, indexed: bool = False) -> tuple[str, str] | None:
        """The workspace folder's name and `path`'s place in it (a POSIX path), for a prompt that lays out the
        repository's files; None outside every folder. `indexed`: `path` is one the index knows a file by (a
        snippet's), already `normal_path`: its folders are not resolved again at every request."""
        path = path if indexed else normal_path(path)
        root = self.root_of(path)
        return (_shown(root.name), _shown(path.relative_to(root).as_posix())) if root is not None else None

    # -- keeping up -------------------------------------------------------------------------------
    def root_of(self, path: Path) -> Path | None:
        """The innermost walked workspace folder that holds `path`: a folder inside another that the outer one's walk
        passes over is read by its own rules (`outermost_folders`)."""
        return max((root for root in self.roots if path.is_relative_to(root)), key=lambda root: len(root.parts),
                   default=None)

    def _ignores_above(self, root: Path) -> _Ignores:
        """`_Ignores.above(root)`, read once per workspace folder (an index built anew reads them again)."""
        found = self._above.get(root)
        if found is None:
            found = self._above[root] = _Ignores.above(root)
        return found

    def readable(self, path: Path) -> bool:
        """Whether the walk would read `path`: under a root, in an enabled language, excluded (excludeFiles) under
        none of its names, in no skipped folder, not ignored by a .gitignore between its repository's top
        (`_Ignores.above`) and it, and no symlink out of the root."""
        root = self.root_of(path)
        if root is None or not path.name.endswith(self.suffixes) or self.exclusions.excludes(path, self.folders):
            return False
        ignores = self._walked(root, path.parent)
        return ignores is not None and not ignores.ignored(path, is_dir=False) \
            and (not path.is_symlink() or self._link_readable(path, root))

    def _link_readable(self, path: Path, root: Path) -> bool:
        """Whether the walk reads the symlink `path` of the workspace folder `root`: its target lies in `root`, in no
        folder the walk skips, and no .gitignore ignores it. A link lends its name, not a way round them: git keeps a
        link's target path, never the text of the ignored file it names (`creds.py -> private/creds.py`)."""
        try:
            target = path.resolve(strict=True)
        except (OSError, RuntimeError):  # dangling, or a loop of links (RuntimeError before Python 3.13)
            return False
        if not target.is_relative_to(root):
            return False
        ignores = self._walked(root, target.parent)
        return ignores is not None and not ignores.ignored(target, is_dir=False)

    def _may_read(self, name: str) -> bool:
        """Whether a request may read the disk's text of the indexed file `name`: it still resolves to a file the
        walk would read. A file, or a folder on its way, replaced since by a symlink out of the workspace or to an
        ignored or excluded file, with no event to say so (a client without file watchers), was read wherever it
        led. One realpath where nothing is a link, as for nearly every file."""
        path = Path(name)
        if os.path.realpath(path) == name:
            return True
        root = self.root_of(path)
        return root is not None and path.is_symlink() and self._link_readable(path, root) \
            and not self.exclusions.excludes(path, self.folders)

    def _walked(self, root: Path, folder: Path) -> _Ignores | None:
        """The .gitignore files that count in `folder`, a folder of the workspace folder `root`, where the walk goes
        into it (no skipped folder, none ignored on the way from `root`); None where it does not (a folder's event
        then reads nothing under it: `node_modules` created). `folder` is as `normal_path` gives it: no link."""
        relative = folder.relative_to(root).parts
        if any(part in SKIPPED_DIRS or part.endswith(".egg-info") for part in relative):
            return None
        ignores = _Ignores(self._ignores_above(root).specs)
        here = root
        for part in (None, *relative):
            here = here if part is None else here / part
            if part is not None and ignores.ignored(here, is_dir=True):
                return None
            ignores.add(here)
        return ignores

    def update(self, path: Path) -> None:
        """A saved, changed, created or deleted file or folder: index what the disk holds now (what the walk
        would read), or take it out. Runs off the event loop (the server gives it to a thread)."""
        path = normal_path(Path(os.path.abspath(path)))
        if path.name == IGNORE_FILE:
            self._ignores_changed(path.parent)
            return
        if path.is_dir() or not path.exists():  # a folder, or something deleted: whatever lay under it goes
            self._take_out([path])
            root = self.root_of(path)
            ignores = self._walked(root, path) if root is not None and path.is_dir() and not path.is_symlink() \
                else None
            if root is not None and ignores is not None:  # the .gitignore files above the folder count too
                for found in self._walk(path, root, ignores):
                    self._index_file(found)
            return
        if self.readable(path) and path.is_file():
            self._index_file(path)
        elif str(path) in self.index.files:
            with self._lock:
                self.index.remove(str(path))
                self.generation += 1

    def _ignores_changed(self, folder: Path) -> None:
        """A .gitignore of `folder` was saved, created or deleted: read again the files it decides on, those under
        `folder` (or, for one above the workspace folders, the folders under it), so that a file it now ignores
        leaves the index, and one it no longer ignores comes in."""
        self._above.clear()
        tops = [folder] if self.root_of(folder) is not None else [root for root in self.roots
                                                                  if root.is_relative_to(folder)]
        for top in tops:
            if top.is_dir():
                self.update(top)

    def _take_out(self, paths: list[Path]) -> None:
        """Take out of the index the files `paths` name and those under them (folders), in one pass over it (a
        file the walk indexes meanwhile is one it read before the event: the disk's state then)."""
        names = {str(path) for path in paths}
        with self._lock:
            indexed = list(self.index.files)
        if len(names) == 1:
            [name] = names
            prefix = name + os.sep
            gone = [path for path in indexed if path.startswith(prefix) or path == name]
        else:
            gone = [path for path in indexed if _named_or_under(path, names)]
        with self._lock:  # the pass, tens of milliseconds for thousands of paths, holds no lookup up
            for name in gone:
                self.index.remove(name)
            if self._building:
                self._changed_while_building.update(gone)
            self.generation += bool(gone)

    def update_all(self, paths: list[Path]) -> None:
        """`update` each of `paths`, the deleted ones all at once: each costs a pass over the index, and a branch
        switch or a build's clean deletes thousands (one the system will not let be looked at costs itself
        alone). A .gitignore saved, created or deleted has its folder read again once, after the other changes, and
        not inside another's read again (a branch switch brings one event per folder that has one). The files read
        again move the generation once, at the end: moved at each, it had every request of a branch switch or of a
        folder read again wait for snippets picked anew (SNIPPETS_WAIT, lsp/repository_lookups.py); a file taken out
        moves it at once, so what is no longer read is not offered meanwhile."""
        deleted, ignores = [], []
        with self._lock:
            self._batched = False
        try:
            for path in paths:
                try:
                    normal = normal_path(Path(os.path.abspath(path)))
                    if normal.name == IGNORE_FILE:
                        ignores.append(normal.parent)
                    elif normal.exists():
                        self.update(normal)
                    else:
                        deleted.append(normal)
                except OSError as exc:
                    log.debug("workspace index: %s not read again (%s)", path, exc)
            if deleted:
                self._take_out(deleted)
            for folder in outermost(ignores):
                self._ignores_changed(folder)
        finally:
            with self._lock:
                self.generation += bool(self._batched)
                self._batched = None

    def edited(self, path: Path, text: str | None) -> None:
        """An open document's unsaved text: index it as the file would read once saved, so the other documents'
        suggestions see a helper the user has just written there (didClose reads the disk again, which drops
        edits never saved). None is a document over `size_limit`, which the index leaves out, as such a file on
        disk. Runs off the event loop; a document whose name the system refuses (too long) is not indexed."""
        try:
            path = normal_path(Path(os.path.abspath(path)))
            if not self.readable(path):
                return
        except OSError as exc:
            log.debug("workspace index: %s not indexed (%s)", path, exc)
            return
        if text is None or len(text) > size_limit(path):  # a character is at least a byte
            self._put(path, None, edit=True)
            return
        if path.name.endswith(NOTEBOOK_SUFFIX):  # a notebook opened as text: its JSON
            text = notebook_code(text)
            if text is None:
                self._put(path, None, edit=True)
                return
        data = text.encode("utf-8", errors="replace")
        self._put(path, file_entry(text) if len(data) <= MAX_FILE_BYTES and "\0" not in text[:8192] else None,
                  edit=True)

    # -- asking -----------------------------------------------------------------------------------
    def snippets(self, uri: str, path: Path | None, before: str, open_text: Callable[[str], str | None],
                 within: tuple[str, ...] | None = None) -> list[Snippet]:
        """Windows of other files (those whose names end in `within`, when given: `context_suffixes`) most like
        the lines above the cursor, kept while those lines and the index stay the same (typing on one line asks
        once)."""
        cached = self.cached(uri, before)
        if cached is not None:
            return cached

        query = identifiers_above(before)
        key = self._key(before)  # the index picked from: a change while the files are read makes the pick stale
        with self._lock:
            best = self.index.best_files(query, str(normal_path(path)) if path else None, SNIPPETS, within)
        found = self.index.windows(best, query, _reader(open_text, self._may_read))  # reads files: outside the lock
        self._memo[uri] = (key, found, frozenset(query))
        return found

    def names_elsewhere(self, path: Path | None, within: tuple[str, ...] | None = None) -> Callable[[str], bool]:
        """Whether a file of the workspace other than `path` (and whose name ends in `within`, when given) holds a
        name (`WorkspaceIndex.uses`); `path` is resolved as the index knows it once, at the first name asked
        about."""
        excluded: str | None = None
        resolved = False

        def uses(name: str) -> bool:
            nonlocal excluded, resolved
            if not resolved:
                excluded, resolved = (str(normal_path(path)) if path else None), True
            with self._lock:
                return self.index.uses(name, excluded, within)

        return uses

    def followers(self, uri: str, path: Path | None, anchor: tuple[str, ...],
                  open_text: Callable[[str], str | None], within: tuple[str, ...] | None = None
                  ) -> list[tuple[str, str]]:
        """The copies of the lines above the cursor (`anchor`, completer/earlier_lines.py `anchor_above`) in the
        other files and the lines after them (`WorkspaceIndex.followers`), kept while those lines and the index
        stay the same. Reads files: run it on a thread."""
        cached = self.cached_followers(uri, anchor)
        if cached is not None:
            return cached
        key = (anchor, self.generation, self.edits)
        with self._lock:
            sites = self.index.follower_sites(anchor, str(normal_path(path)) if path else None, within)
        found = lines_at(sites, anchor, _reader(open_text, self._may_read))  # reads files: outside the lock
        self._followers[uri] = (key, found)
        return found

    def common_first_line(self, path: Path | None, open_text: Callable[[str], str | None],
                          within: tuple[str, ...] | None = None) -> str | None:
        """The line most of the files (those whose names end in `within`, when given) but the document's (`path`,
        as `normal_path` gives it) start with (`WorkspaceIndex.common_first_line`), kept while the index stays the
        same. Reads files: run it on a thread."""
        known, line = self.cached_first_line(path, within)
        if known:
            return line
        key = self._first_line_key(path, within)
        with self._lock:
            holders = self.index.first_line_holders(key[0], within)
        found = first_line_at(holders, _reader(open_text, self._may_read))  # reads files: outside the lock
        self._first_line = (key, found)
        return found

    def cached_first_line(self, path: Path | None, within: tuple[str, ...] | None = None
                          ) -> tuple[bool, str | None]:
        """Whether `common_first_line` was found for this document's path (`normal_path`'s), these files and this
        index, and what it was."""
        known = self._first_line[0] == self._first_line_key(path, within)
        return (True, self._first_line[1]) if known else (False, None)

    def _first_line_key(self, path: Path | None, within: tuple[str, ...] | None) -> tuple:
        """What a found first line holds for: the excluded document's path, as the index names it, the files it
        was counted among, and the index."""
        return (str(path) if path else None, within, self.generation, self.edits)

    def cached_followers(self, uri: str, anchor: tuple[str, ...]) -> list[tuple[str, str]] | None:
        """`followers` for these lines above and this index, if they were found (no work)."""
        memo = self._followers.get(uri)
        return memo[1] if memo is not None and memo[0] == (anchor, self.generation, self.edits) else None

    def forget(self, uri: str) -> None:
        """A document closed: its snippets and followers are not kept."""
        self._memo.pop(uri, None)
        self._followers.pop(uri, None)

    def cached(self, uri: str, before: str) -> list[Snippet] | None:
        """The snippets picked for these lines above the cursor and this index, if they were (no work); or for
        lines above whose names are nearly the same (SAME_QUERY), as after a new line that brings no new name:
        picking them again would take milliseconds of a core from the search for nearly nothing."""
        memo = self._memo.get(uri)
        if memo is None or memo[0][1:] != (self.generation, self.edits):
            return None
        key = self._key(before)
        if memo[0] == key:
            return memo[1]
        query = identifiers_above(before)
        if len(query ^ memo[2]) > (1 - SAME_QUERY) * len(query | memo[2]):
            return None
        self._memo[uri] = (key, memo[1], memo[2])  # they stand for these lines too; drift is measured from the pick
        return memo[1]

    def latest(self, uri: str) -> list[Snippet] | None:
        """The snippets picked last for the document from the index as it is on disk (whatever the lines above
        and the open documents' unsaved texts were then; none once a file changed)."""
        memo = self._memo.get(uri)
        return memo[1] if memo is not None and memo[0][1] == self.generation else None

    def key(self, before: str) -> tuple:
        """What the snippets for a cursor depend on: the lines above it, and the index's generation and edits."""
        return self._key(before)

    def _key(self, before: str) -> tuple:
        head = before[:before.rfind("\n") + 1]
        return head[-4000:], self.generation, self.edits
