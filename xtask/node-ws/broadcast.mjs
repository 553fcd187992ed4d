// The fan-out bench's Node reference (cargo xtask bench): the broadcaster a TypeScript daemon
// would be, on the ws library. Usage: node broadcast.mjs <clients> <frames>.
// It prints "listening <port>", accepts <clients> connections, prints "ready", and on a line
// on stdin sends each client the same frames the daemon's fake engine floods with: each
// assistant_delta carries "t<unix ns at emission>" for the reader's latency.
import { createInterface } from "node:readline";
import { WebSocketServer } from "ws";

const clients = Number(process.argv[2]);
const frames = Number(process.argv[3]);
// Frames produced per turn of the event loop, so sockets drain while the producer runs, as
// an engine's output arrives in reads rather than all at once.
const BATCH = 64;
const SESSION = "00000000-0000-4000-8000-000000000000";

// Unix time in ns: timeOrigin in µs fits a double exactly; now() adds the fraction.
const originUs = BigInt(Math.floor(performance.timeOrigin * 1000));
const nowNs = () => originUs * 1000n + BigInt(Math.round(performance.now() * 1e6));

const wss = new WebSocketServer({ host: "127.0.0.1", port: 0, perMessageDeflate: false });
const open = [];
wss.on("connection", (ws, req) => {
  req.socket.setNoDelay(true);
  open.push(ws);
  if (open.length === clients) console.log("ready");
});
wss.on("listening", () => console.log(`listening ${wss.address().port}`));

// Serialised once and sent as the same buffer to every client.
const sendAll = (frame) => {
  const data = Buffer.from(JSON.stringify(frame));
  for (const ws of open) ws.send(data, { binary: false });
};

function produce() {
  sendAll({ type: "assistant_start", session: SESSION });
  let sent = 0;
  const turn = () => {
    const end = Math.min(frames, sent + BATCH);
    for (; sent < end; sent++) {
      sendAll({ type: "assistant_delta", delta: `t${nowNs()}`, session: SESSION });
    }
    if (sent < frames) setImmediate(turn);
    else sendAll({ type: "status", message: "ready", session: SESSION });
  };
  turn();
}

const input = createInterface({ input: process.stdin });
let started = false;
input.on("line", () => {
  if (!started) {
    started = true;
    produce();
  }
});
input.on("close", () => process.exit(0));
