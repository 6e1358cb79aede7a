# Sourced by scripts/demo.sh and scripts/test.sh: choose the Python the project installs into, as $PY.
#   - the active virtual environment, if any;
#   - else $COMPLETER_VENV (created if absent), if set;
#   - else ./.venv (created if absent) when this system's Python is externally managed (Debian 12,
#     Ubuntu 23.04 and later refuse `pip install` into it), installing Debian's python3-venv if venv is missing;
#   - else python3 itself.
choose_python() {
    PY=python3
    if [ -n "${VIRTUAL_ENV:-}" ]; then
        return
    fi
    local venv="${COMPLETER_VENV:-}"
    if [ -z "$venv" ] && python3 -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")))'; then
        venv=.venv
    fi
    if [ -n "$venv" ]; then
        if [ ! -x "$venv/bin/python" ]; then
            if ! python3 -m venv "$venv" 2>/dev/null; then
                local sudo=""
                [ "$(id -u)" -ne 0 ] && sudo="sudo"
                $sudo apt-get update -qq
                DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-venv >/dev/null
                python3 -m venv "$venv"
            fi
        fi
        PY="$venv/bin/python"
    fi
}
