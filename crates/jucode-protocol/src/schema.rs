//! JSON Schemas of every client frame and every daemon frame, built from the protocol types
//! (feature `schema`). `cargo xtask schema` writes them to `docs/schema/`.
//!
//! Frames are tagged unions (`op` on client frames, `type` on daemon frames), so each schema is
//! a list of "if the tag is X, the frame has X's shape" rules under one envelope. A validator
//! then reports what is wrong inside the one shape that applies, instead of "matches none of
//! ninety alternatives". Objects stay open (unknown fields are allowed), as the daemon and its
//! clients ignore fields they do not know.

use std::borrow::Cow;

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde_json::{Map, Value, json};

use crate::ApprovalMode;
use crate::daemon::ops::{OPS, OpSpec, SessionUse};
use crate::daemon::{
    ActionsOp, AgentsOp, BasicsOp, DaemonEvent, DevicesOp, FilesOp, GitOp, McpOp, MessagesOp,
    PushOp, QuestionsOp, ReportsOp, RequirementsOp, SchedulesOp, SessionsOp, TimersOp, UsageOp,
    WorkspacesOp,
};
use crate::serve;

/// The JSON Schema dialect of both schemas.
pub const DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

/// Every name [`ApprovalMode::parse`] accepts, canonical names first.
pub const APPROVAL_MODE_NAMES: &[&str] = &[
    "manual",
    "auto-edit",
    "auto",
    "full-access",
    "plan",
    "read-only",
    "readonly",
    "ask",
    "default",
    "acceptEdits",
    "edits",
    "full-auto",
    "all",
    "bypassPermissions",
];

impl JsonSchema for ApprovalMode {
    fn schema_name() -> Cow<'static, str> {
        "ApprovalMode".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "An approval mode under any of its names; the canonical serve v2 name is what goes back.",
            "type": "string",
            "enum": APPROVAL_MODE_NAMES,
        })
    }
}

/// The schema of every frame a client sends: the daemon's ops of [`OPS`] (typed where this
/// build answers them, the envelope alone where it does not) and the serve v2 ops a client
/// sends to a session ([`serve::Op`]).
pub fn client_frame() -> Value {
    let mut generator = generator();
    let mut daemon = Map::new();
    daemon.extend(variants::<BasicsOp>(&mut generator, "op"));
    daemon.extend(variants::<SessionsOp>(&mut generator, "op"));
    daemon.extend(variants::<ActionsOp>(&mut generator, "op"));
    daemon.extend(variants::<AgentsOp>(&mut generator, "op"));
    daemon.extend(variants::<WorkspacesOp>(&mut generator, "op"));
    daemon.extend(variants::<DevicesOp>(&mut generator, "op"));
    daemon.extend(variants::<PushOp>(&mut generator, "op"));
    daemon.extend(variants::<McpOp>(&mut generator, "op"));
    daemon.extend(variants::<TimersOp>(&mut generator, "op"));
    daemon.extend(variants::<QuestionsOp>(&mut generator, "op"));
    daemon.extend(variants::<ReportsOp>(&mut generator, "op"));
    daemon.extend(variants::<RequirementsOp>(&mut generator, "op"));
    daemon.extend(variants::<crate::daemon::DispatchOp>(&mut generator, "op"));
    daemon.extend(variants::<MessagesOp>(&mut generator, "op"));
    daemon.extend(variants::<SchedulesOp>(&mut generator, "op"));
    daemon.extend(variants::<UsageOp>(&mut generator, "op"));
    daemon.extend(variants::<FilesOp>(&mut generator, "op"));
    daemon.extend(variants::<GitOp>(&mut generator, "op"));
    daemon.extend(variants::<crate::daemon::UploadsOp>(&mut generator, "op"));
    daemon.extend(variants::<crate::daemon::TerminalsOp>(&mut generator, "op"));
    daemon.extend(variants::<crate::daemon::SkillsOp>(&mut generator, "op"));
    daemon.extend(variants::<crate::daemon::GatewayOp>(&mut generator, "op"));
    let mut engine: Map<String, Value> = variants::<serve::Op>(&mut generator, "op")
        .into_iter()
        .map(|(name, shape)| (name, session_op(shape)))
        .collect();

    let mut names = Vec::new();
    let mut rules = Vec::new();
    for spec in OPS {
        let shape = match daemon.remove(spec.name) {
            Some(shape) if spec.implemented => daemon_op(shape, spec),
            _ => not_available(spec),
        };
        let shape = match (spec.session, engine.remove(spec.name)) {
            // With a session the frame goes to the engine; without one the daemon answers.
            (SessionUse::Optional, Some(to_engine)) => json!({
                "if": {"required": ["session"]},
                "then": to_engine,
                "else": shape,
            }),
            _ => shape,
        };
        names.push(spec.name.to_string());
        rules.push(rule("op", spec.name, shape));
    }
    for (name, shape) in engine {
        rules.push(rule("op", &name, shape));
        names.push(name);
    }
    root(
        "jucode client frame",
        "One WebSocket text message a client sends to the daemon: a daemon op of the op table, or \
         a serve v2 op for the session it names.",
        json!({
            "type": "object",
            "required": ["op"],
            "properties": {
                "op": {"type": "string", "enum": names},
                "id": {"description": "Any JSON value; the reply carries it back unchanged."},
                "session": {"type": "string", "description": "The hosted session the op is about."},
            },
            "allOf": rules,
        }),
        &mut generator,
    )
}

