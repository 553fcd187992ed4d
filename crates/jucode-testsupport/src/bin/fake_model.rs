//! `jucode-fake-model`: the scripted model server ([`jucode_testsupport::fake_model`]) as a
//! process of its own, for suites outside Rust (the remote page's browser scenarios) that need
//! the daemon's built-in engine to get answers. It prints `listening on http://<addr>`, then
//! `config <json>`: the `config.json` that points the jucode engine at it (chat protocol), and
//! serves until it is killed.

use anyhow::Result;
use jucode_testsupport::fake_model::FakeModel;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let model = FakeModel::start().await?;
    let base = model.base_url();
    println!("listening on {base}");
    println!("config {}", model.config("chat"));
    // The server lives as long as `model`; the process ends when killed.
    std::future::pending::<()>().await;
    drop(model);
    Ok(())
}
