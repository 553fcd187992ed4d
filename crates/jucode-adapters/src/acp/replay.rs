//! The ACP session [`crate::replay`] drives: no process, what it writes kept.

use super::*;

impl AcpEngine {
    /// A session for [`crate::replay`]: a detached child in place of the agent (what it is
    /// sent kept in `written`) and terminals with no directory to run in, so no command ever
    /// starts; opened as [`Acp::run`] opens one. Its `fs/*` requests still read and write
    /// inside `spec.cwd`.
    pub(crate) async fn replay(
        &self,
        spec: StartSpec,
        events: mpsc::Sender<jucode_engine::EngineOutput>,
        input_tx: mpsc::UnboundedSender<Input>,
        written: crate::child::Written,
    ) -> Result<Acp, EngineError> {
        let options = EngineOptions::parse(&spec.options)?;
        let terminals = Terminals::new(Vec::new(), input_tx);
        let child = ChildProc::detached(1, "acp", written);
        let mut acp = self.session(spec, &options, "acp".into(), child, terminals, events);
        acp.open().await;
        Ok(acp)
    }
}
