//! The tool surface itself: every tool's closed argument list, its JSON schema, the strict
//! validation of a call's arguments, and the capability gate.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::config::LaunchConfig;

/// Which tools a seat exposes (passed to the bridge; holds no secret).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolGate {
    pub space: String,
    pub name: String,
    pub authed: bool,
    pub capabilities: Vec<String>,
}

impl ToolGate {
    pub fn from_config(cfg: &LaunchConfig) -> Self {
        ToolGate {
            space: cfg.space.clone(),
            name: cfg.name.clone(),
            authed: !cfg.is_open(),
            capabilities: cfg.capabilities.clone(),
        }
    }

    /// Is `tool` available under this gate?
    pub fn allows(&self, tool: &str) -> bool {
        let cap = match tool {
            "cotal_spawn" | "cotal_despawn" | "cotal_persona" | "cotal_personas" => Some("spawn"),
            "cotal_run" => Some("run"),
            _ => None,
        };
        match cap {
            Some(c) if self.authed => self.capabilities.iter().any(|x| x == c),
            _ => true,
        }
    }
}

#[derive(Clone, Copy)]
enum Ty {
    Str,
    StrMax(usize),
    Bool,
    Num,
    StrList,
    Enum(&'static [&'static str]),
    Any,
}

struct Prop {
    name: &'static str,
    ty: Ty,
    required: bool,
    doc: &'static str,
}

const fn p(name: &'static str, ty: Ty, required: bool, doc: &'static str) -> Prop {
    Prop {
        name,
        ty,
        required,
        doc,
    }
}

/// One tool: name, description and its closed argument list.
pub struct ToolSpec {
    pub name: &'static str,
    pub description: &'static str,
    props: &'static [Prop],
}

const STATUS: &[&str] = &["idle", "working", "waiting"];
const ATTENTION: &[&str] = &["open", "dnd", "focus"];
const MODES: &[&str] = &["normal", "quiet", "muted"];
const YIELD: &[&str] = &["done", "blocked", "handoff"];
const RUN_VERBS: &[&str] = &["start", "status", "ps", "answer", "resume"];

