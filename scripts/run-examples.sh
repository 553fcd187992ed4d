#!/usr/bin/env bash
# Builds and runs the two example programs of crates/jucode-examples for real:
#   - embed: the hub in-process with its own engine (needs nothing else);
#   - client: against a daemon this script starts on a free loopback port, with a temporary
#     HOME, --no-relay and the scripted engine jucode-fake-serve as the jucode engine.
# Exits non-zero when a build fails or an example does not get what it expects.
# Usage: scripts/run-examples.sh [--no-build]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TARGET="${CARGO_TARGET_DIR:-${ROOT}/target}/debug"
cd "${ROOT}"

if [[ "${1:-}" != "--no-build" ]]; then
    cargo build --quiet -p jucode-daemon -p jucode-testsupport --bins
    cargo build --quiet -p jucode-examples --examples
fi

echo "== embed"
"${TARGET}/examples/embed" "hello from run-examples" >/dev/null

echo "== client"
WORK="$(mktemp -d)"
DAEMON_PID=""
cleanup() {
    if [[ -n "${DAEMON_PID}" ]]; then
        kill -TERM "${DAEMON_PID}" 2>/dev/null || true
        wait "${DAEMON_PID}" 2>/dev/null || true
    fi
    rm -rf "${WORK}"
}
trap cleanup EXIT
mkdir -p "${WORK}/proj"

# The daemon prints its address, then the token file's path, once clients can connect.
coproc DAEMON {
    HOME="${WORK}" JUCODE_SERVE_BIN="${TARGET}/jucode-fake-serve" \
        exec "${TARGET}/jucode-daemon" --listen 127.0.0.1:0 --no-relay 2>&1
}
DAEMON_PID="${DAEMON_PID:-$!}"
ADDR=""
TOKEN_FILE=""
while [[ -z "${TOKEN_FILE}" ]] && read -r -t 60 -u "${DAEMON[0]}" line; do
    case "${line}" in
        "jucode daemon listening on http://"*) ADDR="${line#jucode daemon listening on http://}" ;;
        "token: "*) TOKEN_FILE="${line#token: }" ;;
    esac
done
if [[ -z "${ADDR}" || -z "${TOKEN_FILE}" ]]; then
    echo "run-examples: the daemon did not report its address" >&2
    exit 1
fi

# A new session in proj and one message to the fake engine, which echoes it; the client
# stops at the end of that turn and fails if it does not end within 30 s.
"${TARGET}/examples/client" --url "ws://${ADDR}" --token-file "${TOKEN_FILE}" \
    --create "${WORK}/proj" --say "hello from run-examples" --until-ready --events 100 \
    --timeout 30 >"${WORK}/events.jsonl"
grep -q '"delta":"echo: hello from run-examples"' "${WORK}/events.jsonl" || {
    echo "run-examples: the client printed no answer:" >&2
    cat "${WORK}/events.jsonl" >&2
    exit 1
}

# A second run watches the session the daemon now lists (no --create): its snapshot is the
# fake engine's five state events, the transcript with the turn above, and attended.
"${TARGET}/examples/client" --url "ws://${ADDR}" --token-file "${TOKEN_FILE}" \
    --events 7 --timeout 30 >"${WORK}/events2.jsonl"
grep '"type":"transcript"' "${WORK}/events2.jsonl" | grep -q 'echo: hello from run-examples' || {
    echo "run-examples: the second client saw no snapshot:" >&2
    cat "${WORK}/events2.jsonl" >&2
    exit 1
}

# A wrong token is refused at the handshake.
if JUCODE_TOKEN=wrong "${TARGET}/examples/client" --url "ws://${ADDR}" --timeout 10 2>"${WORK}/refused.txt"; then
    echo "run-examples: a wrong token was accepted" >&2
    exit 1
fi
grep -q "HTTP 401" "${WORK}/refused.txt"

echo "run-examples: ok"
