#!/usr/bin/env bash
# Install everything the tests need on a fresh machine, then run the whole suite (Python, LSP with
# real clients, Neovim, the VS Code extension's Node tests, VS Code itself end to end). .ci/run calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian's packages for what pip cannot install: Neovim, Emacs with eglot and lsp-mode, and Vim with ALE, for the
# headless-editor tests, node and npm for the extension's tests. Under CI=true a test that still finds one missing
# fails (tests/conftest.py).
missing=()
command -v nvim >/dev/null 2>&1 || missing+=(neovim)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
# eglot is built into Emacs 29+; for Emacs 28 it is Debian's elpa-eglot (tests/test_lsp_emacs.py loads either).
# lsp-mode is Debian's elpa-lsp-mode, which brings its elpa-* dependencies (tests/test_lsp_emacs_lsp_mode.py).
# Emacs without its recommends: they are a mail system (mailutils, exim4).
emacs_has() {
    emacs --batch -Q --eval "(progn (add-to-list 'package-directory-list \"/usr/share/emacs/site-lisp/elpa\")
                                    (package-initialize) (require '$1))" >/dev/null 2>&1
}
emacs_missing=()
command -v emacs >/dev/null 2>&1 || emacs_missing+=(emacs-nox)
emacs_has eglot || emacs_missing+=(elpa-eglot)
emacs_has lsp-mode || emacs_missing+=(elpa-lsp-mode)
# Vim with jobs and timers (vim-nox; vim-tiny has neither) and Debian's ALE, which `packadd ale` loads
# (tests/test_lsp_vim_ale.py).
vim_missing=()
vim -N -u NONE -i NONE -es -c "if !has('job') || !has('timers') | cquit | endif" -c "qall!" >/dev/null 2>&1 \
    || vim_missing+=(vim-nox)
vim -N -u NONE -i NONE -es -c "packadd ale" -c "call ale#linter#GetAll(['python'])" -c "qall!" >/dev/null 2>&1 \
    || vim_missing+=(vim-ale)
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
if [ ${#missing[@]} -gt 0 ]; then
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
apt_updated=$([ ${#missing[@]} -gt 0 ] && echo true || echo false)
# Emacs and Vim are for three tests: where apt cannot install them (no sudo, no mirror, not Debian), those tests say
# why and the rest of the suite runs. optional_install "TESTS say(s) why" PACKAGE...
optional_install() {
    local why=$1
    shift
    { { $apt_updated || $SUDO apt-get update -qq; } && apt_updated=true \
        && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null; } \
        || echo "test.sh: $* did not install; $why" >&2
}
if [ ${#emacs_missing[@]} -gt 0 ]; then
    optional_install "tests/test_lsp_emacs.py and tests/test_lsp_emacs_lsp_mode.py say why" "${emacs_missing[@]}"
fi
if [ ${#vim_missing[@]} -gt 0 ]; then
    optional_install "tests/test_lsp_vim_ale.py says why" "${vim_missing[@]}"
fi
# The test extras build llama.cpp from source (llama-cpp-python has no wheels on PyPI), which needs a C++ compiler
# (Debian's g++ brings gcc; CMake and Ninja come from PyPI). Without one, pip stops with CMake's error, unless its
# wheel cache already holds the build.
command -v g++ >/dev/null 2>&1 \
    || optional_install "pip cannot build llama-cpp-python, which the test extras need, without it" g++
source scripts/env.sh
choose_python  # a venv where the system Python is externally managed
"$PY" -m pip install -q -e ".[test]"
(cd vscode-extension && npm ci --no-audit --no-fund --loglevel=error)
# The VS Code end-to-end test's tools: Debian's chromium, code-server and playwright-core (pinned in
# tests/vscode_e2e/package-lock.json), cached in ~/.cache/completer-e2e; about 40 s the first time.
bash scripts/install_vscode_e2e.sh >/dev/null \
    || echo "test.sh: the VS Code end-to-end tools did not install; tests/test_vscode_e2e.py says why" >&2
exec "$PY" -m pytest -q -rs "$@"
