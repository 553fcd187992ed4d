//! Wire tests of the agent ops on the real daemon binary with the scripted serve engine:
//! every op, its errors and its gate (a local client and a paired device), an agent's
//! sessions, and the `agents` list on connect and after every change.
//!
//! Build first: `cargo build -p jucode-daemon`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use jucode_testsupport::{Client, Daemon};
use serde_json::{Value, json};

type Env = jucode_testsupport::TestHome;

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// The connect batch's (or a broadcast's) agents list.
fn agents_of(frame: &Value) -> &Vec<Value> {
    frame["agents"].as_array().expect("an agents list")
}

fn entry<'a>(list: &'a Value, id: &str) -> Option<&'a Value> {
    agents_of(list).iter().find(|a| a["id"] == id)
}

/// Reads until the next `agents` broadcast.
async fn next_agents(c: &mut Client) -> Value {
    c.recv_until(|f| f["type"] == "agents" && f.get("id").is_none())
        .await
        .unwrap()
}

#[tokio::test]
async fn an_agent_is_created_read_updated_and_deleted_with_every_client_told() {
    let env = Env::new();
    let daemon = env.daemon().await;
    let work = env.project("work");
    let mut a = daemon.client().await.unwrap();
    let mut b = daemon.client().await.unwrap();
    let on_connect = a
        .connect_batch
        .iter()
        .find(|f| f["type"] == "agents")
        .unwrap();
    assert_eq!(agents_of(on_connect).len(), 0);

    let reply = a
        .request(
            json!({"op":"agent_create","agent":"ops","name":"Ops","cwd":s(&work),
            "role":"\n# Keeps CI green\nand more","color":"#12abEF",
            "icon":{"kind":"builtin","id":"rocket"}}),
        )
        .await
        .unwrap();
    assert_eq!(reply["type"], "agent_created", "{reply}");
    assert_eq!(reply["agent"], "ops");
    for c in [&mut a, &mut b] {
        let list = next_agents(c).await;
        let ops = entry(&list, "ops").unwrap();
        assert_eq!(ops["name"], "Ops");
        assert_eq!(ops["cwd"], s(&std::fs::canonicalize(&work).unwrap()));
        assert_eq!(ops["summary"], "Keeps CI green");
        assert_eq!(ops["approval_mode"], "auto");
        assert_eq!(ops["sandbox"], "workspace-write");
        assert_eq!(ops["network"], true);
        assert_eq!(ops["enabled"], true);
        assert_eq!(
            ops["command_rules"][2],
            json!({"prefix":"git push","action":"ask"})
        );
        assert_eq!(ops["sessions"], 0);
        assert_eq!(ops["busy"], false);
        assert_eq!(ops["running"], json!([]));
        assert_eq!(ops["project"], Value::Null);
        let seed = ops["avatar_seed"].as_str().unwrap();
        assert!(!seed.is_empty() && seed.bytes().all(|b| b.is_ascii_hexdigit()));
    }

    // On disk: settings, the four brief files and memory/.
    let dir = env.home().join("agents/ops");
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("agent.json")).unwrap()).unwrap();
    assert_eq!(saved["name"], "Ops");
    assert_eq!(
        std::fs::read_to_string(dir.join("role.md")).unwrap(),
        "\n# Keeps CI green\nand more"
    );
    for empty in ["capabilities.md", "policy.md", "state.md"] {
        assert_eq!(std::fs::read_to_string(dir.join(empty)).unwrap(), "");
    }
    assert!(dir.join("memory").is_dir());

    std::fs::write(dir.join("memory/deploy.md"), "How to deploy").unwrap();
    let got = a
        .request(json!({"op":"agent_get","agent":"ops"}))
        .await
        .unwrap();
    assert_eq!(got["type"], "agent", "{got}");
    assert_eq!(got["agent"]["id"], "ops");
    assert_eq!(got["brief"]["role.md"], "\n# Keeps CI green\nand more");
    assert_eq!(got["brief"]["state.md"], "");
    assert_eq!(got["memory"], json!(["memory/deploy.md"]));
    assert_eq!(got["sessions"], json!([]));

    for file in ["deploy.md", "memory/deploy.md"] {
        let mem = a
            .request(json!({"op":"agent_memory_read","agent":"ops","file":file}))
            .await
            .unwrap();
        assert_eq!(
            mem,
            json!({"type":"agent_memory","agent":"ops","file":"memory/deploy.md",
                "content":"How to deploy","id":mem["id"]})
        );
    }

    let reply = a
        .request(
            json!({"op":"agent_update","agent":"ops","name":"Ops 2","role":"Ships",
            "color":null,"enabled":false,"approval_mode":"manual","sandbox":"read-only",
            "network":false,"directories":[{"path":"/opt","mode":"ro"}],
            "command_rules":[{"prefix":"rm","action":"forbid"}],"avatar_seed":"abc123"}),
        )
        .await
        .unwrap();
    assert_eq!(reply["type"], "agent_updated", "{reply}");
    assert_eq!(reply["agent"], "ops");
    for c in [&mut a, &mut b] {
        let list = next_agents(c).await;
        let ops = entry(&list, "ops").unwrap();
        assert_eq!(ops["name"], "Ops 2");
        assert_eq!(ops["summary"], "Ships");
        assert!(ops.get("color").is_none(), "null cleared the color: {ops}");
        assert_eq!(ops["icon"], json!({"kind":"builtin","id":"rocket"}), "kept");
        assert_eq!(ops["enabled"], false);
        assert_eq!(ops["approval_mode"], "manual");
        assert_eq!(ops["sandbox"], "read-only");
        assert_eq!(ops["network"], false);
        assert_eq!(ops["directories"], json!([{"path":"/opt","mode":"ro"}]));
        assert_eq!(
            ops["command_rules"],
            json!([{"prefix":"rm","action":"forbid"}])
        );
        assert_eq!(ops["avatar_seed"], "abc123");
    }
    assert_eq!(
        std::fs::read_to_string(dir.join("role.md")).unwrap(),
        "Ships"
    );

    let reply = a
        .request(json!({"op":"agent_delete","agent":"ops"}))
        .await
        .unwrap();
    assert_eq!(
        reply,
        json!({"type":"agent_deleted","agent":"ops","id":reply["id"]})
    );
    for c in [&mut a, &mut b] {
        let list = next_agents(c).await;
        assert!(entry(&list, "ops").is_none());
        c.recv_type("schedules", None).await.unwrap();
        c.recv_type("questions", None).await.unwrap();
    }
    assert!(!dir.exists());
    let listed = a.request(json!({"op":"agent_list"})).await.unwrap();
    assert_eq!(listed["type"], "agents");
    assert_eq!(agents_of(&listed).len(), 0);
}

