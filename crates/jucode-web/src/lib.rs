//! The remote page, embedded: the files `web/build.mjs` bundles into `assets/` (committed, so
//! building the daemon needs no Node), and how a server answers for them.
//!
//! Start at [`lookup`]: it maps a request path to an [`Asset`]. The daemon (`jucode-server`)
//! and the relay server both serve the page through it, with [`CONTENT_SECURITY_POLICY`].
//! The page's sources and its build are in `web/`; `cargo xtask web` rebuilds `assets/` and
//! `cargo xtask tidy` fails when they differ from a fresh build.
//!
//! Invariants: every file in `assets/` (but its README) is in [`ASSETS`] and nothing else is;
//! a path with no extension is the page itself (a single-page app routes on the client).

use std::io::Write as _;
use std::sync::OnceLock;

use http::header::{self, HeaderMap, HeaderValue};
use http::{Response, StatusCode};

/// One embedded file.
#[derive(Debug)]
pub struct Asset {
    /// The file's name in `assets/`, also its URL path under `/remote/`.
    pub name: &'static str,
    pub bytes: &'static [u8],
    pub content_type: &'static str,
}

macro_rules! asset {
    ($name:literal, $type:literal) => {
        Asset {
            name: $name,
            bytes: include_bytes!(concat!("../assets/", $name)),
            content_type: $type,
        }
    };
}

/// Every file of the built page.
pub static ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("app.js", "text/javascript; charset=utf-8"),
    asset!("app.css", "text/css; charset=utf-8"),
    asset!("sw.js", "text/javascript; charset=utf-8"),
    asset!("term.js", "text/javascript; charset=utf-8"),
    asset!("term.css", "text/css; charset=utf-8"),
    asset!("manifest.webmanifest", "application/manifest+json"),
    asset!("icon.svg", "image/svg+xml"),
];

/// The page's policy: its own scripts and styles only, no inline script, no plugins, no
/// frames, connections only back to where it came from (the daemon's WebSocket, or the
/// relay's). Images may be data or blob URLs: `fs_image` returns data URLs and QR codes are
/// drawn as data URLs.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; worker-src 'self'; \
manifest-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; \
frame-ancestors 'none'; object-src 'none'";

/// The page for a request path: `/remote/<name>` (or `/<name>`) names a file, a path without
/// an extension gets `index.html`, anything else is `None` (a 404).
pub fn lookup(path: &str) -> Option<&'static Asset> {
    // The servers' own endpoints are never the page, even where a server does not know one
    // (the daemon has no `/relay/v1/push/key`; a page asking must see a 404, not HTML).
    if path.starts_with("/relay/") || path.starts_with("/api/") {
        return None;
    }
    let last = path.rsplit('/').next().unwrap_or("");
    if !last.contains('.') {
        return ASSETS.iter().find(|a| a.name == "index.html");
    }
    let rel = path
        .strip_prefix("/remote/")
        .or_else(|| path.strip_prefix('/'))?;
    ASSETS.iter().find(|a| a.name == rel)
}

impl Asset {
    /// A strong validator for `ETag`/`If-None-Match`: the first 16 bytes of the SHA-256, hex.
    pub fn etag(&self) -> &'static str {
        self.cached().etag.as_str()
    }

    /// The file gzipped (computed once), or `None` when compressing does not make it smaller.
    pub fn gzipped(&self) -> Option<&'static [u8]> {
        self.cached().gzip.as_deref()
    }

    fn cached(&self) -> &'static Cached {
        // One slot per asset, filled on first use; the table is static so the index is stable.
        static SLOTS: OnceLock<Vec<Cached>> = OnceLock::new();
        let slots = SLOTS.get_or_init(|| ASSETS.iter().map(Cached::of).collect());
        let index = ASSETS
            .iter()
            .position(|a| std::ptr::eq(a, self))
            .unwrap_or_default();
        &slots[index]
    }
}

struct Cached {
    etag: String,
    gzip: Option<Vec<u8>>,
}

impl Cached {
    fn of(asset: &Asset) -> Cached {
        let digest = ring::digest::digest(&ring::digest::SHA256, asset.bytes);
        let hex: String = digest.as_ref()[..16]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Cached {
            etag: format!("\"{hex}\""),
            gzip: gzip(asset.bytes).filter(|g| g.len() < asset.bytes.len()),
        }
    }
}

