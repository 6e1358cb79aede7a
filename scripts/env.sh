# Sourced by scripts/demo.sh and scripts/test.sh: choose the Python the project installs into, as $PY.
#   - the active virtual environment, if any;
#   - else $COMPLETER_VENV (created if absent), if set;
#   - else ./.venv (created if absent) when this system's Python is externally managed (Debian 12,
#     Ubuntu 23.04 and later refuse `pip install` into it), installing Debian's python3-venv if venv is missing;
#   - else python3 itself.
# Outside a venv, python3 is the base: where it is older than 3.11 (Ubuntu 22.04's 3.10), the newest python3.1x on
# PATH that is 3.11 or newer is, and none is a clear error.
choose_python() {
    PY=python3
    if [ -n "${VIRTUAL_ENV:-}" ]; then
        return
    fi
    local base=""
    for candidate in python3 python3.14 python3.13 python3.12 python3.11; do
        if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
            base="$candidate"
            break
        fi
    done
    if [ -z "$base" ]; then
        echo "completer needs Python 3.11 or newer (python3 is $(python3 -V 2>&1)): install one, or activate a venv of one" >&2
        return 1
    fi
    PY="$base"
    local venv="${COMPLETER_VENV:-}"
    if [ -z "$venv" ] && "$base" -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")))'; then
        venv=.venv
    fi
    if [ -n "$venv" ]; then
        if [ ! -x "$venv/bin/python" ]; then
            if ! "$base" -m venv "$venv" 2>/dev/null; then
                local sudo=""
                [ "$(id -u)" -ne 0 ] && sudo="sudo"
                $sudo apt-get update -qq
                DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$base-venv" >/dev/null
                "$base" -m venv "$venv"
            fi
        fi
        PY="$venv/bin/python"
    fi
}
