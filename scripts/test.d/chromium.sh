#!/usr/bin/env bash
# Headless Chromium for the browser test of examples/ai-chat (tests/examples/test_ai_chat.py).
# Idempotent: does nothing once a chromium binary is on PATH. Debian's package, via apt-get.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "chromium.sh: no apt-get here; the browser test will be skipped" >&2
    exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; else
        echo "chromium.sh: not root and no sudo; the browser test will be skipped" >&2
        exit 0
    fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
command -v chromium >/dev/null
