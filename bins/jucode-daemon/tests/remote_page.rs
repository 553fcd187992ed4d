//! The remote page built into the daemon: served without `--web`, with a strict
//! Content-Security-Policy, gzip and ETags, and a page for every route of the app.

use jucode_testsupport::{Daemon, TestHome, http, http_with};

#[tokio::test]
async fn the_embedded_page_is_served_with_its_policy() {
    let home = TestHome::new();
    let daemon = Daemon::start(&home.home()).await.unwrap();

    let r = http(daemon.addr, "GET", "/remote", None).await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    let html = String::from_utf8(r.body.clone()).unwrap();
    assert!(html.contains(r#"src="/remote/app.js""#), "{html}");
    let csp = r.header("content-security-policy").unwrap();
    assert!(csp.contains("script-src 'self'") && csp.contains("default-src 'none'"));
    assert!(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"));
    assert_eq!(r.header("x-frame-options"), Some("DENY"));
    assert_eq!(r.header("x-content-type-options"), Some("nosniff"));

    // Every route of the single-page app is the page; its files are themselves.
    for path in ["/remote/s/abc", "/remote/agents/ops", "/remote/settings"] {
        let r = http(daemon.addr, "GET", path, None).await.unwrap();
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.body, html.as_bytes(), "{path}");
    }
    let js = http(daemon.addr, "GET", "/remote/app.js", None)
        .await
        .unwrap();
    assert_eq!(js.status, 200);
    assert_eq!(
        js.header("content-type"),
        Some("text/javascript; charset=utf-8")
    );
    assert!(js.body.len() > 1000);
    for missing in [
        "/remote/nope.js",
        "/remote/../Cargo.toml",
        "/remote/%2e%2e/x.js",
    ] {
        let r = http(daemon.addr, "GET", missing, None).await.unwrap();
        assert_eq!(r.status, 404, "{missing}");
    }

    // gzip when asked, the same bytes once inflated; a matching ETag is a 304.
    let gz = http_with(
        daemon.addr,
        "GET",
        "/remote/app.js",
        &[("Accept-Encoding", "gzip, deflate, br")],
        None,
    )
    .await
    .unwrap();
    assert_eq!(gz.header("content-encoding"), Some("gzip"));
    assert!(gz.body.len() < js.body.len());
    let mut inflated = Vec::new();
    std::io::Read::read_to_end(
        &mut flate2::read::GzDecoder::new(&gz.body[..]),
        &mut inflated,
    )
    .unwrap();
    assert_eq!(inflated, js.body);
    let etag = js.header("etag").unwrap().to_string();
    let again = http_with(
        daemon.addr,
        "GET",
        "/remote/app.js",
        &[("If-None-Match", &etag)],
        None,
    )
    .await
    .unwrap();
    assert_eq!(again.status, 304);
    assert!(again.body.is_empty());

    let head = http(daemon.addr, "HEAD", "/remote", None).await.unwrap();
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
}

#[tokio::test]
async fn open_prints_a_signed_in_link_with_the_token_in_the_fragment() {
    let home = TestHome::new();
    let daemon = Daemon::start(&home.home()).await.unwrap();
    let out = tokio::process::Command::new(jucode_testsupport::daemon_bin().unwrap())
        .arg("--listen")
        .arg(daemon.addr.to_string())
        .arg("--home")
        .arg(home.home())
        .args(["open", "--no-browser"])
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let token = daemon.token().unwrap();
    assert_eq!(
        stdout.trim(),
        format!("http://{}/remote#token={token}", daemon.addr)
    );
    // Nothing but the link carries the token.
    assert!(!String::from_utf8_lossy(&out.stderr).contains(&token));
    assert!(daemon.logs().iter().all(|l| !l.contains(&token)));
}
