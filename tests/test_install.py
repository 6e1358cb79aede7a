"""A non-editable install finds the embedded model wherever pip put its data files: a wheel installed with
`--user` (data under the user base) and into a venv of its own (pipx's layout), each in a temp dir."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PROBE = ("import json, completer, completer.bundle as b; "
         "print(json.dumps({'package': completer.__file__, 'bundle': str(b.load_bundle().path)}))")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's wheel, built from a copy of the files it packages (the build leaves the checkout alone)."""
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    for package in ("completer", "lsp"):
        shutil.copytree(REPO / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    for bundle in ("python-small", "python-base"):
        (source / "models" / bundle).mkdir(parents=True)
        for path in (REPO / "models" / bundle).iterdir():  # the bundle's files; its training/ stays behind
            if path.is_file():
                shutil.copy(path, source / "models" / bundle / path.name)
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out),
                    str(source)], check=True, timeout=600)
    return next(out.glob("completer-*.whl"))


def _probe(python: str, cwd: Path, env: dict[str, str]) -> dict:
    done = subprocess.run([python, "-c", PROBE], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "COMPLETER_MODEL", "PYTHONUSERBASE", "VIRTUAL_ENV", "COMPLETER_VENV")}
    env.update(extra)
    return env


def test_a_user_install_finds_its_model_under_the_user_base(wheel: Path, tmp_path: Path):
    """Inside a venv, which scripts/env.sh makes where the system's Python is externally managed, pip refuses
    `--user` (a venv sees no user site): the install is then made for a venv of this interpreter's base that sees
    the system's site-packages, as a user site needs, with this interpreter's packages on PYTHONPATH."""
    python, env = sys.executable, _clean_env(PYTHONUSERBASE=str(tmp_path / "user"))
    if sys.prefix != sys.base_prefix:
        base = tmp_path / "base"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(base)],
                       check=True, timeout=120)
        python, env["PYTHONPATH"] = str(base / "bin" / "python"), sysconfig.get_paths()["purelib"]
    subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--user", "--no-deps",
                    "--no-index", "--no-warn-script-location", str(wheel)], env=env, check=True, timeout=600)
    found = _probe(python, tmp_path, env)
    assert found["package"].startswith(str(tmp_path / "user")), found  # the installed copy, not the checkout
    assert found["bundle"] == str(tmp_path / "user" / "share" / "completer" / "models" / "python-small")


