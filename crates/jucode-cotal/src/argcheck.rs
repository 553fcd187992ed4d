//! Local check of a manager command's arguments against the input schema its
//! described contract pins (Cotal contract schemas are JSON Schema 2020-12), so
//! a malformed call is refused with the field named and nothing is sent.
//!
//! A hand-written subset, not a full validator: the `jsonschema` crate would
//! bring a regex engine, URI resolution and format checkers into every seat for
//! a pre-check the manager repeats authoritatively. Keywords outside the subset
//! (pattern, anyOf, oneOf, not, if/then/else, formats, digest `$ref`s) are not
//! evaluated here; skipping them can only accept more, never refuse a call the
//! manager would take.

use serde_json::{Map, Value};

/// Deeper than this (or a `$ref` loop) is left to the manager.
const MAX_DEPTH: usize = 32;

/// Check `args` against `schema`; the error names the offending field.
pub fn check(schema: &Value, args: &Value) -> Result<(), String> {
    Checker { root: schema }.check(schema, args, "", 0)
}

struct Checker<'a> {
    root: &'a Value,
}

/// How a field is named in an error: `name`, `launchOptions.effort`, `mentions[2]`.
fn field(path: &str) -> String {
    if path.is_empty() {
        "the arguments".to_string()
    } else {
        format!("argument {path:?}")
    }
}

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// JSON Schema equality: numbers compare by value (1 == 1.0).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn has_type(v: &Value, ty: &str) -> bool {
    match ty {
        "null" => v.is_null(),
        "boolean" => v.is_boolean(),
        "string" => v.is_string(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        "number" => v.is_number(),
        "integer" => {
            v.is_i64()
                || v.is_u64()
                || v.as_f64()
                    .is_some_and(|f| f.is_finite() && f.fract() == 0.0)
        }
        // An unknown type name is the manager's to judge.
        _ => true,
    }
}

fn limit(s: &Map<String, Value>, key: &str) -> Option<f64> {
    s.get(key).and_then(Value::as_f64)
}

