//! Frame → its row in the op table → the row's gate → its area's handler. This is the only
//! place that picks a handler for an op; an area never matches another area's ops.

use std::sync::Arc;

use jucode_protocol::daemon::{BasicsOp, DaemonEvent, Reply};
use jucode_protocol::{ClientFrame, DaemonOp};

use crate::cx::OpCx;
use crate::error::OpError;
use crate::{
    ClientId, Hub, actions, agents, devices, dispatch, files, gateway, mcp, messages, questions,
    reports, requirements, schedules, sessions, skills, terminals, timers, to_value, uploads,
    usage, workspaces,
};

impl Hub {
    /// Handles one text frame from `client`. Replies and broadcasts are queued on the clients'
    /// connections; nothing is returned. Every error is answered with the frame's `id` when it
    /// had one.
    pub async fn handle(self: &Arc<Self>, client: ClientId, text: &str) {
        let frame = match ClientFrame::parse(text) {
            Ok(frame) => frame,
            Err(e) => {
                self.reply_error(client, e.id.clone(), e.to_string());
                return;
            }
        };
        let Some(auth) = self.lock().clients.auth(client) else {
            return;
        };
        let cx = OpCx {
            hub: self,
            client,
            auth,
            id: frame.id.clone(),
        };
        if let Err(e) = route(&cx, frame).await {
            self.reply_error(client, cx.id.clone(), e.to_string());
        }
    }

    pub(crate) fn reply_error(
        &self,
        client: ClientId,
        id: Option<serde_json::Value>,
        message: String,
    ) {
        let frame = to_value(&Reply::error(id, message));
        self.lock().clients.send(client, &frame);
    }
}

async fn route(cx: &OpCx<'_>, frame: ClientFrame) -> Result<(), OpError> {
    // The gate holds with a session too: an engine's mcp_set persists to config.json and can
    // name a program to run.
    if let Some(refusal) = frame.spec().and_then(|s| s.refusal(cx.is_device())) {
        return Err(OpError::Refused(refusal));
    }
    if !frame.is_daemon_op() {
        return sessions::forward(cx, frame);
    }
    let ClientFrame { op, fields, .. } = frame;
    let Some(op) = DaemonOp::from_fields(&op, fields) else {
        return Err(OpError::NotBuilt(op));
    };
    match op? {
        DaemonOp::Basics(BasicsOp::Ping) => {
            cx.reply(DaemonEvent::Pong);
            Ok(())
        }
        DaemonOp::Basics(BasicsOp::RestartWhenIdle) => {
            crate::restart::handle(cx);
            Ok(())
        }
        DaemonOp::Sessions(op) => sessions::handle(cx, op).await,
        DaemonOp::Actions(op) => actions::handle(cx, op),
        DaemonOp::Agents(op) => agents::handle(cx, op),
        DaemonOp::Workspaces(op) => workspaces::handle(cx, op).await,
        DaemonOp::Devices(op) => devices::handle(cx, op),
        DaemonOp::Push(op) => devices::push::handle(cx, op).await,
        DaemonOp::Mcp(op) => mcp::handle(cx, op),
        DaemonOp::Timers(op) => timers::handle(cx, op),
        DaemonOp::Questions(op) => questions::handle(cx, op),
        DaemonOp::Reports(op) => reports::handle(cx, op),
        DaemonOp::Requirements(op) => requirements::handle(cx, op),
        DaemonOp::Dispatch(op) => dispatch::handle(cx, op),
        DaemonOp::Messages(op) => messages::handle(cx, op),
        DaemonOp::Schedules(op) => schedules::handle(cx, op),
        DaemonOp::Usage(op) => usage::handle(cx, op),
        DaemonOp::Files(op) => files::handle(cx, op),
        DaemonOp::Git(op) => files::handle_git(cx, op),
        DaemonOp::Uploads(op) => uploads::handle(cx, op),
        DaemonOp::Terminals(op) => terminals::handle(cx, op),
        DaemonOp::Skills(op) => skills::handle(cx, op),
        DaemonOp::Gateway(op) => gateway::handle(cx, op),
    }
}
