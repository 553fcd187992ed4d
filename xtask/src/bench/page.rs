//! The remote page's first load: the bytes a browser fetches before it can draw (the HTML, the
//! script and the style sheet), gzipped as the release daemon sends them, against the issue's
//! budget of 150 KB of JavaScript and CSS after gzip. A size, not a time: it does not depend on
//! the machine.

use anyhow::{Result, bail};

use crate::daemon::{Bins, Daemon, Homes};

/// The budget for JavaScript and CSS after gzip (issue 14).
pub const BUDGET: usize = 150 * 1000;

pub struct Outcome {
    /// Each first-load file: its path, its size as sent, its size unpacked.
    pub files: Vec<(&'static str, usize, usize)>,
}

impl Outcome {
    /// JavaScript and CSS as sent (the HTML does not count toward the budget).
    pub fn script_and_style(&self) -> usize {
        self.files
            .iter()
            .filter(|(p, _, _)| p.ends_with(".js") || p.ends_with(".css"))
            .map(|(_, sent, _)| sent)
            .sum()
    }
}

pub async fn run(bins: &Bins) -> Result<Outcome> {
    let tmp = tempfile::Builder::new().prefix("jucode-page-").tempdir()?;
    let root = std::fs::canonicalize(tmp.path())?;
    let homes = Homes {
        home: root.join("home"),
        jucode_home: root.join("home").join(".jucode"),
        log: root.join("daemon.log"),
    };
    std::fs::create_dir_all(&homes.jucode_home)?;
    let mut daemon = Daemon::start(bins, &homes).await?;
    let mut files = Vec::new();
    let mut failure = None;
    for path in ["/remote", "/remote/app.js", "/remote/app.css"] {
        let gz = jucode_testsupport::http_with(
            daemon.addr,
            "GET",
            path,
            &[("Accept-Encoding", "gzip, deflate, br")],
            None,
        )
        .await;
        let plain = jucode_testsupport::http(daemon.addr, "GET", path, None).await;
        match (gz, plain) {
            (Ok(gz), Ok(plain)) if gz.status == 200 && plain.status == 200 => {
                files.push((path, gz.body.len(), plain.body.len()));
            }
            (gz, plain) => {
                failure = Some(format!(
                    "GET {path}: {:?} / {:?}",
                    gz.map(|r| r.status),
                    plain.map(|r| r.status)
                ));
                break;
            }
        }
    }
    let _ = daemon.stop().await;
    if let Some(f) = failure {
        bail!("the page did not load: {f}");
    }
    Ok(Outcome { files })
}
