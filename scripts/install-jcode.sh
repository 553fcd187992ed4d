#!/usr/bin/env bash
# Installs the pinned jcode platform package (ships jcode 0.67.1) for the
# jucode-jcode real-peer tests into target/peers/npm-jcode. Idempotent;
# non-interactive. Prints the path of the jcode binary.
set -euo pipefail

PKG="@1jehuang/jcode-linux-x64"
VERSION="1.1.0"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${ROOT}/target/peers/npm-jcode"
BIN="${DEST}/node_modules/${PKG}/bin/jcode"

if [[ "$(uname -s)" != "Linux" || "$(uname -m)" != "x86_64" ]]; then
    echo "install-jcode.sh: only linux x86_64 is pinned (${PKG})" >&2
    exit 1
fi

have_pinned() {
    [[ -x "${BIN}" ]] && grep -q "\"version\": \"${VERSION}\"" "${DEST}/node_modules/${PKG}/package.json" 2>/dev/null
}

if ! have_pinned; then
    if ! command -v npm >/dev/null 2>&1; then
        apt-get update
        DEBIAN_FRONTEND=noninteractive apt-get install -y npm
    fi
    mkdir -p "${DEST}"
    [[ -f "${DEST}/package.json" ]] || echo '{"name":"jucode-peer-jcode","private":true}' >"${DEST}/package.json"
    npm install --prefix "${DEST}" --no-audit --no-fund --save-exact "${PKG}@${VERSION}" >&2
fi

if ! have_pinned; then
    echo "install-jcode.sh: ${BIN} missing after installing ${PKG}@${VERSION}" >&2
    exit 1
fi
"${BIN}" version --json >&2
echo "${BIN}"
