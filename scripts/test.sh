#!/usr/bin/env bash
# Install everything the tests need on a fresh machine, then run the whole suite (Python, LSP with
# real clients, Neovim, the VS Code extension's Node tests). .ci/run calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v nvim >/dev/null 2>&1; then
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq neovim >/dev/null
fi
python3 -m pip install -q -e ".[test]"
if command -v npm >/dev/null 2>&1; then
    (cd vscode-extension && npm ci --no-audit --no-fund --loglevel=error)
fi
exec python3 -m pytest -q "$@"