#[tokio::test]
async fn bad_agent_input_gets_a_clear_error_and_changes_nothing() {
    let env = Env::new();
    let daemon = env.daemon().await;
    let work = env.project("work");
    let mut a = daemon.client().await.unwrap();
    let create = |extra: Value| {
        let mut op =
            json!({"op":"agent_create","agent":"ops","name":"Ops","cwd":s(&work),"role":"r"});
        for (k, v) in extra.as_object().unwrap() {
            op[k] = v.clone();
        }
        op
    };
    let cases = [
        (
            json!({"agent":"dispatch"}),
            "the agent id dispatch is reserved".to_string(),
        ),
        (
            json!({"agent":"Ops!"}),
            "\"Ops!\" is not an agent id (1 to 40 of a-z, 0-9 and -)".into(),
        ),
        (
            json!({"name":"  "}),
            "an agent's name cannot be empty".into(),
        ),
        (
            json!({"color":"red"}),
            "color must be #rrggbb, not \"red\"".into(),
        ),
        (
            json!({"icon":{"kind":"slug","value":"x".repeat(33)}}),
            "icon: a slug is at most 32 UTF-16 units".into(),
        ),
        (
            json!({"icon":{"kind":"svg","markup":"x".repeat(8193)}}),
            "icon: svg markup is at most 8192 bytes".into(),
        ),
        (
            json!({"avatar_seed":"zz"}),
            "avatar_seed must be 1 to 64 hex digits, not \"zz\"".into(),
        ),
        (json!({"project":"p-nope"}), "unknown project p-nope".into()),
        (
            json!({"engine":"vim"}),
            "unknown engine `vim` (expected jucode, claude or codex)".into(),
        ),
        (
            json!({"cwd":"relative"}),
            "relative is not an absolute path".into(),
        ),
        (
            json!({"role":"x".repeat(65537)}),
            "agent_create: role is longer than 65536 bytes".into(),
        ),
    ];
    for (extra, want) in cases {
        let reply = a.request(create(extra.clone())).await.unwrap();
        assert_eq!(reply["type"], "error", "{extra}: {reply}");
        assert_eq!(reply["message"], want.as_str(), "{extra}");
    }
    let reply = a
        .request(json!({"op":"agent_create","agent":"ops","name":"Ops","role":"r"}))
        .await
        .unwrap();
    assert_eq!(reply["message"], "agent_create needs cwd or project");
    assert!(!env.home().join("agents/ops").exists());
    assert!(!env.home().join("agents/dispatch").exists());

    let ok = a.request(create(json!({}))).await.unwrap();
    assert_eq!(ok["type"], "agent_created");
    let again = a.request(create(json!({}))).await.unwrap();
    assert_eq!(again["message"], "agent ops already exists");

    let before = std::fs::read_to_string(env.home().join("agents/ops/agent.json")).unwrap();
    let updates = [
        (json!({"name":""}), "an agent's name cannot be empty"),
        (
            json!({"approval_mode":"plan"}),
            "approval_mode must be manual, auto-edit, auto or full-access, not \"plan\"",
        ),
        (
            json!({"sandbox":"none"}),
            "sandbox must be read-only, workspace-write or full-access, not \"none\"",
        ),
        (
            json!({"directories":[{"path":"rel","mode":"ro"}]}),
            "directories: rel is not an absolute path",
        ),
        (
            json!({"directories":[{"path":"/a","mode":"x"}]}),
            "directories: the mode of /a must be ro or rw, not \"x\"",
        ),
        (
            json!({"command_rules":[{"prefix":"","action":"allow"}]}),
            "command_rules: a prefix cannot be empty",
        ),
        (
            json!({"command_rules":[{"prefix":"rm","action":"maybe"}]}),
            "command_rules: the action of \"rm\" must be allow, ask or forbid, not \"maybe\"",
        ),
        (
            json!({"icon":{"kind":"emoji"}}),
            "icon: kind must be builtin, slug or svg",
        ),
        (json!({"project":"p-nope"}), "unknown project p-nope"),
        // The name and role are valid but the colour is not: nothing is applied.
        (
            json!({"name":"New","role":"New role","color":"#12345"}),
            "color must be #rrggbb, not \"#12345\"",
        ),
    ];
    for (fields, want) in updates {
        let mut op = fields.clone();
        op["op"] = json!("agent_update");
        op["agent"] = json!("ops");
        let reply = a.request(op).await.unwrap();
        assert_eq!(reply["message"], want, "{fields}");
    }
    let after = std::fs::read_to_string(env.home().join("agents/ops/agent.json")).unwrap();
    assert_eq!(before, after);
    let role = std::fs::read_to_string(env.home().join("agents/ops/role.md")).unwrap();
    assert_eq!(role, "r");

    for (op, want) in [
        (
            json!({"op":"agent_get","agent":"nope"}),
            "unknown agent nope",
        ),
        (
            json!({"op":"agent_update","agent":"nope","name":"x"}),
            "unknown agent nope",
        ),
        (
            json!({"op":"agent_delete","agent":"nope"}),
            "unknown agent nope",
        ),
        (
            json!({"op":"agent_memory_read","agent":"nope","file":"a.md"}),
            "unknown agent nope",
        ),
        (
            json!({"op":"agent_memory_read","agent":"ops","file":"missing.md"}),
            "agent ops has no memory file memory/missing.md",
        ),
        (
            json!({"op":"agent_memory_read","agent":"ops","file":"../agent.json"}),
            "\"../agent.json\" is not a memory file: name it memory/<name>.md (or <name>.md), the name of letters, digits, - and _",
        ),
        (
            json!({"op":"agent_memory_read","agent":"ops","file":"memory/../role.md"}),
            "\"memory/../role.md\" is not a memory file: name it memory/<name>.md (or <name>.md), the name of letters, digits, - and _",
        ),
        (
            json!({"op":"agent_get"}),
            "agent_get: missing field `agent`",
        ),
    ] {
        let reply = a.request(op.clone()).await.unwrap();
        assert_eq!(reply["message"], want, "{op}");
    }

    // A memory file that is a symlink out of memory/ does not exist as far as reads go.
    #[cfg(unix)]
    {
        let secret = env.root().join("secret.md");
        std::fs::write(&secret, "secret").unwrap();
        std::os::unix::fs::symlink(&secret, env.home().join("agents/ops/memory/leak.md")).unwrap();
        let reply = a
            .request(json!({"op":"agent_memory_read","agent":"ops","file":"leak.md"}))
            .await
            .unwrap();
        assert_eq!(
            reply["message"],
            "agent ops has no memory file memory/leak.md"
        );
    }
}

