//! Ops on the daemon's own records: sessions, the workspace, requirements, devices, uploads.

use anyhow::Result;
use base64::Engine as _;
use jucode_testsupport::http;
use serde_json::{Value, json};

use super::Round;
use crate::crashloop::model::Session;
use crate::crashloop::verify::lock;

pub async fn op(r: &mut Round, kind: &'static str, tag: String) -> Result<()> {
    let c = &mut r.c;
    match kind {
        "session_create" => {
            let cwd = &r.projects[r.rng.below(r.projects.len() as u64) as usize];
            let reply = c.request(json!({"op":"session_create","cwd":cwd})).await?;
            if reply["type"] == "session_created"
                && let Some(id) = reply["session"].as_str()
            {
                let mut m = lock(&r.model);
                m.sessions.insert(id.to_string(), Session::default());
                m.ack(kind);
            }
        }
        "session_rename" | "session_close" => {
            let open: Vec<String> = lock(&r.model)
                .sessions
                .iter()
                .filter(|(_, s)| !s.closed)
                .map(|(id, _)| id.clone())
                .collect();
            let Some(target) = r.pick(open) else {
                return Ok(());
            };
            let c = &mut r.c;
            if kind == "session_rename" {
                if let Some(s) = lock(&r.model).sessions.get_mut(&target) {
                    s.unsure_titles.push(tag.clone());
                }
                c.send(json!({"op":"session_meta","session":target,"title":tag}))
                    .await?;
            } else {
                c.send(json!({"op":"session_close","session":target}))
                    .await?;
            }
            // Ops of one connection are handled in order: the pong acknowledges it.
            let pong = c.request(json!({"op":"ping"})).await?;
            if pong["type"] == "pong" {
                let mut m = lock(&r.model);
                if let Some(s) = m.sessions.get_mut(&target) {
                    if kind == "session_rename" {
                        s.title = Some(tag);
                        s.unsure_titles.clear();
                    } else {
                        s.closed = true;
                    }
                }
                m.ack(kind);
            }
        }
        "workspace" => {
            // Mostly a new directory, so the workspace grows; now and then one added before.
            let path = if r.rng.below(4) == 0 {
                r.projects[r.rng.below(r.projects.len() as u64) as usize].clone()
            } else {
                let Some(parent) = std::path::Path::new(&r.projects[0]).parent() else {
                    return Ok(());
                };
                let dir = parent.join("w").join(&tag);
                std::fs::create_dir_all(&dir)?;
                dir.display().to_string()
            };
            let reply = c.request(json!({"op":"project_add","path":path})).await?;
            if reply["type"] == "workspaces" {
                let mut m = lock(&r.model);
                m.projects.insert(path);
                m.ack(kind);
            }
        }
        "requirement" => {
            let reply = c
                .request(json!({"op":"requirement_create","text":tag}))
                .await?;
            if reply["type"] == "requirement_created"
                && let Some(id) = reply["requirement"].as_str()
            {
                let mut m = lock(&r.model);
                m.requirements.insert(id.to_string(), tag);
                m.ack(kind);
            }
        }
        "device_pair" => {
            let code = c.request(json!({"op":"pair_start"})).await?;
            let body = json!({"code": code["code"], "name": tag}).to_string();
            let reply = http(r.addr, "POST", "/api/pair", Some(body.as_bytes())).await?;
            let paired = if reply.status == 200 {
                reply.json()?
            } else {
                Value::Null
            };
            if let (Some(device), Some(token)) =
                (paired["device"].as_str(), paired["token"].as_str())
            {
                let mut m = lock(&r.model);
                m.devices.push((device.to_string(), token.to_string()));
                m.ack(kind);
            }
        }
        "device_revoke" => {
            let (device, token) = {
                let mut m = lock(&r.model);
                if m.devices.is_empty() {
                    return Ok(());
                }
                // Until the reply it may be revoked or not: checked neither way.
                let i = r.rng.below(m.devices.len() as u64) as usize;
                m.devices.swap_remove(i)
            };
            let reply = c
                .request(json!({"op":"device_revoke","device":device}))
                .await?;
            if reply["type"] == "device_revoked" {
                let mut m = lock(&r.model);
                m.revoked.push(token);
                m.ack(kind);
            }
        }
        "upload" => upload(r, tag).await?,
        _ => {}
    }
    Ok(())
}

async fn upload(r: &mut Round, tag: String) -> Result<()> {
    let size = 1 + r.rng.below(2048) as usize;
    let bytes: Vec<u8> = (0..size).map(|_| r.rng.next() as u8).collect();
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    // Half of them in two chunks: a kill between leaves a part for the next start.
    let split = if r.rng.below(2) == 0 { size / 2 } else { 0 };
    let name = format!("{tag}.bin");
    let c = &mut r.c;
    let reply = if split > 0 {
        let first = c
            .request(json!({"op":"upload","name":name,"data":b64(&bytes[..split]),"last":false}))
            .await?;
        let Some(id) = first["upload"].as_str() else {
            return Ok(());
        };
        c.request(json!({"op":"upload","upload":id,"offset":split,
            "data":b64(&bytes[split..]),"last":true}))
            .await?
    } else {
        c.request(json!({"op":"upload","name":name,"data":b64(&bytes),"last":true}))
            .await?
    };
    if reply["type"] == "uploaded"
        && let Some(path) = reply["path"].as_str()
    {
        let mut m = lock(&r.model);
        m.uploads.push((path.to_string(), bytes));
        m.ack("upload");
    }
    Ok(())
}
