//! Test support, never shipped: fake engine CLIs that replay frames recorded from the real
//! Claude Code, Codex and ACP agents, a recorder that captures fresh frames from the real CLIs,
//! and a fake model server the real CLIs can be pointed at.
//!
//! Start reading at [`replay`]: the fakes (`fake-claude`, `fake-codex`, `fake-acp`) read a
//! recording named by `FAKE_ENGINE_SCRIPT`, write the engine's recorded frames, and at every
//! frame the recording says the client sent, read the adapter's frame and check it matches
//! where it matters (message type, method, user text, the approval decision). A mismatch is an
//! error on stderr and exit code 3, so the adapter reports a crash and the test fails.

pub mod replay;
