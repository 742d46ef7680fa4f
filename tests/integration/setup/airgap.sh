#!/bin/sh
# Idempotent setup for tests/airgap on a fresh Debian 12 (root): unshare (util-linux) and uv in the test venv.
set -eu
VENV=${VENV:-.venv}
command -v unshare >/dev/null 2>&1 || { apt-get update -q && apt-get install -y -q util-linux; }
"$VENV/bin/python" -c 'import uv' 2>/dev/null || "$VENV/bin/python" -m pip install -q 'uv>=0.5'