/// Every tool of the surface, in listing order.
pub static SPECS: &[ToolSpec] = &[
    ToolSpec {
        name: "cotal_orientation",
        description: "Who you are on the Cotal mesh: name, role, space, model, grants, tools, roster, status and unread count.",
        props: &[],
    },
    ToolSpec {
        name: "cotal_connection_status",
        description: "Mesh connection state (ready, stalled, degraded, connecting, disconnected, stopped) and inbox counts.",
        props: &[],
    },
    ToolSpec {
        name: "cotal_docs",
        description: "Read Cotal's built-in documentation.",
        props: &[
            p("page", Ty::Str, false, "page name"),
            p("query", Ty::Str, false, "search text"),
            p("refresh", Ty::Bool, false, "re-read the pages"),
        ],
    },
    ToolSpec {
        name: "cotal_roster",
        description: "Peers present in the space with their status.",
        props: &[],
    },
    ToolSpec {
        name: "cotal_inbox",
        description: "Pull held messages (quiet channels, focus-held chatter).",
        props: &[p("peek", Ty::Bool, false, "show without clearing")],
    },
    ToolSpec {
        name: "cotal_send",
        description: "Post to a channel.",
        props: &[
            p("text", Ty::Str, true, "message text"),
            p("channel", Ty::Str, false, "channel (default: your first)"),
            p("mentions", Ty::StrList, false, "peer names to @mention"),
        ],
    },
    ToolSpec {
        name: "cotal_dm",
        description: "Send a direct message to one peer.",
        props: &[
            p("to", Ty::Str, true, "peer name or id"),
            p("text", Ty::Str, true, "message text"),
        ],
    },
    ToolSpec {
        name: "cotal_anycast",
        description: "Send to any one peer holding a role.",
        props: &[
            p("role", Ty::Str, true, "role"),
            p("text", Ty::Str, true, "message text"),
        ],
    },
    ToolSpec {
        name: "cotal_status",
        description: "Set your status, attention or activity.",
        props: &[
            p(
                "status",
                Ty::Enum(STATUS),
                false,
                "idle, working or waiting",
            ),
            p(
                "attention",
                Ty::Enum(ATTENTION),
                false,
                "open, dnd or focus",
            ),
            p("activity", Ty::StrMax(512), false, "what you are doing"),
        ],
    },
    ToolSpec {
        name: "cotal_channel_info",
        description: "Details of one channel.",
        props: &[p("channel", Ty::Str, true, "channel")],
    },
    ToolSpec {
        name: "cotal_channels",
        description: "Channels of the space, the ones you joined and their modes.",
        props: &[],
    },
    ToolSpec {
        name: "cotal_channel_mode",
        description: "Set a channel to normal, quiet (pull-only) or muted (dropped).",
        props: &[
            p("channel", Ty::Str, true, "channel"),
            p("mode", Ty::Enum(MODES), true, "normal, quiet or muted"),
        ],
    },
    ToolSpec {
        name: "cotal_join",
        description: "Join a channel.",
        props: &[p("channel", Ty::Str, true, "channel")],
    },
    ToolSpec {
        name: "cotal_leave",
        description: "Leave a channel.",
        props: &[p("channel", Ty::Str, true, "channel")],
    },
    ToolSpec {
        name: "cotal_spawn",
        description: "Ask the manager to start a new seat.",
        props: &[
            p("name", Ty::Str, true, "seat name"),
            p("role", Ty::Str, false, "role"),
            p("agent", Ty::Str, false, "connector"),
            p("model", Ty::Str, false, "model"),
            p("variant", Ty::Str, false, "reasoning effort"),
            p("launchOptions", Ty::Any, false, "connector options"),
            p("cwd", Ty::Str, false, "working directory"),
            p("prompt", Ty::Str, false, "first prompt"),
        ],
    },
    ToolSpec {
        name: "cotal_feedback",
        description: "Send feedback about Cotal to its maintainers through the manager.",
        props: &[
            p("origin", Ty::Str, true, "who noticed"),
            p("type", Ty::Str, true, "bug, idea, …"),
            p("summary", Ty::Str, true, "one line"),
            p("details", Ty::Str, false, ""),
            p("severity", Ty::Str, false, ""),
            p("area", Ty::Str, false, ""),
            p("repro", Ty::Str, false, ""),
            p("expected", Ty::Str, false, ""),
            p("actual", Ty::Str, false, ""),
            p("diagnostics", Ty::Any, false, ""),
            p("email", Ty::Str, false, ""),
        ],
    },
    ToolSpec {
        name: "cotal_despawn",
        description: "Ask the manager to stop a seat (yourself by default).",
        props: &[
            p("name", Ty::Str, false, "seat name"),
            p("graceful", Ty::Bool, false, "let it finish its turn"),
        ],
    },
    ToolSpec {
        name: "cotal_yield",
        description: "Settle the workflow run turn you were given.",
        props: &[
            p("status", Ty::Enum(YIELD), true, "done, blocked or handoff"),
            p("to", Ty::Str, false, "handoff target"),
            p("note", Ty::StrMax(4096), false, "note"),
            p("turn", Ty::Str, false, "turn id"),
        ],
    },
    ToolSpec {
        name: "cotal_run",
        description: "Start or inspect workflow runs through the manager.",
        props: &[
            p(
                "verb",
                Ty::Enum(RUN_VERBS),
                true,
                "start, status, ps, answer or resume",
            ),
            p("source", Ty::Str, false, ""),
            p("file", Ty::Str, false, ""),
            p("timeout", Ty::Num, false, ""),
            p("runId", Ty::Str, false, ""),
            p("stepKey", Ty::Str, false, ""),
            p("value", Ty::Any, false, ""),
            p("artifact", Ty::Str, false, ""),
            p("endpoint", Ty::Str, false, ""),
        ],
    },
    ToolSpec {
        name: "cotal_persona",
        description: "Define a persona through the manager.",
        props: &[
            p("name", Ty::Str, true, ""),
            p("prompt", Ty::Str, true, ""),
            p("model", Ty::Str, false, ""),
            p("role", Ty::Str, false, ""),
            p("agent", Ty::Str, false, ""),
            p("subscribe", Ty::StrList, false, ""),
            p("allowSubscribe", Ty::StrList, false, ""),
            p("allowPublish", Ty::StrList, false, ""),
            p("announce", Ty::Bool, false, ""),
        ],
    },
    ToolSpec {
        name: "cotal_personas",
        description: "List personas (or show one) through the manager.",
        props: &[p("name", Ty::Str, false, "")],
    },
    ToolSpec {
        name: "cotal_reconnect",
        description: "Drop and rebuild the mesh connection.",
        props: &[],
    },
];

/// Arguments jcode injects into every MCP call; accepted and stripped.
pub const JCODE_EXTRAS: &[&str] = &["accept_large_output", "intent"];

pub fn spec(name: &str) -> Option<&'static ToolSpec> {
    SPECS.iter().find(|s| s.name == name)
}

