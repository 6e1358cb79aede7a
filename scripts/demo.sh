#!/usr/bin/env bash
# The README's first command: install the project (into a venv where the system Python is externally
# managed: scripts/env.sh), then complete lines of a bundled sample file with the embedded model.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
choose_python
"$PY" -m pip install -q -e .
"$PY" -m completer demo
"$PY" scripts/installed_command.py
