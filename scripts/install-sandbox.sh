#!/usr/bin/env bash
# Installs bubblewrap (bwrap), the sandbox jucode runs agent commands in on Linux.
# Idempotent; non-interactive; run as root (CI, dev containers).
set -euo pipefail

if command -v bwrap >/dev/null 2>&1; then
    echo "bwrap already installed: $(bwrap --version)"
else
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq bubblewrap
    echo "installed $(bwrap --version)"
fi

# The probe the daemon runs at start: fails when namespaces are refused here.
if ! bwrap --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --unshare-pid \
    --unshare-net --new-session --die-with-parent --cap-drop ALL true; then
    echo "bwrap is installed but cannot create namespaces on this machine" >&2
    exit 1
fi
