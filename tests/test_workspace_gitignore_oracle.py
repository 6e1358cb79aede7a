"""What the workspace index reads, against git itself: a file the user's git ignores must never be read (its lines go
into prompts, and with a remote backend they leave the machine). Random repositories (nested .gitignore files,
info/exclude, core.excludesFile; negations, `**`, character classes with POSIX names, escapes, trailing spaces,
anchors, folders-only patterns; names with spaces, brackets, non-ASCII letters) are walked by the index and listed by
`git ls-files --others --exclude-standard`, and the two lists must be the same; then named cases for what differed."""
from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lsp.exclusions import Exclusions
from lsp.rawclient import RawClient
from lsp_support import SERVER_CMD, server_env
from lsp.workspace import WorkspaceFiles, language_suffixes

SEED = 20261130
PYTHON = language_suffixes(("python",))
TREES = 100
POSIX_NAMES = sys.platform != "win32"  # names Windows refuses (a trailing space, a backslash, `*`) only elsewhere
NAME_STEMS = ["a", "b", "A", "ab", "ba", "a1", "1", "12", "_", "-", "é", "ä", "x y", "[ab]", "#c", "!d", ".hid",
              ".A", "]", "^", "a-b", "a.b", "B", "z", "~"] + (["a ", "a\\b", " a", "q?", "s*"] if POSIX_NAMES else [])
DIR_NAMES = ["a", "b", "A", "ab", "sub", "1", "é", "x y", "[ab]", ".d", "a.py", "Sub"]
ATOMS = ["a", "b", "A", "ab", "1", "é", "x y", "x\\ y", "#c", "\\#c", "!d", "\\!d", ".hid", ".*", "*", "**", "?",
         "??", "a*", "*b", "a?", "[ab]", "[!a]", "[^a]", "[a-c]", "[A-Z]", "[z-a]", "[]]", "[!]]", "[\\]]", "[a\\]b]",
         "[a\\-z]", "[[:digit:]]", "[[:alpha:]]", "[[:alnum:]]", "[[:upper:]]", "[[:lower:]]", "[[:punct:]]",
         "[[:xdigit:]]", "[[:space:]]", "[[:print:]]", "[[:graph:]]", "[[:alpha:][:digit:]]", "[a[:digit:]]",
         "[[:digit:]-z]", "[[:foo:]]", "[[:digit]]", "[[]", "[", "\\[ab]", "\\*", "\\?", "[é]", "[!é]", "a\\b",
         "\\a", "sub", "Sub", "a.py", "*.py", "*.PY", "[[:digit:]]*", "[!a]*", "a ", "a\\ ", "[-a]", "[a-]", "]",
         "^", "~", "\\\\", "a**", "**b", "***", "", "\\/", "[\\a-\\c]", "[a-\\]]", "[]-a]", "[!]-a]", "[[:digit:]-a]",
         "[a-[:digit:]]", "[--0]", "[!-]", "[b-a]b", "!a", "\\ ", "a\\", "[[:upper:][:punct:]]"]
SUFFIXES = ["", ".py", "*", "?py", ".p[xy]", ".[[:alpha:]]y"]


def _git(root: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, check=True).stdout


