#!/usr/bin/env bash
# Installs what the built-in engine's slow tests need: bubblewrap, for
# `cargo nextest run -p jucode-daemon --test agent --run-ignored only`.
# Idempotent; runs non-interactively as root (Debian packages).
set -euo pipefail

if command -v bwrap >/dev/null 2>&1; then
    echo "bubblewrap: $(bwrap --version)"
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends bubblewrap
echo "bubblewrap: $(bwrap --version)"
