//! `codex app-server`'s JSON-RPC stdout (responses, notifications, server requests), line by
//! line through the adapter's own translation into events.
#![no_main]

#[path = "common/engine_lines.rs"]
mod engine_lines;

use jucode_adapters::replay::Engine;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| engine_lines::run(Engine::Codex, data));
