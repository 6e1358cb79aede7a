#!/usr/bin/env bash
# Install what the VS Code end-to-end test (tests/test_vscode_e2e.py) needs, outside the checkout:
#   * Debian's chromium (driven headless by playwright-core; no browser is downloaded), and libkrb5-dev and
#     ripgrep, which code-server's native modules need;
#   * code-server and playwright-core at the versions pinned in tests/vscode_e2e/package-lock.json, in
#     ${COMPLETER_E2E_DIR:-~/.cache/completer-e2e}/<hash of the lockfile and node's version>.
# code-server's own install scripts download ripgrep, argon2 and kerberos binaries from GitHub, so they are
# not run (--ignore-scripts): the native modules are built here against node's headers (/usr/include/node)
# and @vscode/ripgrep is pointed at /usr/bin/rg. A finished install leaves a stamp and is reused.
# Prints the install directory on its last line of output. With --check it installs nothing: it prints the
# directory when everything is there, else says what is missing and exits with status 1.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
SCRIPT="$REPO/scripts/install_vscode_e2e.sh"
LOCK="$REPO/tests/vscode_e2e/package-lock.json"
KEY=$( (cat "$REPO/tests/vscode_e2e/package.json" "$LOCK" "$SCRIPT"; node --version 2>/dev/null || true) | sha256sum | cut -c1-12)
DIR="${COMPLETER_E2E_DIR:-$HOME/.cache/completer-e2e}/$KEY"

if [ "${1:-}" = "--check" ]; then
    for tool in node /usr/bin/chromium /usr/bin/rg; do
        command -v "$tool" >/dev/null 2>&1 || { echo "install_vscode_e2e: $tool is missing (run bash scripts/install_vscode_e2e.sh)" >&2; exit 1; }
    done
    [ -f "$DIR/.installed" ] || { echo "install_vscode_e2e: code-server is not installed in $DIR (run bash scripts/install_vscode_e2e.sh)" >&2; exit 1; }
    echo "$DIR"
    exit 0
fi

missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
[ -x /usr/bin/rg ] || missing+=(ripgrep)
[ -f /usr/include/krb5.h ] || [ -f /usr/include/gssapi/gssapi.h ] || missing+=(libkrb5-dev)
command -v g++ >/dev/null 2>&1 || missing+=(g++)
command -v make >/dev/null 2>&1 || missing+=(make)
[ -f /usr/include/node/node_api.h ] || missing+=(libnode-dev)
if [ ${#missing[@]} -gt 0 ]; then
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    echo "install_vscode_e2e: apt-get install ${missing[*]}" >&2
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ -f "$DIR/.installed" ]; then
    echo "$DIR"
    exit 0
fi

started=$(date +%s)
rm -rf "$DIR"
mkdir -p "$DIR"
cp "$REPO/tests/vscode_e2e/package.json" "$LOCK" "$DIR/"
export npm_config_nodedir=/usr npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false
NODE_GYP="$(npm root -g)/npm/node_modules/node-gyp/bin/node-gyp.js"
(cd "$DIR" && npm ci --ignore-scripts --loglevel=error >&2)

CS="$DIR/node_modules/code-server"
# What code-server's postinstall.sh does, minus the downloads.
(cd "$CS/lib/vscode" && npm install --omit=dev --ignore-scripts --loglevel=error >&2)  # as postinstall.sh: its shrinkwrap is not in sync for npm ci
for module in kerberos @vscode/spdlog @vscode/deviceid native-watchdog node-pty; do
    (cd "$CS/lib/vscode/node_modules/$module" && node "$NODE_GYP" rebuild --nodedir=/usr >"$DIR/build-${module//\//_}.log" 2>&1) \
        || { echo "install_vscode_e2e: building $module failed, see $DIR/build-${module//\//_}.log" >&2; exit 1; }
done
# @parcel/watcher ships a prebuilt linux-x64 package (an optional npm dependency); build it only without one.
if ! (cd "$CS/lib/vscode" && node -e 'require("@parcel/watcher")' 2>/dev/null); then
    (cd "$CS/lib/vscode/node_modules/@parcel/watcher" && node "$NODE_GYP" rebuild --nodedir=/usr >"$DIR/build-watcher.log" 2>&1)
fi
# argon2 (password hashing; required at start-up even with --auth none) finds its binary through node-pre-gyp.
(cd "$DIR/node_modules/argon2" && PATH="$(dirname "$NODE_GYP"):$PATH" \
    node ../@mapbox/node-pre-gyp/bin/node-pre-gyp rebuild --build-from-source >"$DIR/build-argon2.log" 2>&1) \
    || { echo "install_vscode_e2e: building argon2 failed, see $DIR/build-argon2.log" >&2; exit 1; }
mkdir -p "$CS/lib/vscode/node_modules/@vscode/ripgrep/bin"
ln -sf /usr/bin/rg "$CS/lib/vscode/node_modules/@vscode/ripgrep/bin/rg"
ln -sfn node_modules "$CS/lib/vscode/node_modules.asar"

# Check it loads: every native module, and code-server's --version.
(cd "$CS/lib/vscode" && node -e '
for (const m of ["kerberos", "@vscode/spdlog", "native-watchdog", "node-pty", "@parcel/watcher"]) require(m);')
(cd "$DIR" && node -e 'require("argon2"); require("playwright-core")')
node "$CS/out/node/entry.js" --version >/dev/null
touch "$DIR/.installed"
echo "install_vscode_e2e: installed in $(( $(date +%s) - started )) s" >&2
echo "$DIR"