@pytest.fixture(autouse=True)
def _own_git_config(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No user's or system's git configuration (an excludes file of theirs) in what git or the index reads."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)
    monkeypatch.delenv("GIT_DIR", raising=False)


def _pattern(rng: random.Random) -> str:
    """One random .gitignore line, built as a user might write one (or mistype one)."""
    parts = [rng.choice(ATOMS) + (rng.choice(SUFFIXES) if rng.random() < 0.4 else "")
             for _ in range(rng.choice([1, 1, 1, 2, 2, 3]))]
    line = "/".join(parts)
    if rng.random() < 0.2:
        line = "/" + line
    if rng.random() < 0.15:
        line = "**/" + line
    if rng.random() < 0.1:
        line += "/**"
    if rng.random() < 0.25:
        line += "/"
    if rng.random() < 0.3:
        line = "!" + line
    if rng.random() < 0.1:
        line += rng.choice([" ", "  ", "\\ ", "\\  ", " \\ "])
    return line


def _tree(rng: random.Random, root: Path) -> list[str]:
    """Random folders and .py files under `root`, and .gitignore files among them: the files' relative paths."""
    folders = [""]
    for _ in range(rng.randint(2, 7)):
        parent = rng.choice(folders)
        folders.append(f"{parent}/{rng.choice(DIR_NAMES)}".lstrip("/"))
    folders = sorted(set(folders))
    files = []
    for _ in range(rng.randint(6, 22)):
        stem = rng.choice(NAME_STEMS)
        files.append(f"{rng.choice(folders)}/{stem}{rng.choice(['.py', '.py', '.PY', '.pyi'])}".lstrip("/"))
    for folder in rng.sample(folders, k=min(len(folders), rng.randint(1, 3))):
        lines = [_pattern(rng) if rng.random() < 0.85 else rng.choice(["# a comment", "", "   ", "#*.py"])
                 for _ in range(rng.randint(1, 6))]
        files.append(f"{folder}/.gitignore".lstrip("/"))
        (root / folder).mkdir(parents=True, exist_ok=True)
        (root / folder / ".gitignore").write_bytes(rng.choice(["\n", "\r\n"]).join(lines).encode() + b"\n")
    files = [name for name in files if name not in folders]  # a folder named `a.py` is no file
    for folder in folders:
        (root / folder).mkdir(parents=True, exist_ok=True)
    for name in files:
        if not name.endswith(".gitignore"):
            (root / name).write_text(f"NAME_{len(name)} = 1\n")
    for number in range(rng.choice([0, 0, 1, 2]) if POSIX_NAMES else 0):  # Windows makes links for admins only
        link = root / rng.choice(folders) / f"link{number}.py"
        if not link.exists():
            link.symlink_to(os.path.relpath(root / rng.choice(files + folders), link.parent))
    return sorted(set(files))


def _git_keeps(root: Path, top: Path) -> set[str]:
    """The files under `top` that git does not ignore in the repository `root`, relative to `top`."""
    listed = _git(root, "ls-files", "-z", "--others", "--cached", "--exclude-standard", "--", top.relative_to(root)
                  .as_posix() or ".")
    prefix = "" if top == root else top.relative_to(root).as_posix() + "/"
    return {name[len(prefix):] for name in os.fsdecode(listed).split("\0") if name}


def _index_reads(top: Path, exclusions: Exclusions | None = None) -> tuple[set[str], set[str]]:
    """What the index of the workspace folder `top` reads: by its walk, and by an event for each file (`readable`);
    an event for each of its folders (`update`, a folder created or renamed) reads what the walk reads there."""
    files = WorkspaceFiles(8, ("python",), exclusions=exclusions)
    files.roots, files.folders = [top], [top]
    walked = {path.relative_to(top).as_posix() for path in files._walk(top, top)}
    every = [path for path in top.rglob("*") if path.is_file() and ".git" not in path.relative_to(top).parts]
    evented = {path.relative_to(top).as_posix() for path in every if files.readable(path)}
    folders = [path for path in top.iterdir() if path.is_dir() and not path.is_symlink() and path.name != ".git"]
    for folder in folders:
        files.update(folder)
    by_folders = {Path(name).relative_to(top).as_posix() for name in files.index.files}
    under = {name for name in walked if any(name.startswith(f"{folder.name}/") for folder in folders)}
    assert by_folders == under, f"{top}: folder events read {sorted(by_folders ^ under)} otherwise than the walk"
    return walked, evented


def _repository(tmp_path: Path, rng: random.Random, index: int) -> tuple[Path, list[str]]:
    root = (tmp_path / f"r{index}").resolve()
    root.mkdir()
    _git(root, "init", "-q")
    names = _tree(rng, root)
    if rng.random() < 0.3:
        (root / ".git" / "info").mkdir(exist_ok=True)
        (root / ".git" / "info" / "exclude").write_text("\n".join(_pattern(rng) for _ in range(2)) + "\n")
    if rng.random() < 0.2:
        excludes = tmp_path / f"excludes{index}"
        excludes.write_text("\n".join(_pattern(rng) for _ in range(2)) + "\n")
        _git(root, "config", "core.excludesFile", str(excludes))
    if rng.random() < 0.15:  # as git init sets it on macOS and Windows
        _git(root, "config", "core.ignoreCase", "true")
    return root, names


def _differ(top: Path, every: set[str], walked: set[str], evented: set[str]) -> bool:
    """Whether the walk or the events read otherwise than git keeps (`every` file it keeps under `top`): the same
    files but symlinks, of which those read must be links to files git keeps (`_links_read_what_git_keeps`)."""
    kept = {name for name in every if name.endswith(PYTHON)}
    links = {path.relative_to(top).as_posix() for path in top.rglob("link*.py") if path.is_symlink()}
    return walked - links != kept - links or evented - links != kept - links \
        or not _links_read_what_git_keeps(top, walked | evented, links, every)


def _links_read_what_git_keeps(top: Path, read: set[str], links: set[str], kept: set[str]) -> bool:
    """Whether each symlink read is one git keeps (`kept`: every file, whatever its name), to a file git keeps: git
    keeps a link, never the text of an ignored file it names, and the index reads that text. The index may pass over
    more links (one to a folder, one to an ignored file)."""
    for link in read & links:
        target = (top / link).resolve()
        if link not in kept or not target.is_relative_to(top) or target.relative_to(top).as_posix() not in kept:
            return False
    return True


def _reached(root: Path, top: Path) -> bool:
    """Whether git goes into the folder `top` (no folder on the way to it is ignored): a workspace folder that its
    repository ignores is read by its own .gitignore files only (`_Ignores.above`), as it is no part of it."""
    on_way = [top, *top.parents[:len(top.relative_to(root).parts) - 1]] if top != root else []
    asked = b"".join(os.fsencode(folder.relative_to(root).as_posix()) + b"\0" for folder in on_way)
    return not asked or not subprocess.run(["git", "-C", str(root), "check-ignore", "-z", "--stdin"], input=asked,
                                           capture_output=True).stdout


def test_the_index_reads_exactly_what_git_keeps_in_random_repositories(tmp_path: Path):
    """Each random repository, walked from its top and from a subfolder (`_Ignores.above`): what the index reads is
    what git lists, no more (a file git ignores, read and sent) and no fewer."""
    rng = random.Random(SEED)
    differences = []
    for index in range(TREES):
        root, names = _repository(tmp_path, rng, index)
        folders = sorted({str(Path(name).parent) for name in names} - {"."})
        for top in [root] + ([root / rng.choice(folders)] if folders else []):
            if not top.is_dir() or not _reached(root, top):
                continue
            every = _git_keeps(root, top)
            kept = {name for name in every if name.endswith(PYTHON)}
            walked, evented = _index_reads(top)
            if _differ(top, every, walked, evented):
                differences.append(_described(root, top, kept, walked, evented))
    assert not differences, "\n\n".join(differences[:8]) + f"\n\n{len(differences)} trees differ"


def test_exclude_files_leaves_alone_exactly_what_git_would_ignore_in_random_trees(tmp_path: Path):
    """excludeFiles takes .gitignore lines, letters matching in either case: the walk and the events leave alone what
    git, with the lines as the repository's info/exclude and core.ignoreCase, ignores."""
    rng = random.Random(SEED + 1)
    differences = []
    for index in range(TREES // 2):
        root = (tmp_path / f"x{index}").resolve()
        root.mkdir()
        _git(root, "init", "-q")
        _git(root, "config", "core.ignoreCase", "true")
        _tree(rng, root)
        for ignore in root.rglob(".gitignore"):
            ignore.unlink()
        lines = [_pattern(rng) for _ in range(rng.randint(1, 5))]
        (root / ".git" / "info" / "exclude").write_bytes("\n".join(lines).encode() + b"\n")
        every = _git_keeps(root, root)
        kept = {name for name in every if name.endswith(PYTHON)}
        walked, evented = _index_reads(root, Exclusions(lines))
        if _differ(root, every, walked, evented):
            differences.append(f"excludeFiles {lines!r}\n  read, git ignores: {sorted((walked | evented) - kept)}"
                               f"\n  git keeps, not read: {sorted(kept - (walked & evented))}")
    assert not differences, "\n\n".join(differences[:8]) + f"\n\n{len(differences)} trees differ"


def _described(root: Path, top: Path, kept: set[str], walked: set[str], evented: set[str]) -> str:
    """A difference as a reproduction: the files of patterns, git's settings, and what each side reads."""
    ignores = {path.relative_to(root).as_posix(): path.read_text() for path in sorted(root.rglob(".gitignore"))}
    info = root / ".git" / "info" / "exclude"
    settings = [line for line in os.fsdecode(_git(root, "config", "--local", "-l")).splitlines()
                if line.startswith(("core.excludesfile", "core.ignorecase"))]
    excludes = [Path(line.split("=", 1)[1]).read_text() for line in settings if line.startswith("core.excludesfile")]
    return (f"top {top.relative_to(root).as_posix() or '.'}; ignores {ignores!r}; "
            f"info/exclude {info.read_text() if info.exists() else ''!r}; settings {settings} {excludes}\n"
            f"  read, git ignores: walk {sorted(walked - kept)} events {sorted(evented - kept)}\n"
            f"  git keeps, not read: walk {sorted(kept - walked)} events {sorted(kept - evented)}")


def _case(tmp_path: Path, ignores: dict[str, str], files: list[str], **config: str) -> tuple[set[str], set[str]]:
    """A repository of `files` and the files of patterns `ignores` (path: text) with git `config`: what git keeps
    of its Python files, and what the index reads (its walk and its events agreeing)."""
    root = tmp_path.resolve()
    _git(root, "init", "-q")
    for key, value in config.items():
        _git(root, "config", key, value)
    for name, text in ignores.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(text.encode())
    for name in files:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(f"NAME_{len(name)} = 1\n")
    walked, evented = _index_reads(root)
    assert walked == evented
    return {name for name in _git_keeps(root, root) if name.endswith(PYTHON)}, walked


@pytest.mark.parametrize("ignores, files, ignored", [
    ({".gitignore": "secret_[[:digit:]].py\n"}, ["secret_1.py", "secret_a.py"], {"secret_1.py"}),
    ({".gitignore": "[[:upper:]]*.py\n"}, ["Draft.py", "main.py"], {"Draft.py"}),
    ({".gitignore": "notes[\\-_]private.py\n"}, ["notes-private.py", "notes_private.py", "notes.py"],
     {"notes-private.py", "notes_private.py"}),
    ({".gitignore": "*.py\n!?.py\n"}, ["a.py", "é.py"], {"é.py"}),
] + ([({".gitignore": "cache \\  \n"}, ["cache  /x.py", "cache/x.py"], {"cache  /x.py"})] if POSIX_NAMES else []))
def test_forms_a_near_reading_of_git_gets_wrong_ignore_what_git_ignores(tmp_path: Path, ignores: dict[str, str],
                                                                        files: list[str], ignored: set[str]):
    """Forms a near reading of git's rules gets wrong, each a file git ignores that would be read: POSIX classes
    (`[[:digit:]]` matching nothing), a backslash in a bracket (taken as itself, so `[\\-_]` a range without `-`),
    `?` against a name's bytes (`é` is two: `!?.py` taking back what `*.py` ignores), and an escaped space before a
    trailing one (a line refused, so ignoring nothing)."""
    kept, read = _case(tmp_path, ignores, files)
    assert not ignored & kept, "the case is not what git ignores"
    assert read == kept and not ignored & read


def test_core_ignore_case_ignores_a_file_named_in_the_other_case(tmp_path: Path):
    """With core.ignoreCase (git init sets it on macOS and Windows), `Secrets.py` ignores `secrets.py`, and the
    index read it; and git's `[^a]` holds no `A` then, so `!` takes nothing back that way."""
    kept, read = _case(tmp_path, {".gitignore": "Secrets.py\n*/\n![^a]/\n"}, ["secrets.py", "A/x.py", "b/x.py"],
                       **{"core.ignoreCase": "true"})
    assert kept == read == {"b/x.py"}


def test_a_workspace_folder_below_one_whose_own_patterns_name_dot_keeps_the_patterns_above(tmp_path: Path):
    """A workspace folder opened inside a repository (`app/web`) whose folder on the way holds a .gitignore with `.*`
    (dotfiles) or `*`: that pattern was asked of the folder itself, as `.`, which it matched; the folder was then
    taken for ignored, and every .gitignore above the workspace folder dropped: the top's `secrets.py` was read."""
    root = tmp_path.resolve()
    _git(root, "init", "-q")
    (root / ".gitignore").write_text("secrets.py\n")
    (root / "app" / "web").mkdir(parents=True)
    (root / "app" / ".gitignore").write_text(".*\n!.gitignore\n")
    for name in ("app/web/secrets.py", "app/web/main.py"):
        (root / name).write_text("NAME = 1\n")
    walked, evented = _index_reads(root / "app" / "web")
    assert walked == evented == {"main.py"} == _git_keeps(root, root / "app" / "web") - {".gitignore"}


def test_lines_are_split_as_git_splits_them(tmp_path: Path):
    """git splits a .gitignore at `\\n` only, dropping a `\\r` before it: a form feed or a lone `\\r` is part of a
    pattern (splitlines cut `*\\x0c!keep.py` in two, a `!keep.py` git never reads), and a CRLF file reads as its
    lines."""
    kept, read = _case(tmp_path, {".gitignore": "*.py\r\n!keep*.py\r\n!a\x0c*.py\n", "sub/.gitignore": "x\r!*.py\n"},
                       ["keep.py", "drop.py", "sub/x.py", "sub/keepme.py"])
    assert kept == read == {"keep.py", "sub/keepme.py"}


def test_the_server_reads_no_file_a_posix_class_ignores_or_excludes(tmp_path: Path):
    """Through the real server: a .gitignore's `draft_[[:digit:]].py` and an excludeFiles `secret_[[:digit:]].py`
    (a POSIX class) leave `draft_1.py` out of the index and `secret_1.py` alone."""
    root = tmp_path.resolve()
    _git(root, "init", "-q")
    (root / ".gitignore").write_text("draft_[[:digit:]].py\n")
    for name in ("main.py", "draft_1.py", "draft_x.py", "secret_1.py"):
        (root / name).write_text(f"NAME_{name[:-3]} = 1\n")
    with RawClient(SERVER_CMD, env=server_env()) as client:
        client.request("initialize", {"processId": os.getpid(), "rootUri": root.as_uri(), "capabilities": {},
                                      "initializationOptions": {"completer": {
                                          "excludeFiles": ["secret_[[:digit:]].py"], "workspaceContext": True}}})
        client.notify("initialized", {})
        deadline = time.monotonic() + 30
        while (index := client.request("completer/info")["result"]["server"].get("workspace_index") or {}) \
                .get("building", True):
            assert time.monotonic() < deadline, index
            time.sleep(0.05)
        assert index["files"] == 2  # main.py and draft_x.py
        excluded = client.request("completer/fileInfo", {"uri": (root / "secret_1.py").as_uri()})["result"]
        assert excluded["excluded"] == "secret_[[:digit:]].py"


def test_a_nested_repository_leaves_its_outer_repository_its_own_case_setting(tmp_path: Path):
    """The walk took core.ignoreCase from the last repository top it met: after a nested repository without it
    (one a tool made), the outer one's later .gitignore files matched in one case only, and with the outer's
    core.ignoreCase (macOS) `z/.gitignore`'s `Secret.py` no longer ignored `z/secret.py`, which git ignores."""
    kept, read = _case(tmp_path, {"z/.gitignore": "Secret.py\n"}, ["a.py", "z/secret.py", "z/main.py"],
                       **{"core.ignoreCase": "true"})
    inner = tmp_path.resolve() / "inner"
    inner.mkdir()
    _git(inner, "init", "-q")
    _git(inner, "config", "core.ignoreCase", "false")
    (inner / "lib.py").write_text("NAME_lib = 1\n")
    walked, evented = _index_reads(tmp_path.resolve())
    assert kept == {"a.py", "z/main.py"}
    assert walked == evented == kept | {"inner/lib.py"}  # a nested repository's files are the project's too


def test_on_macos_a_decomposed_name_matches_a_composed_pattern(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """git on macOS reads names composed (core.precomposeUnicode): HFS+ gives `café.py` decomposed, and a `café.py`
    pattern typed composed ignores it there; the index, matching the decomposed bytes, read it."""
    from lsp import gitignore

    monkeypatch.setattr(gitignore, "PRECOMPOSED", True)
    root = tmp_path.resolve()
    (root / ".gitignore").write_text("caf\u00e9.py\n")
    (root / "cafe\u0301.py").write_text("NAME_cafe = 1\n")
    (root / "main.py").write_text("NAME_main = 1\n")
    assert _index_reads(root) == ({"main.py"}, {"main.py"})
    assert Exclusions(["caf\u00e9.py"]).excludes(root / "cafe\u0301.py", [root])


def test_an_exclude_files_line_git_reads_as_matching_nothing_is_named_and_a_class_is_not():
    """An unclosed bracket or an unknown class (`[[:digits:]]`) matches nothing in git, a typo the user is told of
    (with the defaults kept beside the other lines, `check_patterns`); a POSIX class, and an escaped space before a
    trailing one, are patterns."""
    from lsp.exclusions import unusable_patterns

    assert unusable_patterns(["[a", "key[[:digits:]].pem", "key[[:digit:]].pem", "cache \\  ", "a.py"]) \
        == ["[a", "key[[:digits:]].pem"]


def test_a_line_ends_at_a_nul_as_git_reads_it(tmp_path: Path):
    """git reads a .gitignore line as a C string: `secret.py` then a NUL and junk ignores `secret.py`, which the
    index, matching the whole line, read."""
    kept, read = _case(tmp_path, {".gitignore": "secret.py\0junk\n\0main.py\n"}, ["secret.py", "main.py"])
    assert kept == read == {"main.py"}


def test_a_line_of_many_stars_does_not_hold_the_index_against_a_long_name(tmp_path: Path):
    """A .gitignore line such as `*a*a*a*a*a*a*a*a*a*a*b` (a cloned repository's, mistyped or hostile) against a long
    name took minutes of backtracking in the regular expression, holding the server's interpreter and so every
    keystroke. (git itself backtracks there as long, so its answer is not asked: the files it would ignore are
    named.)"""
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    lines = ["*" + "a*" * 12 + "b.py", "/x/" + "*a" * 12 + "*b.py"]
    (root / ".gitignore").write_text("\n".join(lines) + "\n")
    names = ["a" * 120 + ".py", "a" * 119 + "b.py", "x/" + "a" * 120 + ".py", "x/" + "a" * 119 + "b.py"]
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("x = 1\n")
    started = time.monotonic()
    walked, _ = _index_reads(root)
    assert time.monotonic() - started < 30  # minutes before
    assert walked == {"a" * 120 + ".py", "x/" + "a" * 120 + ".py"}
