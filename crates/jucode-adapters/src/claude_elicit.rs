//! MCP elicitations Claude Code forwards to its client (`control_request` `elicitation`) as
//! approval cards named `mcp_elicitation`: a url to open, or questions built from the form's
//! JSON schema. A client's `answers` are checked and typed against that schema before they go
//! back as the MCP `ElicitResult` (`{action, content}`).

use serde_json::{Map, Value, json};

use crate::{text_of, truncate};

/// An elicitation waiting for a client.
#[derive(Debug, Clone)]
pub(crate) struct Elicitation {
    pub request_id: String,
    pub server: String,
    pub elicitation_id: Option<String>,
    pub url: Option<String>,
    /// The form's questions (empty in url mode).
    pub questions: Vec<Question>,
    /// The card as shown, sent again when an answer does not fit the form.
    pub shown: Value,
}

/// One field of an elicitation form.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Question {
    pub id: String,
    pub header: String,
    pub question: String,
    /// `string`, `number`, `integer`, `boolean` or `array` (several of `options`).
    pub kind: String,
    pub required: bool,
    /// (value, label) pairs when the answer is one of a list.
    pub options: Vec<(String, String)>,
    pub default: Option<Value>,
}

impl Question {
    fn to_json(&self) -> Value {
        let options = (!self.options.is_empty()).then(|| {
            self.options
                .iter()
                .map(|(value, label)| json!({"value": value, "label": label}))
                .collect::<Vec<_>>()
        });
        json!({
            "id": self.id, "header": self.header, "question": self.question,
            "type": self.kind, "required": self.required, "options": options,
            "multiple": self.kind == "array", "default": self.default,
        })
    }
}

fn str_of(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

impl Elicitation {
    /// Reads the body of an `elicitation` control request.
    pub(crate) fn from_request(request_id: &str, request: &Value) -> Elicitation {
        let url_mode = request.get("mode").and_then(Value::as_str) == Some("url");
        let questions = match request.get("requested_schema") {
            Some(schema) if !url_mode => {
                let order: Vec<String> = request
                    .get("property_order")
                    .and_then(Value::as_array)
                    .map(|o| {
                        o.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default();
                questions(schema, &order)
            }
            _ => Vec::new(),
        };
        Elicitation {
            request_id: request_id.to_string(),
            server: str_of(request, "mcp_server_name").unwrap_or_default(),
            elicitation_id: str_of(request, "elicitation_id"),
            url: str_of(request, "url").filter(|_| url_mode),
            questions,
            shown: Value::Null,
        }
    }

    /// The `approval_request` fields for it.
    pub(crate) fn card(&self, call_id: &str, request: &Value) -> Value {
        let message = request.get("message").map(text_of).unwrap_or_default();
        let summary = if message.trim().is_empty() {
            format!("{} asks for input", self.server)
        } else {
            truncate(&message, 2000)
        };
        let questions = self.url.is_none().then(|| {
            self.questions
                .iter()
                .map(Question::to_json)
                .collect::<Vec<_>>()
        });
        json!({
            "call_id": call_id,
            "name": "mcp_elicitation",
            "summary": summary,
            "subagent_id": null,
            "hunks": null,
            "server": self.server,
            "mode": if self.url.is_some() { "url" } else { "form" },
            "url": self.url,
            "questions": questions,
            "title": request.get("title").and_then(Value::as_str),
        })
    }

    /// The `content` of an accepting answer: every answer typed as its question asks, the
    /// required ones present. Url mode takes no content.
    pub(crate) fn content(&self, answers: Option<&Value>) -> Result<Option<Value>, String> {
        if self.url.is_some() {
            return Ok(None);
        }
        let given = answer_map(answers)?;
        for id in given.keys() {
            if !self.questions.iter().any(|q| &q.id == id) {
                return Err(format!("unknown question {id}"));
            }
        }
        let mut content = Map::new();
        for q in &self.questions {
            let value = given.get(&q.id).filter(|v| !is_blank(v));
            match value {
                Some(v) => {
                    content.insert(q.id.clone(), typed(q, v)?);
                }
                None if q.required => {
                    return Err(format!("an answer to {} is required", q.header));
                }
                None => {}
            }
        }
        Ok(Some(Value::Object(content)))
    }
}

/// The form's fields in the server's order (`property_order`, else the schema's).
fn questions(schema: &Value, order: &[String]) -> Vec<Question> {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut ids: Vec<&String> = order
        .iter()
        .filter(|k| properties.contains_key(*k))
        .collect();
    ids.extend(properties.keys().filter(|k| !order.contains(k)));
    ids.into_iter()
        .map(|id| {
            let field = &properties[id];
            let title = str_of(field, "title");
            let kind = str_of(field, "type").unwrap_or_else(|| "string".into());
            let options = if kind == "array" {
                options_of(field.get("items").unwrap_or(&Value::Null))
            } else {
                options_of(field)
            };
            Question {
                id: id.clone(),
                header: title.clone().unwrap_or_else(|| id.clone()),
                question: str_of(field, "description")
                    .or(title)
                    .unwrap_or_else(|| id.clone()),
                kind,
                required: required.contains(&id.as_str()),
                options,
                default: field.get("default").cloned(),
            }
        })
        .collect()
}

/// The choices of a field: `enum` (labelled by `enumNames`), or `oneOf` / `anyOf` of
/// `{const, title}`.
fn options_of(field: &Value) -> Vec<(String, String)> {
    if let Some(values) = field.get("enum").and_then(Value::as_array) {
        let names = field.get("enumNames").and_then(Value::as_array);
        return values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let value = text_of(v);
                let label = names
                    .and_then(|n| n.get(i))
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| value.clone());
                (value, label)
            })
            .collect();
    }
    let choices = field
        .get("oneOf")
        .or(field.get("anyOf"))
        .and_then(Value::as_array);
    choices
        .into_iter()
        .flatten()
        .filter_map(|c| {
            let value = c.get("const").map(text_of)?;
            let label = str_of(c, "title").unwrap_or_else(|| value.clone());
            Some((value, label))
        })
        .collect()
}

