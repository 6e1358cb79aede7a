#!/usr/bin/env bash
# Install everything the tests need on a fresh machine, then run the whole suite (Python, LSP with
# real clients, Neovim, the VS Code extension's Node tests, VS Code itself end to end). .ci/run calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian's packages for what pip cannot install: Neovim, and Emacs with eglot and lsp-mode, for the headless-editor
# tests, node and npm for the extension's tests. Under CI=true a test that still finds one missing fails
# (tests/conftest.py).
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
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
if [ ${#missing[@]} -gt 0 ]; then
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# Emacs is for two tests: where apt cannot install it (no sudo, no mirror, not Debian), the rest of the suite runs.
if [ ${#emacs_missing[@]} -gt 0 ]; then
    { { [ ${#missing[@]} -gt 0 ] || $SUDO apt-get update -qq; } \
        && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${emacs_missing[@]}" \
        >/dev/null; } || echo "test.sh: ${emacs_missing[*]} did not install; tests/test_lsp_emacs.py and" \
                              "tests/test_lsp_emacs_lsp_mode.py say why" >&2
fi
source scripts/env.sh
choose_python  # a venv where the system Python is externally managed
"$PY" -m pip install -q -e ".[test]"
(cd vscode-extension && npm ci --no-audit --no-fund --loglevel=error)
# The VS Code end-to-end test's tools: Debian's chromium, code-server and playwright-core (pinned in
# tests/vscode_e2e/package-lock.json), cached in ~/.cache/completer-e2e; about 40 s the first time.
bash scripts/install_vscode_e2e.sh >/dev/null \
    || echo "test.sh: the VS Code end-to-end tools did not install; tests/test_vscode_e2e.py says why" >&2
exec "$PY" -m pytest -q -rs "$@"
