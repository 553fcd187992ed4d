#!/usr/bin/env bash
# Installs the pinned real engine CLIs (Claude Code, Codex, the Claude ACP agent) into
# target/peers/npm for the ignored real-CLI suite (crates/jucode-fake-engines/tests/real_clis.rs):
#   cargo nextest run -p jucode-fake-engines --run-ignored only -E 'binary(real_clis)'
# `cargo xtask interop` runs this script and then that suite.
# Versions come from scripts/engine-versions.env. Idempotent; non-interactive; needs node and npm
# (installed with apt-get when missing).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=engine-versions.env
source "${ROOT}/scripts/engine-versions.env"
PREFIX="${ROOT}/target/peers/npm"

if ! command -v npm >/dev/null 2>&1; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y nodejs npm
fi

installed_version() {
    local manifest="${PREFIX}/node_modules/$1/package.json"
    [[ -f "${manifest}" ]] || return 0
    node -e 'process.stdout.write(require(process.argv[1]).version)' "${manifest}"
}

wanted=()
for pair in "${CLAUDE_CODE_PACKAGE}@${CLAUDE_CODE_VERSION}" \
            "${CODEX_PACKAGE}@${CODEX_VERSION}" \
            "${CLAUDE_ACP_PACKAGE}@${CLAUDE_ACP_VERSION}"; do
    name="${pair%@*}"
    version="${pair##*@}"
    if [[ "$(installed_version "${name}")" != "${version}" ]]; then
        wanted+=("${pair}")
    fi
done

mkdir -p "${PREFIX}"
if [[ ${#wanted[@]} -gt 0 ]]; then
    echo "installing ${wanted[*]} into ${PREFIX}"
    npm install --prefix "${PREFIX}" --no-audit --no-fund --loglevel=error "${wanted[@]}"
fi

for bin in claude codex claude-agent-acp; do
    if [[ ! -x "${PREFIX}/node_modules/.bin/${bin}" ]]; then
        echo "install-engines.sh: ${PREFIX}/node_modules/.bin/${bin} missing after npm install" >&2
        exit 1
    fi
done
echo "claude $(installed_version "${CLAUDE_CODE_PACKAGE}"), codex $(installed_version "${CODEX_PACKAGE}"), claude-agent-acp $(installed_version "${CLAUDE_ACP_PACKAGE}") in ${PREFIX}/node_modules/.bin"
