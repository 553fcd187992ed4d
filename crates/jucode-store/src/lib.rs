//! `jucode-store`: the jucode daemon's state directory (`<home>/daemon/`).
//!
//! Start with [`StateDir::open`]: it creates the directory, takes the
//! single-daemon lock and hands out paths, the daemon token
//! ([`StateDir::load_or_create_token`]) and append-only logs
//! ([`StateDir::open_log`] / [`JsonlLog`]). Whole-file state goes through
//! [`read_json`] and [`write_json_atomic`].
//!
//! Everything here is synchronous std IO. Every write that returns `Ok` is
//! durable (fsynced, and the directory too when a name was created).

mod atomic;
mod error;
mod fsutil;
mod jsonl;
mod state_dir;

pub use atomic::{read_json, write_atomic, write_json_atomic};
pub use error::{Result, StoreError};
pub use jsonl::JsonlLog;
pub use state_dir::StateDir;