/// A client's answers as id → value: an object, or a list of `{id, value}` / `{id, answers}`.
/// A value may also be `{answers: [...]}` (the shape of Codex's question answers).
fn answer_map(answers: Option<&Value>) -> Result<Map<String, Value>, String> {
    let unwrap = |v: &Value| match v.get("answers").or(v.get("value")) {
        Some(Value::Array(items)) if items.len() == 1 => items[0].clone(),
        Some(inner) if v.is_object() => inner.clone(),
        _ => v.clone(),
    };
    match answers {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(map)) => Ok(map.iter().map(|(k, v)| (k.clone(), unwrap(v))).collect()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| {
                let id = str_of(item, "id").ok_or("each answer needs an id")?;
                Ok((id, unwrap(item)))
            })
            .collect(),
        Some(_) => Err("answers must be an object of question ids to answers".into()),
    }
}

fn is_blank(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.trim().is_empty(),
        _ => false,
    }
}

/// An answer as the type its question asks for.
fn typed(q: &Question, v: &Value) -> Result<Value, String> {
    let bad = || format!("{}: {} is not a valid answer", q.header, text_of(v));
    let choice = |s: &str| -> Result<String, String> {
        if q.options.is_empty() {
            return Ok(s.to_string());
        }
        q.options
            .iter()
            .find(|(value, label)| value == s || label == s)
            .map(|(value, _)| value.clone())
            .ok_or_else(|| format!("{}: {s} is not one of the choices", q.header))
    };
    match q.kind.as_str() {
        "number" => match v {
            Value::Number(_) => Ok(v.clone()),
            Value::String(s) => s
                .trim()
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number)
                .ok_or_else(bad),
            _ => Err(bad()),
        },
        "integer" => match v {
            Value::Number(n) if n.is_i64() || n.is_u64() => Ok(v.clone()),
            Value::String(s) => s.trim().parse::<i64>().map(|n| json!(n)).map_err(|_| bad()),
            _ => Err(bad()),
        },
        "boolean" => match v {
            Value::Bool(_) => Ok(v.clone()),
            Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
                "true" | "yes" | "y" | "on" => Ok(json!(true)),
                "false" | "no" | "n" | "off" => Ok(json!(false)),
                _ => Err(bad()),
            },
            _ => Err(bad()),
        },
        "array" => {
            let items: Vec<String> = match v {
                Value::Array(items) => items.iter().map(text_of).collect(),
                other => vec![text_of(other)],
            };
            let items = items
                .iter()
                .map(|s| choice(s))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(json!(items))
        }
        _ => Ok(json!(choice(&text_of(v))?)),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn form() -> Elicitation {
        Elicitation::from_request(
            "r1",
            &json!({
                "subtype": "elicitation", "mcp_server_name": "deploy", "message": "Where to?",
                "mode": "form",
                "requested_schema": {"type": "object", "properties": {
                    "target": {"type": "string", "title": "Target", "enum": ["prod", "staging"],
                               "enumNames": ["Production", "Staging"]},
                    "replicas": {"type": "integer", "description": "How many?"},
                    "notify": {"type": "boolean", "default": false},
                    "tags": {"type": "array", "items": {"anyOf": [{"const": "a", "title": "A"}, {"const": "b"}]}},
                }, "required": ["target", "replicas"]},
                "property_order": ["target", "replicas", "notify", "tags"],
            }),
        )
    }

    #[test]
    fn a_form_schema_becomes_questions_in_the_servers_order() {
        let e = form();
        let ids: Vec<&str> = e.questions.iter().map(|q| q.id.as_str()).collect();
        assert_eq!(ids, ["target", "replicas", "notify", "tags"]);
        let card = e.card("c1", &json!({"message": "Where to?"}));
        assert_eq!(card["mode"], "form");
        assert_eq!(card["url"], Value::Null);
        assert_eq!(
            card["questions"][0],
            json!({"id":"target","header":"Target","question":"Target","type":"string",
                   "required":true,"multiple":false,"default":null,
                   "options":[{"value":"prod","label":"Production"},{"value":"staging","label":"Staging"}]})
        );
        assert_eq!(card["questions"][1]["question"], "How many?");
        assert_eq!(card["questions"][3]["multiple"], true);
        assert_eq!(
            card["questions"][3]["options"][1],
            json!({"value":"b","label":"b"})
        );
    }

    #[test]
    fn answers_are_typed_and_checked() {
        let e = form();
        let content = e
            .content(Some(&json!({"target": "Production", "replicas": "3",
                                  "notify": "yes", "tags": ["A", "b"]})))
            .unwrap()
            .unwrap();
        assert_eq!(
            content,
            json!({"target":"prod","replicas":3,"notify":true,"tags":["a","b"]})
        );
        // Codex-style answers and a list of {id, value} work too.
        let content = e
            .content(Some(
                &json!([{"id":"target","answers":["staging"]},{"id":"replicas","value":2}]),
            ))
            .unwrap()
            .unwrap();
        assert_eq!(content, json!({"target":"staging","replicas":2}));
        assert!(
            e.content(Some(&json!({"target": "prod"})))
                .unwrap_err()
                .contains("replicas is required")
        );
        assert!(
            e.content(Some(&json!({"target": "dev", "replicas": 1})))
                .unwrap_err()
                .contains("not one of the choices")
        );
        assert!(
            e.content(Some(&json!({"target": "prod", "replicas": "many"})))
                .is_err()
        );
        assert!(
            e.content(Some(&json!({"target": "prod", "replicas": 1, "x": 1})))
                .unwrap_err()
                .contains("unknown question x")
        );
        assert!(e.content(Some(&json!("prod"))).is_err());
    }

    #[test]
    fn a_url_elicitation_has_a_url_and_no_questions() {
        let request = json!({"subtype":"elicitation","mcp_server_name":"gh","message":"Sign in",
                             "mode":"url","url":"https://example.test/auth","elicitation_id":"e1"});
        let e = Elicitation::from_request("r2", &request);
        let card = e.card("c2", &request);
        assert_eq!(card["url"], "https://example.test/auth");
        assert_eq!(card["questions"], Value::Null);
        assert_eq!(card["summary"], "Sign in");
        assert_eq!(e.elicitation_id.as_deref(), Some("e1"));
        assert_eq!(e.content(Some(&json!({"a": 1}))).unwrap(), None);
    }
}
