//! Fake skill sources on `127.0.0.1:0`, as one small HTTP server of fixed routes: the JuCode
//! marketplace (`GET /v1/skills/marketplace`, `{"skills":[…]}`), its packages and the raw files
//! of an Anthropic-style repository (`GET /anthropic/<commit>/skills/<id>/<path>`). Every
//! request's path and `Authorization` header is kept, so a test can see what the daemon asked.
//! [`tar_gz`] and [`sha256_hex`] build packages and index entries. The gateway tests serve the
//! JuCode API's `GET /v1/gateway/groups` from it too.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;

#[derive(Default)]
struct State {
    routes: HashMap<String, (StatusCode, Vec<u8>)>,
    requests: Vec<(String, Option<String>)>,
}

/// The server; it stops when dropped.
pub struct FakeSkills {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeSkills {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeSkills {
    pub async fn start() -> Result<FakeSkills> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .context("bind the fake skill sources")?;
        let addr = listener.local_addr().context("fake skills address")?;
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let state = shared.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req| handle(req, state.clone()));
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(FakeSkills { addr, state, task })
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Where the Anthropic files are served from (`anthropic_skills_url`).
    pub fn anthropic_url(&self) -> String {
        format!("{}/anthropic", self.url())
    }

    /// Answers `GET path` with `body` (status 200).
    pub fn serve(&self, path: &str, body: impl Into<Vec<u8>>) {
        self.route(path, StatusCode::OK, body.into());
    }

    /// Answers `GET path` with `status` and a JSON error.
    pub fn fail(&self, path: &str, status: u16) {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        self.route(
            path,
            status,
            json!({"error": "failed"}).to_string().into_bytes(),
        );
    }

    /// The marketplace lists `skills` (rows as the JuCode API sends them).
    pub fn marketplace(&self, skills: Value) {
        self.serve(
            "/v1/skills/marketplace",
            json!({ "skills": skills }).to_string(),
        );
    }

    fn route(&self, path: &str, status: StatusCode, body: Vec<u8>) {
        if let Ok(mut s) = self.state.lock() {
            s.routes.insert(path.to_string(), (status, body));
        }
    }

    /// Every request received: its path and its `Authorization` header.
    pub fn requests(&self) -> Vec<(String, Option<String>)> {
        self.state
            .lock()
            .map(|s| s.requests.clone())
            .unwrap_or_default()
    }
}

async fn handle(
    req: Request<Incoming>,
    state: Arc<Mutex<State>>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = req.uri().path().to_string();
    let auth = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let found = match state.lock() {
        Ok(mut s) => {
            s.requests.push((path.clone(), auth));
            s.routes.get(&path).cloned()
        }
        Err(_) => None,
    };
    let (status, body) = found.unwrap_or((StatusCode::NOT_FOUND, b"not found".to_vec()));
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    Ok(response)
}

/// One entry of a test package.
pub enum Entry<'a> {
    File(&'a str, &'a [u8]),
    Dir(&'a str),
    Symlink(&'a str, &'a str),
}

/// A tar.gz of `entries`, paths written as given (a test may name `../x` on purpose).
pub fn tar_gz(entries: &[Entry<'_>]) -> Result<Vec<u8>> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    for entry in entries {
        let mut header = tar::Header::new_gnu();
        let (path, data, kind): (&str, &[u8], tar::EntryType) = match entry {
            Entry::File(p, d) => (p, d, tar::EntryType::Regular),
            Entry::Dir(p) => (p, &[], tar::EntryType::Directory),
            Entry::Symlink(p, target) => {
                header.set_link_name(target).context("a link target")?;
                (p, &[], tar::EntryType::Symlink)
            }
        };
        header.set_entry_type(kind);
        header.set_size(data.len() as u64);
        header.set_mode(if kind == tar::EntryType::Directory {
            0o755
        } else {
            0o644
        });
        // Written byte for byte: `append_data` would refuse the `..` a traversal test needs.
        let name = path.as_bytes();
        let gnu = header.as_gnu_mut().context("a GNU header")?;
        if name.len() > gnu.name.len() {
            anyhow::bail!("test package path too long: {path}");
        }
        gnu.name[..name.len()].copy_from_slice(name);
        header.set_cksum();
        tar.append(&header, data)
            .context("append to the test package")?;
    }
    let gz = tar.into_inner().context("finish the test package")?;
    gz.finish().context("compress the test package")
}

/// The lowercase hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