impl Checker<'_> {
    /// A local `#/…` JSON pointer into the schema document; anything else is unresolved.
    fn resolve(&self, reference: &str) -> Option<&Value> {
        let pointer = reference.strip_prefix('#')?;
        if pointer.is_empty() {
            return Some(self.root);
        }
        if !pointer.starts_with('/') {
            return None;
        }
        self.root.pointer(pointer)
    }

    fn check(&self, schema: &Value, v: &Value, path: &str, depth: usize) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Ok(());
        }
        let s = match schema {
            Value::Bool(false) => return Err(format!("{} is not allowed", field(path))),
            Value::Object(o) => o,
            _ => return Ok(()),
        };
        if let Some(target) = s
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| self.resolve(r))
        {
            self.check(target, v, path, depth + 1)?;
        }
        if let Some(all) = s.get("allOf").and_then(Value::as_array) {
            for sub in all {
                self.check(sub, v, path, depth + 1)?;
            }
        }
        match s.get("type") {
            Some(Value::String(t)) if !has_type(v, t) => {
                return Err(format!("{} must be {t}, not {}", field(path), type_name(v)));
            }
            Some(Value::Array(ts)) => {
                let names: Vec<&str> = ts.iter().filter_map(Value::as_str).collect();
                if !names.is_empty() && !names.iter().any(|t| has_type(v, t)) {
                    return Err(format!(
                        "{} must be {}, not {}",
                        field(path),
                        names.join(" or "),
                        type_name(v)
                    ));
                }
            }
            _ => {}
        }
        if let Some(options) = s.get("enum").and_then(Value::as_array)
            && !options.iter().any(|o| same(o, v))
        {
            let list: Vec<String> = options.iter().map(Value::to_string).collect();
            return Err(format!(
                "{} must be one of {}",
                field(path),
                list.join(", ")
            ));
        }
        if let Some(c) = s.get("const")
            && !same(c, v)
        {
            return Err(format!("{} must be {c}", field(path)));
        }
        match v {
            Value::String(text) => self.string(s, text, path),
            Value::Number(n) => self.number(s, n.as_f64(), path),
            Value::Array(items) => self.array(s, items, path, depth),
            Value::Object(obj) => self.object(s, obj, path, depth),
            _ => Ok(()),
        }
    }

    fn string(&self, s: &Map<String, Value>, text: &str, path: &str) -> Result<(), String> {
        // Lengths count code points, as JSON Schema does.
        let n = text.chars().count() as f64;
        if limit(s, "maxLength").is_some_and(|max| n > max) {
            return Err(format!(
                "{} is longer than {} characters",
                field(path),
                s["maxLength"]
            ));
        }
        if limit(s, "minLength").is_some_and(|min| n < min) {
            return Err(format!(
                "{} is shorter than {} characters",
                field(path),
                s["minLength"]
            ));
        }
        Ok(())
    }

    fn number(&self, s: &Map<String, Value>, n: Option<f64>, path: &str) -> Result<(), String> {
        let Some(n) = n else {
            return Ok(());
        };
        let bad = |what: &str, key: &str| Err(format!("{} must be {what} {}", field(path), s[key]));
        if limit(s, "minimum").is_some_and(|m| n < m) {
            return bad("at least", "minimum");
        }
        if limit(s, "maximum").is_some_and(|m| n > m) {
            return bad("at most", "maximum");
        }
        if limit(s, "exclusiveMinimum").is_some_and(|m| n <= m) {
            return bad("more than", "exclusiveMinimum");
        }
        if limit(s, "exclusiveMaximum").is_some_and(|m| n >= m) {
            return bad("less than", "exclusiveMaximum");
        }
        Ok(())
    }

    fn array(
        &self,
        s: &Map<String, Value>,
        items: &[Value],
        path: &str,
        depth: usize,
    ) -> Result<(), String> {
        let n = items.len() as f64;
        if limit(s, "maxItems").is_some_and(|max| n > max) {
            return Err(format!(
                "{} has more than {} items",
                field(path),
                s["maxItems"]
            ));
        }
        if limit(s, "minItems").is_some_and(|min| n < min) {
            return Err(format!(
                "{} has fewer than {} items",
                field(path),
                s["minItems"]
            ));
        }
        let prefix = s
            .get("prefixItems")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        for (i, item) in items.iter().enumerate() {
            let at = format!("{path}[{i}]");
            if let Some(sub) = prefix.get(i) {
                self.check(sub, item, &at, depth + 1)?;
            } else if let Some(sub) = s.get("items").filter(|x| x.is_object() || x.is_boolean()) {
                self.check(sub, item, &at, depth + 1)?;
            }
        }
        if s.get("uniqueItems") == Some(&Value::Bool(true)) {
            for (i, a) in items.iter().enumerate() {
                if items[..i].iter().any(|b| same(a, b)) {
                    return Err(format!("{} repeats an item", field(path)));
                }
            }
        }
        Ok(())
    }

    fn object(
        &self,
        s: &Map<String, Value>,
        obj: &Map<String, Value>,
        path: &str,
        depth: usize,
    ) -> Result<(), String> {
        if let Some(req) = s.get("required").and_then(Value::as_array) {
            for k in req.iter().filter_map(Value::as_str) {
                if !obj.contains_key(k) {
                    return Err(format!("missing required {}", field(&child(path, k))));
                }
            }
        }
        let props = s.get("properties").and_then(Value::as_object);
        // With patternProperties (regexes, not evaluated here) the rest is unknown.
        let patterned = s.contains_key("patternProperties");
        // `unevaluatedProperties` closes the object only when nothing else evaluates
        // properties; otherwise which keys are evaluated is the manager's question.
        let composed = ["allOf", "anyOf", "oneOf", "$ref", "if", "dependentSchemas"]
            .iter()
            .any(|k| s.contains_key(*k));
        let rest = match (
            s.get("additionalProperties"),
            s.get("unevaluatedProperties"),
        ) {
            (Some(a), _) => Some(a),
            (None, Some(u)) if !composed => Some(u),
            _ => None,
        };
        for (k, v) in obj {
            let at = child(path, k);
            match props.and_then(|p| p.get(k)) {
                Some(sub) => self.check(sub, v, &at, depth + 1)?,
                None if patterned => {}
                None => match rest {
                    Some(Value::Bool(false)) => {
                        return Err(format!(
                            "{} is not a field the manager's input schema allows",
                            field(&at)
                        ));
                    }
                    Some(sub) => self.check(sub, v, &at, depth + 1)?,
                    None => {}
                },
            }
        }
        let n = obj.len() as f64;
        if limit(s, "maxProperties").is_some_and(|max| n > max) {
            return Err(format!(
                "{} has more than {} fields",
                field(path),
                s["maxProperties"]
            ));
        }
        if limit(s, "minProperties").is_some_and(|min| n < min) {
            return Err(format!(
                "{} has fewer than {} fields",
                field(path),
                s["minProperties"]
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spawn_schema() -> Value {
        json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "additionalProperties": false,
            "required": ["name"],
            "properties": {
                "name": {"type": "string", "minLength": 1, "maxLength": 8},
                "count": {"type": "integer", "minimum": 1},
                "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true},
                "mode": {"enum": ["a", "b"]},
                "launchOptions": {"$ref": "#/$defs/opts"},
                "free": {"type": "object", "patternProperties": {"^x": {}}, "additionalProperties": false}
            },
            "$defs": {"opts": {"type": "object", "additionalProperties": false,
                "properties": {"effort": {"type": ["string", "null"]}}}}
        })
    }

    fn err(args: Value) -> String {
        check(&spawn_schema(), &args).unwrap_err()
    }

    #[test]
    fn accepts_what_the_schema_allows() {
        let ok = json!({"name": "carol", "count": 2.0, "tags": ["x"], "mode": "b",
            "launchOptions": {"effort": null}, "free": {"y": 1}});
        check(&spawn_schema(), &ok).unwrap();
    }

    #[test]
    fn names_the_field_it_refuses() {
        assert!(err(json!({"name": "c", "owner": "x"})).contains("\"owner\" is not a field"));
        assert!(err(json!({})).contains("missing required argument \"name\""));
        assert!(err(json!({"name": 5})).contains("\"name\" must be string, not a number"));
        assert!(err(json!({"name": "much too long"})).contains("\"name\" is longer than 8"));
        assert!(err(json!({"name": "c", "count": 1.5})).contains("\"count\" must be integer"));
        assert!(err(json!({"name": "c", "count": 0})).contains("\"count\" must be at least 1"));
        assert!(err(json!({"name": "c", "tags": ["a", 3]})).contains("\"tags[1]\" must be string"));
        assert!(err(json!({"name": "c", "tags": ["a", "a"]})).contains("\"tags\" repeats"));
        assert!(err(json!({"name": "c", "mode": "z"})).contains("\"mode\" must be one of"));
        let e = err(json!({"name": "c", "launchOptions": {"bogus": 1}}));
        assert!(e.contains("\"launchOptions.bogus\" is not a field"), "{e}");
        let e = err(json!({"name": "c", "launchOptions": {"effort": 3}}));
        assert!(
            e.contains("\"launchOptions.effort\" must be string or null"),
            "{e}"
        );
        assert!(err(json!([1])).contains("the arguments must be object"));
    }

    #[test]
    fn what_it_cannot_evaluate_is_left_to_the_manager() {
        let s = json!({"type": "object", "properties": {"a": {"pattern": "^x$", "$ref": "cotal:sha256:00"}},
            "unevaluatedProperties": false, "anyOf": [{"required": ["zzz"]}]});
        check(&s, &json!({"a": "y"})).unwrap();
        // unevaluatedProperties alone closes the object.
        let closed =
            json!({"type": "object", "properties": {"a": {}}, "unevaluatedProperties": false});
        assert!(
            check(&closed, &json!({"b": 1}))
                .unwrap_err()
                .contains("\"b\"")
        );
        // A $ref loop ends at the depth bound instead of recursing forever.
        let looped = json!({"$ref": "#"});
        check(&looped, &json!({})).unwrap();
        check(&json!(true), &json!({"anything": 1})).unwrap();
        assert!(check(&json!(false), &json!({})).is_err());
    }
}
