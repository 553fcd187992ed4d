//! The Codex session [`crate::replay`] drives: no process, what it writes kept.

use super::*;

impl CodexEngine {
    /// A session for [`crate::replay`]: a detached child in place of the app-server (what it is
    /// sent kept in `written`), opened as [`Codex::run`] opens one.
    pub(crate) async fn replay(
        &self,
        spec: StartSpec,
        events: mpsc::Sender<jucode_engine::EngineOutput>,
        input_tx: mpsc::UnboundedSender<Input>,
        written: crate::child::Written,
    ) -> Result<Codex, EngineError> {
        // A program that cannot exist, should anything try to start the app-server.
        let program = PathBuf::from("/nonexistent/jucode-replay/codex");
        let mut codex = self.session(spec, Some(program), events, input_tx)?;
        codex.child = Some(ChildProc::detached(1, "codex", written));
        codex.open().await;
        Ok(codex)
    }
}
