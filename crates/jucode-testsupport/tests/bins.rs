//! The binary finder against what cargo itself says.

use std::path::PathBuf;

use anyhow::Result;

#[test]
fn the_finder_agrees_with_cargo() -> Result<()> {
    // This package's own binary: cargo gives its path to integration tests.
    let from_cargo = PathBuf::from(env!("CARGO_BIN_EXE_jucode-fake-serve"));
    let found = jucode_testsupport::fake_serve_bin()?;
    assert_eq!(found.canonicalize()?, from_cargo.canonicalize()?);
    Ok(())
}