/// The schema of every frame the daemon sends: its replies and broadcasts ([`DaemonEvent`],
/// with the request's `id` on a reply) and the engine events it forwards with `session` added
/// (typed where [`serve::Known`] types them, otherwise an open object).
///
/// The daemon's own frames are described as it writes them (a field it always writes is
/// required), engine events as the daemon reads them (an engine may leave out what has a
/// default).
pub fn daemon_frame() -> Value {
    let mut written = SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator();
    let mut generator = generator();
    let mut replies = variants::<DaemonEvent>(&mut written, "type");
    generator
        .definitions_mut()
        .extend(written.take_definitions(true));
    let mut events: Map<String, Value> = variants::<serve::Known>(&mut generator, "type")
        .into_iter()
        .map(|(name, shape)| (name, session_op(shape)))
        .collect();
    let mut known = Vec::new();
    let mut rules = Vec::new();
    for (name, reply) in std::mem::take(&mut replies) {
        let shape = match events.remove(&name) {
            // The same type from the daemon and from an engine (`error`): the session tells.
            Some(event) => json!({
                "if": {"required": ["session"]},
                "then": event,
                "else": reply,
            }),
            None => reply,
        };
        rules.push(rule("type", &name, shape));
        known.push(name);
    }
    for (name, event) in events {
        rules.push(rule("type", &name, event));
        known.push(name);
    }
    rules.push(json!({
        "if": {"properties": {"type": {"not": {"enum": known}}}},
        "then": {
            "description": "An engine event the protocol crate does not type, forwarded as the engine sent it with the session it belongs to.",
            "required": ["session"],
        },
    }));
    root(
        "jucode daemon frame",
        "One WebSocket text message the daemon sends: a reply (carrying the request's id), a \
         broadcast, or an engine event of a session (carrying session).",
        json!({
            "type": "object",
            "required": ["type"],
            "properties": {
                "type": {"type": "string", "minLength": 1},
                "id": {"description": "On a reply: the id of the request, as it was sent."},
                "session": {"type": "string"},
            },
            "allOf": rules,
        }),
        &mut generator,
    )
}

fn generator() -> SchemaGenerator {
    SchemaSettings::draft2020_12().into_generator()
}

/// The tagged variants of an enum's schema, by tag value, in declaration order.
fn variants<T: JsonSchema>(generator: &mut SchemaGenerator, tag: &str) -> Map<String, Value> {
    let schema = T::json_schema(generator).to_value();
    let list = schema
        .get("oneOf")
        .or_else(|| schema.get("anyOf"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut out = Map::new();
    for variant in list {
        let name = variant
            .pointer(&format!("/properties/{tag}/const"))
            .and_then(Value::as_str)
            .map(str::to_string);
        if let Some(name) = name {
            out.insert(name, variant);
        }
    }
    out
}

/// A frame about one session: `session` is required.
fn session_op(mut shape: Value) -> Value {
    require(&mut shape, "session");
    shape
}

fn daemon_op(mut shape: Value, spec: &OpSpec) -> Value {
    if spec.session == SessionUse::Required {
        require(&mut shape, "session");
    }
    shape
}

/// An op of the table this build does not answer: only its envelope is known.
fn not_available(spec: &OpSpec) -> Value {
    let mut shape = json!({
        "description": format!(
            "`{}` is in the protocol but not available in this build: the daemon answers it with an error.",
            spec.name
        ),
        "type": "object",
    });
    if spec.session == SessionUse::Required {
        require(&mut shape, "session");
    }
    shape
}

fn require(shape: &mut Value, field: &str) {
    let Some(object) = shape.as_object_mut() else {
        return;
    };
    let required = object
        .entry("required")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Some(list) = required.as_array_mut()
        && !list.iter().any(|v| v == field)
    {
        list.push(Value::String(field.to_string()));
    }
}

fn rule(tag: &str, name: &str, shape: Value) -> Value {
    json!({
        "if": {"properties": {tag: {"const": name}}, "required": [tag]},
        "then": shape,
    })
}

fn root(title: &str, description: &str, body: Value, generator: &mut SchemaGenerator) -> Value {
    let mut out = Map::new();
    out.insert("$schema".into(), json!(DIALECT));
    out.insert("title".into(), json!(title));
    out.insert("description".into(), json!(description));
    if let Value::Object(body) = body {
        out.extend(body);
    }
    let defs = generator.take_definitions(true);
    if !defs.is_empty() {
        out.insert("$defs".into(), Value::Object(defs));
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests;