#[tokio::test]
async fn a_project_moves_the_agent_and_null_takes_it_out() {
    let env = Env::new();
    let daemon = env.daemon().await;
    let work = env.project("work");
    let app = env.project("app");
    let mut a = daemon.client().await.unwrap();
    let ws = a
        .request(json!({"op":"project_add","path":s(&app)}))
        .await
        .unwrap();
    let project = ws["workspaces"][0]["projects"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let app = std::fs::canonicalize(&app).unwrap();

    // Created in a project without a cwd: it works in the project's directory.
    let reply = a
        .request(
            json!({"op":"agent_create","agent":"web","name":"Web","project":project,"role":""}),
        )
        .await
        .unwrap();
    assert_eq!(reply["type"], "agent_created", "{reply}");
    let list = next_agents(&mut a).await;
    assert_eq!(entry(&list, "web").unwrap()["cwd"], s(&app));
    assert_eq!(entry(&list, "web").unwrap()["project"], project.as_str());

    a.request(json!({"op":"agent_create","agent":"ops","name":"Ops","cwd":s(&work),"role":""}))
        .await
        .unwrap();
    next_agents(&mut a).await;
    a.request(json!({"op":"agent_update","agent":"ops","project":project}))
        .await
        .unwrap();
    let list = next_agents(&mut a).await;
    assert_eq!(entry(&list, "ops").unwrap()["cwd"], s(&app));
    a.request(json!({"op":"agent_update","agent":"ops","project":null}))
        .await
        .unwrap();
    let list = next_agents(&mut a).await;
    let ops = entry(&list, "ops").unwrap();
    assert_eq!(ops["project"], Value::Null);
    assert_eq!(ops["cwd"], s(&app), "cwd stays where the project put it");
}

#[tokio::test]
async fn an_agents_session_runs_in_its_directory_and_outlives_the_agent() {
    let env = Env::new();
    let mut daemon = env.daemon().await;
    let work = env.project("work");
    let mut a = daemon.client().await.unwrap();
    a.request(
        json!({"op":"agent_create","agent":"ops","name":"Ops","cwd":s(&work),"role":"# Ops"}),
    )
    .await
    .unwrap();
    next_agents(&mut a).await;

    let created = a
        .request(json!({"op":"session_create","agent":"ops"}))
        .await
        .unwrap();
    assert_eq!(created["type"], "session_created", "{created}");
    let session = created["session"].as_str().unwrap().to_string();
    // The agents list counts the new session before its engine's first events.
    let list = a
        .recv_until(|f| {
            f["type"] == "agents" && f["agents"][0]["sessions"] == 1 && f.get("id").is_none()
        })
        .await
        .unwrap();
    assert_eq!(entry(&list, "ops").unwrap()["busy"], false);
    let startup = a.recv_type("startup", Some(&session)).await.unwrap();
    let work = std::fs::canonicalize(&work).unwrap();
    assert_eq!(startup["cwd"], s(&work));
    let sessions = a.request(json!({"op":"session_list"})).await.unwrap();
    assert_eq!(sessions["sessions"][0]["agent"], "ops");
    assert_eq!(sessions["sessions"][0]["cwd"], s(&work));

    // A turn makes the agent busy, and delete is refused until it ends.
    a.request(json!({"op":"watch","session":session}))
        .await
        .unwrap();
    a.send(json!({"op":"user_message","session":session,"content":"sleep 600000"}))
        .await
        .unwrap();
    let list = a
        .recv_until(|f| f["type"] == "agents" && f["agents"][0]["busy"] == true)
        .await
        .unwrap();
    assert_eq!(entry(&list, "ops").unwrap()["running"], json!([session]));
    let got = a
        .request(json!({"op":"agent_get","agent":"ops"}))
        .await
        .unwrap();
    assert_eq!(got["sessions"][0]["session"], session.as_str());
    assert_eq!(got["sessions"][0]["busy"], true);
    let refused = a
        .request(json!({"op":"agent_delete","agent":"ops"}))
        .await
        .unwrap();
    assert_eq!(
        refused["message"],
        "agent ops has a session in a turn; wait for it to finish or interrupt it first"
    );
    assert!(env.home().join("agents/ops/agent.json").exists());

    a.send(json!({"op":"interrupt","session":session}))
        .await
        .unwrap();
    let list = a
        .recv_until(|f| f["type"] == "agents" && f["agents"][0]["busy"] == false)
        .await
        .unwrap();
    assert_eq!(entry(&list, "ops").unwrap()["running"], json!([]));

    // Deleting closes its open session; the session stays listed with its agent.
    let deleted = a
        .request(json!({"op":"agent_delete","agent":"ops"}))
        .await
        .unwrap();
    assert_eq!(deleted["type"], "agent_deleted", "{deleted}");
    a.recv_until(|f| f["type"] == "session_closed" && f["session"] == session.as_str())
        .await
        .unwrap();
    let sessions = a.request(json!({"op":"session_list"})).await.unwrap();
    assert_eq!(sessions["sessions"][0]["session"], session.as_str());
    assert_eq!(sessions["sessions"][0]["agent"], "ops");
    assert_eq!(sessions["sessions"][0]["open"], false);
    let refused = a
        .request(json!({"op":"session_create","agent":"ops"}))
        .await
        .unwrap();
    assert_eq!(refused["message"], "unknown agent ops");

    // And after a restart, the agent is still gone and its session still listed.
    a.close().await;
    daemon.stop().await.unwrap();
    let daemon = env.daemon().await;
    let c = daemon.client().await.unwrap();
    let on_connect = c
        .connect_batch
        .iter()
        .find(|f| f["type"] == "agents")
        .unwrap();
    assert_eq!(agents_of(on_connect).len(), 0);
    let sessions = c
        .connect_batch
        .iter()
        .find(|f| f["type"] == "sessions")
        .unwrap();
    assert_eq!(sessions["sessions"][0]["agent"], "ops");
}

#[tokio::test]
async fn agents_are_read_back_at_start_and_sent_on_connect() {
    let env = Env::new();
    let work = env.project("work");
    let mut daemon = env.daemon().await;
    let mut a = daemon.client().await.unwrap();
    a.request(
        json!({"op":"agent_create","agent":"ops","name":"Ops","cwd":s(&work),"role":"Ops role"}),
    )
    .await
    .unwrap();
    a.close().await;
    daemon.stop().await.unwrap();
    // A hand-made dispatch agent is never listed.
    let dispatch = env.home().join("agents/dispatch");
    std::fs::create_dir_all(&dispatch).unwrap();
    std::fs::write(
        dispatch.join("agent.json"),
        json!({"name":"Dispatch","cwd":s(&work)}).to_string(),
    )
    .unwrap();

    let daemon = env.daemon().await;
    let c = daemon.client().await.unwrap();
    let list = c
        .connect_batch
        .iter()
        .find(|f| f["type"] == "agents")
        .unwrap();
    assert_eq!(agents_of(list).len(), 1, "{list}");
    let ops = entry(list, "ops").unwrap();
    assert_eq!(ops["summary"], "Ops role");
    assert_eq!(ops["name"], "Ops");
}

#[tokio::test]
async fn a_paired_device_may_use_every_agent_op() {
    let env = Env::new();
    let daemon = env.daemon().await;
    let work = env.project("work");
    let mut desk = daemon.client().await.unwrap();
    let mut phone = daemon.paired_device(&mut desk).await.unwrap();
    let created = phone
        .request(json!({"op":"agent_create","agent":"ops","name":"Ops","cwd":s(&work),"role":"r"}))
        .await
        .unwrap();
    assert_eq!(created["type"], "agent_created", "{created}");
    let list = next_agents(&mut desk).await;
    assert!(entry(&list, "ops").is_some());
    std::fs::write(env.home().join("agents/ops/memory/n.md"), "note").unwrap();
    for (op, want) in [
        (json!({"op":"agent_list"}), "agents"),
        (json!({"op":"agent_get","agent":"ops"}), "agent"),
        (
            json!({"op":"agent_update","agent":"ops","name":"Ops 2"}),
            "agent_updated",
        ),
        (
            json!({"op":"agent_memory_read","agent":"ops","file":"n.md"}),
            "agent_memory",
        ),
        (
            json!({"op":"session_create","agent":"ops"}),
            "session_created",
        ),
        (json!({"op":"agent_delete","agent":"ops"}), "agent_deleted"),
    ] {
        let reply = phone.request(op.clone()).await.unwrap();
        assert_eq!(reply["type"], want, "{op}: {reply}");
    }
}

#[tokio::test]
async fn an_agents_engine_is_the_one_its_sessions_run_on() {
    let env = Env::new();
    // Codex pointed at a program that is not there, so its sessions cannot start here.
    let daemon = Daemon::builder(&env.home())
        .env("CODEX_BIN", env.root().join("no-codex"))
        .start()
        .await
        .unwrap();
    let work = env.project("work");
    let mut a = daemon.client().await.unwrap();
    let created = a
        .request(
            json!({"op":"agent_create","agent":"ops","name":"Ops","cwd":s(&work),
            "role":"","engine":"codex"}),
        )
        .await
        .unwrap();
    assert_eq!(created["type"], "agent_created", "{created}");
    let list = next_agents(&mut a).await;
    assert_eq!(entry(&list, "ops").unwrap()["engine"], "codex");
    // The session asks for the agent's engine, which cannot start here.
    let refused = a
        .request(json!({"op":"session_create","agent":"ops"}))
        .await
        .unwrap();
    assert_eq!(refused["type"], "error", "{refused}");
    assert!(
        refused["message"].as_str().unwrap().contains("no-codex"),
        "{refused}"
    );
    // A client may still pick the engine for one session.
    let one = a
        .request(json!({"op":"session_create","agent":"ops","engine":"jucode"}))
        .await
        .unwrap();
    assert_eq!(one["type"], "session_created", "{one}");
    a.request(json!({"op":"agent_update","agent":"ops","engine":null}))
        .await
        .unwrap();
    let list = a
        .recv_until(|f| {
            f["type"] == "agents"
                && f.get("id").is_none()
                && entry(f, "ops").is_some_and(|e| e.get("engine").is_none())
        })
        .await
        .unwrap();
    // The session whose engine could not start stays listed, closed, as any session does.
    assert_eq!(entry(&list, "ops").unwrap()["sessions"], 2);
    let two = a
        .request(json!({"op":"session_create","agent":"ops"}))
        .await
        .unwrap();
    assert_eq!(two["type"], "session_created", "{two}");
}