def test_a_venv_of_its_own_finds_its_model_under_its_prefix(wheel: Path, tmp_path: Path):
    """pipx's layout: the package in a venv without the system's site-packages. Its dependencies come from this
    interpreter's site-packages on PYTHONPATH (no download), where the checkout's editable install is inert."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", "--no-index",
                    str(wheel)], check=True, timeout=600)
    env = _clean_env(PYTHONPATH=sysconfig.get_paths()["purelib"])
    found = _probe(python, tmp_path, env)
    assert found["package"].startswith(str(venv)), found
    assert found["bundle"] == str(venv / "share" / "completer" / "models" / "python-small")
    demo = subprocess.run([str(venv / "bin" / "completer"), "info"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert demo.returncode == 0 and str(venv) in demo.stdout, demo.stderr


def _chosen_prefix(env: dict[str, str]) -> str:
    done = subprocess.run(["bash", "-c", 'source scripts/env.sh && choose_python && "$PY" -c "import sys; print(sys.prefix)"'],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_install_commands_take_a_python_of_3_11_or_newer_when_python3_is_older(tmp_path: Path):
    """Ubuntu 22.04's python3 is 3.10, which onnxruntime 1.32 has no wheels for: a newer python3.1x on PATH is
    taken instead, and with none the commands stop with one line that says what is needed."""
    older = tmp_path / "python3"  # a Python 3.10 as far as env.sh asks: its version, and older than 3.11
    older.write_text('#!/bin/sh\n[ "$1" = -V ] && echo "Python 3.10.12" && exit 0\nexit 1\n')
    older.chmod(0o755)
    (tmp_path / f"python3.{sys.version_info.minor}").symlink_to(sys.executable)
    bash, only = shutil.which("bash") or "/bin/bash", _clean_env(PATH=str(tmp_path))  # no other Python on PATH
    venv = _clean_env(PATH=str(tmp_path), COMPLETER_VENV=str(tmp_path / "venv"))  # never ./.venv in the checkout
    chosen = subprocess.run([bash, "-c", 'source scripts/env.sh && choose_python && "$PY" -c "import sys; '
                             'print(sys.version_info[:2])"'], cwd=REPO, env=venv, capture_output=True, text=True,
                            timeout=120)
    assert chosen.returncode == 0 and chosen.stdout.strip() == str(tuple(sys.version_info[:2])), chosen.stderr
    (tmp_path / f"python3.{sys.version_info.minor}").unlink()
    refused = subprocess.run([bash, "-c", "source scripts/env.sh && choose_python"], cwd=REPO, env=only,
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 1 and "needs Python 3.11 or newer (python3 is Python 3.10" in refused.stderr


def test_the_install_commands_choose_a_venv_of_their_own_or_the_active_one(tmp_path: Path):
    """scripts/demo.sh and scripts/test.sh (the README's two commands) install into the Python env.sh picks."""
    venv = tmp_path / "venv"
    assert _chosen_prefix(_clean_env(COMPLETER_VENV=str(venv))) == str(venv)  # created on first use
    assert (venv / "bin" / "python").exists()
    active = _clean_env(COMPLETER_VENV=str(venv), VIRTUAL_ENV="/somewhere")  # an active venv wins: its python3
    assert _chosen_prefix(active) == subprocess.run(
        ["python3", "-c", "import sys; print(sys.prefix)"], capture_output=True, text=True).stdout.strip()


def _stub(folder: Path, name: str, script: str) -> None:
    (folder / name).write_text(f"#!/bin/sh\n{script}\n")
    (folder / name).chmod(0o755)


def test_test_sh_runs_the_suite_where_emacs_and_vim_cannot_be_installed(tmp_path: Path):
    """scripts/test.sh on a machine with Neovim, node and npm but no Emacs and no Vim, where apt cannot install them
    (no sudo, no mirror, not Debian): it names Emacs with both clients and Vim with ALE as missing, the tests that
    need them say why, and the rest of the suite runs, as before Emacs and Vim were added."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "dirname", "id", "cat"):  # no emacs and no vim among them
        (bin_dir / tool).symlink_to(shutil.which(tool) or f"/bin/{tool}")
    for tool in ("nvim", "node", "npm"):
        _stub(bin_dir, tool, "exit 0")
    _stub(bin_dir, "apt-get", 'echo "E: apt-get cannot reach its mirrors" >&2; exit 100')
    _stub(bin_dir, "sudo", '"$@"')
    _stub(bin_dir, "python3", 'echo "python3 $*"')  # the active venv's: pip install, then pytest
    env = {**_clean_env(PATH=str(bin_dir), VIRTUAL_ENV=str(tmp_path / "venv")), "HOME": str(tmp_path)}
    done = subprocess.run([str(bin_dir / "bash"), str(REPO / "scripts" / "test.sh"), "-k", "nothing"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert ("emacs-nox elpa-eglot elpa-lsp-mode did not install; tests/test_lsp_emacs.py and "
            "tests/test_lsp_emacs_lsp_mode.py say why") in done.stderr
    assert "vim-nox vim-ale did not install; tests/test_lsp_vim_ale.py says why" in done.stderr
    assert done.stdout.strip().splitlines()[-1] == "python3 -m pytest -q -rs -k nothing", done.stdout


def test_test_sh_installs_a_cpp_compiler_before_the_test_extras_build_llama_cpp(tmp_path: Path):
    """On a fresh Debian or Ubuntu (no g++), scripts/test.sh asks apt for g++ before pip installs the test extras:
    llama-cpp-python is built from source there, and CMake stops without a C++ compiler."""
    bin_dir, log = tmp_path / "bin", tmp_path / "calls.log"
    bin_dir.mkdir()
    for tool in ("bash", "dirname", "id", "cat"):  # no g++ among them
        (bin_dir / tool).symlink_to(shutil.which(tool) or f"/bin/{tool}")
    for tool in ("nvim", "node", "npm", "emacs", "vim"):  # the editors are there: only g++ is missing
        _stub(bin_dir, tool, "exit 0")
    _stub(bin_dir, "apt-get", f'echo "apt-get $*" >> {log}')
    _stub(bin_dir, "sudo", '"$@"')
    _stub(bin_dir, "python3", f'echo "python3 $*" >> {log}')
    env = {**_clean_env(PATH=str(bin_dir), VIRTUAL_ENV=str(tmp_path / "venv")), "HOME": str(tmp_path)}
    done = subprocess.run([str(bin_dir / "bash"), str(REPO / "scripts" / "test.sh"), "-k", "nothing"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    calls = log.read_text().splitlines()
    installs = [i for i, call in enumerate(calls) if call.startswith("apt-get install") and " g++" in call]
    pip = [i for i, call in enumerate(calls) if call.startswith("python3 -m pip install")]
    assert installs and pip and installs[0] < pip[0], calls


def test_the_demo_names_the_command_a_user_install_put_in_the_user_base(wheel: Path, tmp_path: Path):
    """scripts/demo.sh ends by naming the `completer` command. Where pip falls back to a user install (a system Python
    whose site-packages the user cannot write, not externally managed), the command is in the user base's bin/, not
    beside the interpreter, where the demo said it was."""
    python = sys.executable
    if sys.prefix != sys.base_prefix:  # pip refuses --user inside a venv: a venv of the base that sees user sites
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(tmp_path / "base")],
                       check=True, timeout=120)
        python = str(tmp_path / "base" / "bin" / "python")
    env = _clean_env(PYTHONUSERBASE=str(tmp_path / "user"))
    subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--user", "--no-deps",
                    "--no-index", "--no-warn-script-location", str(wheel)], env=env, check=True, timeout=600)
    done = subprocess.run([python, str(REPO / "scripts" / "installed_command.py")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    command = tmp_path / "user" / "bin" / "completer"
    assert command.is_file() and done.stdout == f"The completer command is {command}\n", done.stdout
