//! The Claude session [`crate::replay`] drives: no process, what it writes kept.

use super::*;

impl ClaudeEngine {
    /// A session for [`crate::replay`]: a detached child in place of the CLI (what it is
    /// sent kept in `written`), opened as [`Claude::run`] opens one.
    pub(crate) async fn replay(
        &self,
        spec: StartSpec,
        events: mpsc::Sender<jucode_engine::EngineOutput>,
        input_tx: mpsc::UnboundedSender<Input>,
        written: crate::child::Written,
    ) -> Result<Claude, EngineError> {
        // A program that cannot exist, should anything try to start the CLI.
        let program = PathBuf::from("/nonexistent/jucode-replay/claude");
        let mut claude = self.session(spec, Some(program), events, input_tx)?;
        claude.generation = 1;
        claude.child = Some(ChildProc::detached(claude.generation, "claude", written));
        claude.open().await;
        Ok(claude)
    }
}

impl Claude {
    /// One frame the CLI wrote, as [`Claude::run`] hands it over; `false` ends the session.
    pub(crate) async fn frame(
        &mut self,
        frame: Value,
        input: &mut mpsc::UnboundedReceiver<Input>,
    ) -> bool {
        self.on_frame(frame, input).await
    }
}
