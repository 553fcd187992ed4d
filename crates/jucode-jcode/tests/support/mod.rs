//! Test doubles shared by the real-peer suites.
#![allow(dead_code)]
pub mod fake_openai;