/// The answer to a `GET` of `path`: the file (gzipped when `Accept-Encoding` takes it), or
/// `304` when `If-None-Match` names its ETag, or `404`. Every answer carries the policy; the
/// caller adds its own common headers and empties the body for `HEAD`.
pub fn respond(path: &str, request: &HeaderMap) -> Response<&'static [u8]> {
    let mut r = Response::new(&b""[..]);
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    let Some(asset) = lookup(path) else {
        *r.status_mut() = StatusCode::NOT_FOUND;
        *r.body_mut() = b"not found\n";
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        return r;
    };
    let fresh = request
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == asset.etag()));
    let gzip = request
        .get(header::ACCEPT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(accepts_gzip)
        .then(|| asset.gzipped())
        .flatten();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    if let Ok(etag) = HeaderValue::from_str(asset.etag()) {
        h.insert(header::ETAG, etag);
    }
    if fresh {
        *r.status_mut() = StatusCode::NOT_MODIFIED;
        return r;
    }
    if gzip.is_some() {
        h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    *r.body_mut() = gzip.unwrap_or(asset.bytes);
    r
}

/// Gzip at the best level: done once per file, so the time does not matter.
pub fn gzip(bytes: &[u8]) -> Option<Vec<u8>> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(bytes).ok()?;
    encoder.finish().ok()
}

/// Whether an `Accept-Encoding` value takes gzip (and does not refuse it with `q=0`).
pub fn accepts_gzip(accept_encoding: &str) -> bool {
    accept_encoding.split(',').any(|part| {
        let mut bits = part.split(';').map(str::trim);
        let name = bits.next().unwrap_or("");
        let refused = bits.any(|p| p.replace(' ', "") == "q=0" || p == "q=0.0");
        (name.eq_ignore_ascii_case("gzip") || name == "*") && !refused
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn every_built_file_is_embedded_and_nothing_else() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n != "README.md")
            .collect();
        on_disk.sort();
        let mut embedded: Vec<String> = ASSETS.iter().map(|a| a.name.to_string()).collect();
        embedded.sort();
        assert_eq!(on_disk, embedded);
    }

    #[test]
    fn paths_map_to_the_page_or_its_files() {
        assert_eq!(lookup("/remote").unwrap().name, "index.html");
        assert_eq!(lookup("/remote/s/abc").unwrap().name, "index.html");
        assert_eq!(lookup("/anything").unwrap().name, "index.html");
        assert_eq!(lookup("/remote/app.js").unwrap().name, "app.js");
        assert_eq!(lookup("/app.css").unwrap().name, "app.css");
        assert!(lookup("/remote/missing.js").is_none());
        assert!(lookup("/remote/../Cargo.toml").is_none());
        assert!(lookup("/remote/s/app.js").is_none());
        assert!(lookup("/relay/v1/push/key").is_none());
        assert!(lookup("/api/anything").is_none());
    }

    #[test]
    fn the_page_loads_its_own_files_only() {
        let html = std::str::from_utf8(lookup("/remote").unwrap().bytes).unwrap();
        assert!(html.contains("/remote/app.js") && html.contains("/remote/app.css"));
        assert!(!html.contains("<script>"), "inline script breaks the CSP");
        assert!(CONTENT_SECURITY_POLICY.contains("script-src 'self';"));
        assert!(!CONTENT_SECURITY_POLICY.contains("unsafe"));
    }

    #[test]
    fn gzip_and_etags_are_stable() {
        let js = lookup("/remote/app.js").unwrap();
        assert_eq!(js.etag(), js.etag());
        assert_eq!(js.etag().len(), 34);
        let gz = js.gzipped().unwrap();
        assert!(gz.len() < js.bytes.len());
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(gz), &mut out).unwrap();
        assert_eq!(out, js.bytes);
    }

    #[test]
    fn answers_carry_the_policy_and_honour_validators() {
        let none = HeaderMap::new();
        let page = respond("/remote", &none);
        assert_eq!(page.status(), StatusCode::OK);
        assert!(page.headers().contains_key(header::CONTENT_SECURITY_POLICY));
        let missing = respond("/remote/x.js", &none);
        assert_eq!(missing.status(), StatusCode::NOT_FOUND);
        assert!(
            missing
                .headers()
                .contains_key(header::CONTENT_SECURITY_POLICY)
        );
        let mut asks = HeaderMap::new();
        asks.insert(header::ACCEPT_ENCODING, HeaderValue::from_static("gzip"));
        let gz = respond("/remote/app.js", &asks);
        assert_eq!(gz.headers()[header::CONTENT_ENCODING], "gzip");
        let etag = gz.headers()[header::ETAG].clone();
        asks.insert(header::IF_NONE_MATCH, etag);
        let again = respond("/remote/app.js", &asks);
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
        assert!(again.body().is_empty());
    }

    #[test]
    fn accept_encoding_is_read_as_browsers_send_it() {
        assert!(accepts_gzip("gzip, deflate, br, zstd"));
        assert!(accepts_gzip("br;q=1.0, gzip;q=0.8"));
        assert!(!accepts_gzip("br"));
        assert!(!accepts_gzip("gzip;q=0"));
        assert!(!accepts_gzip(""));
    }
}
