//! Test support, never shipped: fake engine CLIs that replay frames recorded from the real
//! Claude Code, Codex and ACP agents, and a recorder that captures fresh frames from the real
//! CLIs.
//!
//! Start reading at [`replay`]: the fakes (`fake-claude`, `fake-codex`, `fake-acp`) read a
//! recording named by `FAKE_ENGINE_SCRIPT`, write the engine's recorded frames, and at every
//! frame the recording says the client sent, read the adapter's frame and check it matches
//! where it matters (message type, method, user text, the approval decision). A mismatch is an
//! error on stderr and exit code 3, so the adapter reports a crash and the test fails.
//!
//! The slow interop suite (`tests/real_clis.rs`, ignored; see `fixtures/engines/README.md`)
//! points the real CLIs at the workspace's one fake model server,
//! `jucode_testsupport::fake_model`. The `engine-recorder` bin sits between an adapter and a
//! real CLI and writes the traffic in the format the fakes replay.

pub mod replay;
pub mod saved;
