//! `jucode-daemon open`: the local link to the remote page, signed in. The daemon token rides in
//! the URL fragment, which no server receives and the page removes from the address bar at
//! once, keeping the token in its localStorage. The link goes to standard output (for the
//! person who asked) and to a browser when this machine has one; it is never logged.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// The page's address on `listen`, with `token` in the fragment. An unspecified listen address
/// (`0.0.0.0`, `::`) is reached on loopback.
pub fn local_link(listen: SocketAddr, token: &str) -> String {
    let host = match listen.ip() {
        ip if ip.is_unspecified() && ip.is_ipv4() => "127.0.0.1".to_string(),
        ip if ip.is_unspecified() => "[::1]".to_string(),
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
        std::net::IpAddr::V4(ip) => ip.to_string(),
    };
    format!("http://{host}:{}/remote#token={token}", listen.port())
}

pub async fn run(listen: SocketAddr, home: PathBuf, no_browser: bool) -> Result<()> {
    let token_path = home.join("daemon").join("token");
    let token = read_token(&token_path)?;
    let link = local_link(listen, &token);
    if tokio::net::TcpStream::connect(listen).await.is_err() {
        eprintln!(
            "no daemon answers on {listen} yet: start it with `jucode-daemon --listen {listen}`; \
             the link works once it runs"
        );
    }
    println!("{link}");
    if !no_browser && let Some(opener) = browser_opener() {
        // The link is an argument, not a log line; the opener's output is dropped.
        let spawned = std::process::Command::new(opener)
            .arg(&link)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        if spawned.is_err() {
            eprintln!("could not start {opener}: open the link above by hand");
        }
    }
    Ok(())
}

fn read_token(path: &Path) -> Result<String> {
    let token = std::fs::read_to_string(path).with_context(|| {
        format!(
            "read the daemon token {} (has the daemon run once on this home?)",
            path.display()
        )
    })?;
    Ok(token.trim().to_string())
}

/// The program that opens a URL in the user's browser, when there is a desktop to show it.
fn browser_opener() -> Option<&'static str> {
    if cfg!(target_os = "macos") {
        return Some("open");
    }
    let desktop = ["DISPLAY", "WAYLAND_DISPLAY"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()));
    desktop.then_some("xdg-open")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_link_carries_the_token_in_the_fragment_only() {
        let link = local_link("127.0.0.1:7788".parse().unwrap(), "ab12");
        assert_eq!(link, "http://127.0.0.1:7788/remote#token=ab12");
        assert_eq!(
            local_link("0.0.0.0:9000".parse().unwrap(), "t"),
            "http://127.0.0.1:9000/remote#token=t"
        );
        assert_eq!(
            local_link("[::]:9000".parse().unwrap(), "t"),
            "http://[::1]:9000/remote#token=t"
        );
    }
}
