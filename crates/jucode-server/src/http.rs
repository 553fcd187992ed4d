//! Plain HTTP: `/` redirects to the remote page, the page's files, `POST /api/pair`, the
//! agent tools' endpoint (handed to `crate::agent`) and the WebSocket upgrade (handed to
//! [`crate::ws`]).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use jucode_hub::PairError;
use serde_json::json;

use crate::Shared;

/// The largest body `POST /api/pair` reads.
const PAIR_BODY_MAX: usize = 64 * 1024;

pub(crate) type Body = Full<Bytes>;

/// A connection's two ends.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ends {
    pub(crate) peer: SocketAddr,
    pub(crate) local: SocketAddr,
}

/// Routes one request. Never fails: every problem is an HTTP answer.
pub(crate) async fn route(
    req: Request<Incoming>,
    shared: Arc<Shared>,
    ends: Ends,
) -> Result<Response<Body>, Infallible> {
    if crate::ws::is_upgrade(&req) {
        return Ok(crate::ws::upgrade(req, shared));
    }
    let mut response = match (req.method(), req.uri().path()) {
        (&Method::POST, "/api/pair") => pair(req, &shared).await,
        (_, path) if path.starts_with(crate::agent::PREFIX) => {
            crate::agent::route(req, &shared, ends).await
        }
        (&Method::GET | &Method::HEAD, "/") => {
            let mut r = text(StatusCode::FOUND, "");
            r.headers_mut()
                .insert(header::LOCATION, HeaderValue::from_static("/remote"));
            r
        }
        (&Method::GET | &Method::HEAD, path) => {
            let head = req.method() == Method::HEAD;
            let mut r = match shared.web.as_deref() {
                Some(dir) => static_file(dir, path).await,
                None => embedded_page(&req, path),
            };
            if head {
                *r.body_mut() = Body::default();
            }
            r
        }
        _ => text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n"),
    };
    let headers = response.headers_mut();
    headers.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    headers.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    Ok(response)
}

pub(crate) fn text(status: StatusCode, body: &str) -> Response<Body> {
    let mut r = Response::new(Body::from(body.to_string()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

pub(crate) fn json_response(status: StatusCode, body: serde_json::Value) -> Response<Body> {
    let mut r = Response::new(Body::from(body.to_string()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

async fn pair(req: Request<Incoming>, shared: &Shared) -> Response<Body> {
    if shared.hub.pairing_blocked() {
        return json_response(
            StatusCode::TOO_MANY_REQUESTS,
            json!({"error": PairError::TooManyAttempts.to_string()}),
        );
    }
    let body = match Limited::new(req.into_body(), PAIR_BODY_MAX).collect().await {
        Ok(body) => body.to_bytes(),
        Err(_) => {
            return json_response(
                StatusCode::PAYLOAD_TOO_LARGE,
                json!({"error": "the body is too large"}),
            );
        }
    };
    #[derive(serde::Deserialize)]
    struct PairRequest {
        code: String,
        #[serde(default)]
        name: String,
    }
    let Ok(request) = serde_json::from_slice::<PairRequest>(&body) else {
        return json_response(StatusCode::BAD_REQUEST, json!({"error": "expected JSON"}));
    };
    match shared.hub.pair(&request.code, &request.name) {
        Ok(paired) => json_response(StatusCode::OK, json!(paired)),
        Err(e @ PairError::WrongCode) => {
            json_response(StatusCode::FORBIDDEN, json!({"error": e.to_string()}))
        }
        Err(e @ PairError::TooManyAttempts) => json_response(
            StatusCode::TOO_MANY_REQUESTS,
            json!({"error": e.to_string()}),
        ),
        Err(e @ PairError::Store(_)) => json_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({"error": e.to_string()}),
        ),
    }
}

/// Maps a request path to a file under `root`, or `None` when the path is not acceptable
/// (bad percent escape, `..`, NUL). Leading slashes are dropped, so `//etc/passwd` stays
/// inside the root.
pub fn web_path(root: &Path, request_path: &str) -> Option<PathBuf> {
    let decoded = percent_encoding::percent_decode_str(request_path)
        .decode_utf8()
        .ok()?;
    if has_bad_escape(request_path) || decoded.contains('\0') || decoded.contains('\\') {
        return None;
    }
    let mut path = root.to_path_buf();
    for component in Path::new(decoded.trim_start_matches('/')).components() {
        match component {
            Component::Normal(part) => path.push(part),
            Component::CurDir => {}
            _ => return None,
        }
    }
    Some(path)
}

/// A `%` not followed by two hex digits (percent-encoding passes those through unchanged).
fn has_bad_escape(s: &str) -> bool {
    let bytes = s.as_bytes();
    bytes.iter().enumerate().any(|(i, b)| {
        *b == b'%'
            && !(bytes.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && bytes.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
    })
}

/// The page built into the binary ([`jucode_web`]), with its Content-Security-Policy, an
/// `ETag` and gzip when the browser takes it.
fn embedded_page<B>(req: &Request<B>, path: &str) -> Response<Body> {
    jucode_web::respond(path, req.headers()).map(|bytes| Body::from(Bytes::from_static(bytes)))
}

async fn static_file(root: &Path, request_path: &str) -> Response<Body> {
    let Some(mut path) = web_path(root, request_path) else {
        return text(StatusCode::BAD_REQUEST, "bad path\n");
    };
    let Ok(root) = tokio::fs::canonicalize(root).await else {
        return text(StatusCode::NOT_FOUND, "the web directory is missing\n");
    };
    // A single-page app: a path without an extension, or a missing file, gets index.html.
    let is_file = tokio::fs::metadata(&path).await.is_ok_and(|m| m.is_file());
    if path.extension().is_none() || !is_file {
        path = root.join("index.html");
    }
    // Symlinks inside the web directory must not lead out of it.
    let Ok(real) = tokio::fs::canonicalize(&path).await else {
        return text(StatusCode::NOT_FOUND, "not found\n");
    };
    if !real.starts_with(&root) {
        return text(StatusCode::NOT_FOUND, "not found\n");
    }
    let Ok(bytes) = tokio::fs::read(&real).await else {
        return text(StatusCode::NOT_FOUND, "not found\n");
    };
    let mut r = Response::new(Body::from(bytes));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(content_type(&real)),
    );
    let immutable = real
        .strip_prefix(&root)
        .is_ok_and(|rel| rel.starts_with("_app/immutable"));
    r.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(if immutable {
            "public, max-age=31536000, immutable"
        } else {
            "no-cache"
        }),
    );
    r
}

fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" | "webmanifest" => "application/json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "ico" => "image/x-icon",
        "woff2" => "font/woff2",
        "woff" => "font/woff",
        "txt" => "text/plain; charset=utf-8",
        "wasm" => "application/wasm",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn paths_never_leave_the_root() {
        let root = Path::new("/srv/web");
        assert_eq!(web_path(root, "/%2e%2e/x"), None);
        assert_eq!(web_path(root, "/../x"), None);
        assert_eq!(web_path(root, "/a%2"), None);
        assert_eq!(web_path(root, "/a%zz"), None);
        assert_eq!(web_path(root, "/a%00b"), None);
        assert_eq!(
            web_path(root, "//etc/passwd"),
            Some(PathBuf::from("/srv/web/etc/passwd"))
        );
        assert_eq!(
            web_path(root, "/remote/app.js"),
            Some(PathBuf::from("/srv/web/remote/app.js"))
        );
        assert_eq!(
            web_path(root, "/a%20b"),
            Some(PathBuf::from("/srv/web/a b"))
        );
    }
}