impl ToolSpec {
    /// The closed JSON schema; `jcode` widens it by exactly jcode's two extras.
    pub fn schema(&self, jcode: bool) -> Map<String, Value> {
        let mut props = Map::new();
        let mut required = Vec::new();
        for pr in self.props {
            let mut s = match pr.ty {
                Ty::Str => json!({"type": "string"}),
                Ty::StrMax(n) => json!({"type": "string", "maxLength": n}),
                Ty::Bool => json!({"type": "boolean"}),
                Ty::Num => json!({"type": "number"}),
                Ty::StrList => json!({"type": "array", "items": {"type": "string"}}),
                Ty::Enum(v) => json!({"type": "string", "enum": v}),
                Ty::Any => json!({}),
            };
            if !pr.doc.is_empty() {
                s["description"] = json!(pr.doc);
            }
            props.insert(pr.name.to_string(), s);
            if pr.required {
                required.push(pr.name);
            }
        }
        if jcode {
            props.insert("accept_large_output".into(), json!({"type": "boolean"}));
            props.insert("intent".into(), json!({"type": "string"}));
        }
        let mut m = Map::new();
        m.insert("type".into(), json!("object"));
        m.insert("properties".into(), Value::Object(props));
        if !required.is_empty() {
            m.insert("required".into(), json!(required));
        }
        m.insert("additionalProperties".into(), json!(false));
        m
    }

    /// Strip jcode's extras (type-checked) and validate the rest strictly.
    pub fn validate(&self, mut args: Map<String, Value>) -> Result<Map<String, Value>, String> {
        if args.contains_key("__proto__") {
            return Err("argument __proto__ is not allowed".into());
        }
        if let Some(v) = args.remove("accept_large_output")
            && !v.is_boolean()
        {
            return Err("accept_large_output must be a boolean".into());
        }
        if let Some(v) = args.remove("intent")
            && !v.is_string()
        {
            return Err("intent must be a string".into());
        }
        for key in args.keys() {
            if !self.props.iter().any(|p| p.name == key) {
                return Err(format!("{}: unknown argument {key:?}", self.name));
            }
        }
        for pr in self.props {
            match args.get(pr.name) {
                None | Some(Value::Null) if pr.required => {
                    return Err(format!(
                        "{}: missing required argument {:?}",
                        self.name, pr.name
                    ));
                }
                None => {}
                Some(v) => {
                    let ok = match pr.ty {
                        Ty::Str => v.is_string(),
                        Ty::StrMax(n) => v.as_str().is_some_and(|s| s.chars().count() <= n),
                        Ty::Bool => v.is_boolean(),
                        Ty::Num => v.is_number(),
                        Ty::StrList => v.as_array().is_some_and(|a| a.iter().all(Value::is_string)),
                        Ty::Enum(allowed) => v.as_str().is_some_and(|s| allowed.contains(&s)),
                        Ty::Any => true,
                    };
                    if !ok {
                        return Err(format!(
                            "{}: argument {:?} has the wrong type or value",
                            self.name, pr.name
                        ));
                    }
                }
            }
        }
        Ok(args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn schemas_are_closed_and_widened_only_for_jcode() {
        for spec in SPECS {
            let s = spec.schema(false);
            assert_eq!(s["additionalProperties"], json!(false), "{}", spec.name);
            let w = spec.schema(true);
            assert!(w["properties"].get("intent").is_some());
            assert!(s["properties"].get("intent").is_none());
        }
        assert_eq!(SPECS.len(), 22);
    }

    #[test]
    fn validation_strips_extras_and_refuses_unknown_keys() {
        let send = spec("cotal_send").unwrap();
        let out = send
            .validate(m(
                json!({"text": "hi", "intent": "x", "accept_large_output": true}),
            ))
            .unwrap();
        assert_eq!(out, m(json!({"text": "hi"})));
        assert!(
            send.validate(m(json!({"text": "hi", "owner": "local"})))
                .is_err()
        );
        assert!(
            send.validate(m(json!({"text": "hi", "__proto__": {}})))
                .is_err()
        );
        assert!(send.validate(m(json!({"channel": "g"}))).is_err());
        assert!(send.validate(m(json!({"text": 5}))).is_err());
        assert!(send.validate(m(json!({"text": "x", "intent": 3}))).is_err());
        let st = spec("cotal_status").unwrap();
        assert!(st.validate(m(json!({"attention": "sleep"}))).is_err());
        assert!(st.validate(m(json!({"attention": "dnd"}))).is_ok());
        let y = spec("cotal_yield").unwrap();
        assert!(
            y.validate(m(json!({"status": "done", "note": "x".repeat(4097)})))
                .is_err()
        );
    }

    #[test]
    fn capability_gates() {
        let mut g = ToolGate {
            space: "s".into(),
            name: "n".into(),
            authed: true,
            capabilities: vec![],
        };
        assert!(!g.allows("cotal_spawn"));
        assert!(!g.allows("cotal_run"));
        assert!(g.allows("cotal_send"));
        g.capabilities.push("spawn".into());
        assert!(g.allows("cotal_persona"));
        g.authed = false;
        assert!(g.allows("cotal_run"));
    }
}
