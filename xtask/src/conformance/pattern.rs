//! Frame patterns: exact JSON comparison with `$` placeholders, captures and `${var}`
//! substitution. The grammar is documented in `fixtures/README.md`.

use serde_json::{Map, Value};

/// Variables of one fixture run: built-ins (`home`, `token`, …) and captures.
pub type Vars = Map<String, Value>;

/// Replaces `${name}` in every string of `value`. A string that is exactly `${name}` becomes the
/// variable's JSON value (a number stays a number). In patterns (`escape`), a substituted string
/// that starts with `$` is escaped as `$$` so data never reads as a placeholder.
pub fn substitute(value: &Value, vars: &Vars, escape: bool) -> Result<Value, String> {
    Ok(match value {
        Value::String(s) => substitute_str(s, vars, escape)?,
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| substitute(v, vars, escape))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                out.insert(k.clone(), substitute(v, vars, escape)?);
            }
            Value::Object(out)
        }
        other => other.clone(),
    })
}

fn lookup<'a>(name: &str, vars: &'a Vars) -> Result<&'a Value, String> {
    vars.get(name)
        .ok_or_else(|| format!("variable ${{{name}}} is not set (captured or built in)"))
}

fn as_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn substitute_str(s: &str, vars: &Vars, escape: bool) -> Result<Value, String> {
    // `$$` escapes are left for the matcher.
    if s.starts_with("$$") || !s.contains("${") {
        return Ok(Value::String(s.to_string()));
    }
    if let Some(name) = s.strip_prefix("${").and_then(|r| r.strip_suffix('}'))
        && !name.contains(['{', '}', '$'])
    {
        let value = lookup(name, vars)?.clone();
        return Ok(match value {
            Value::String(text) if escape && text.starts_with('$') => {
                Value::String(format!("${text}"))
            }
            other => other,
        });
    }
    let mut out = String::new();
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| format!("unclosed ${{ in {s:?}"))?;
        let text = as_text(lookup(&after[..end], vars)?);
        // Only at the very start could substituted text turn into a placeholder.
        if escape && out.is_empty() && start == 0 && text.starts_with('$') {
            out.push('$');
        }
        out.push_str(&text);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(Value::String(out))
}

/// Matches `actual` against `pattern`, exactly but for placeholders. Captures are collected in
/// `captures` and only meant to be kept when the whole match succeeds. The error names the path
/// of the first difference.
pub fn matches(
    pattern: &Value,
    actual: &Value,
    captures: &mut Vec<(String, Value)>,
) -> Result<(), String> {
    match_at(pattern, actual, captures, "$")
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A type check placeholder (`$any`, `$string`, …) applied to `actual`.
fn type_check(kind: &str, actual: &Value) -> Option<bool> {
    Some(match kind {
        "any" | "" => true,
        "string" => actual.is_string(),
        "number" => actual.is_number(),
        "bool" => actual.is_boolean(),
        "object" => actual.is_object(),
        "array" => actual.is_array(),
        "null" => actual.is_null(),
        _ => return None,
    })
}

fn short(v: &Value) -> String {
    let text = v.to_string();
    if text.chars().count() > 300 {
        let cut: String = text.chars().take(300).collect();
        format!("{cut}…")
    } else {
        text
    }
}

fn match_placeholder(
    ph: &str,
    actual: &Value,
    captures: &mut Vec<(String, Value)>,
    path: &str,
) -> Result<(), String> {
    let mismatch = |what: &str| format!("at {path}: expected {what}, got {}", short(actual));
    let text_check = |op: &str, arg: &str| -> Result<(), String> {
        let Some(s) = actual.as_str() else {
            return Err(mismatch(&format!("a string ({op} {arg:?})")));
        };
        let ok = match op {
            "prefix" => s.starts_with(arg),
            "suffix" => s.ends_with(arg),
            _ => s.contains(arg),
        };
        if ok {
            Ok(())
        } else {
            Err(mismatch(&format!("a string with {op} {arg:?}")))
        }
    };
    for op in ["prefix", "suffix", "contains"] {
        if let Some(arg) = ph.strip_prefix(op).and_then(|r| r.strip_prefix(':')) {
            return text_check(op, arg);
        }
    }
    let (kind, capture) = match ph.split_once('=') {
        Some((kind, name)) => (kind, Some(name)),
        None => (ph, None),
    };
    match type_check(kind, actual) {
        None => Err(format!("at {path}: unknown placeholder \"${ph}\"")),
        Some(false) => Err(mismatch(&format!("\"${kind}\""))),
        Some(true) => {
            if let Some(name) = capture {
                if name.is_empty() {
                    return Err(format!("at {path}: capture \"${ph}\" has no name"));
                }
                captures.push((name.to_string(), actual.clone()));
            }
            Ok(())
        }
    }
}

fn numbers_equal(a: &serde_json::Number, b: &serde_json::Number) -> bool {
    a == b || matches!((a.as_f64(), b.as_f64()), (Some(x), Some(y)) if x == y)
}

fn match_at(
    pattern: &Value,
    actual: &Value,
    captures: &mut Vec<(String, Value)>,
    path: &str,
) -> Result<(), String> {
    match (pattern, actual) {
        (Value::String(p), _) if p.starts_with('$') && !p.starts_with("$$") => {
            match_placeholder(&p[1..], actual, captures, path)
        }
        (Value::String(p), Value::String(a)) => {
            let want = p
                .strip_prefix('$')
                .filter(|_| p.starts_with("$$"))
                .unwrap_or(p);
            if want == a {
                Ok(())
            } else {
                Err(format!(
                    "at {path}: expected {}, got {}",
                    short(&Value::String(want.to_string())),
                    short(actual)
                ))
            }
        }
        (Value::Number(p), Value::Number(a)) if numbers_equal(p, a) => Ok(()),
        (Value::Object(p), Value::Object(a)) => {
            for key in a.keys() {
                if !p.contains_key(key) {
                    return Err(format!(
                        "at {path}: unexpected field {key:?} = {}",
                        short(&a[key])
                    ));
                }
            }
            for (key, pv) in p {
                let sub = format!("{path}.{key}");
                match a.get(key) {
                    Some(av) => match_at(pv, av, captures, &sub)?,
                    None => return Err(format!("at {sub}: missing (expected {})", short(pv))),
                }
            }
            Ok(())
        }
        (Value::Array(p), Value::Array(a)) => {
            if p.len() != a.len() {
                return Err(format!(
                    "at {path}: expected {} items, got {}: {}",
                    p.len(),
                    a.len(),
                    short(actual)
                ));
            }
            for (i, (pv, av)) in p.iter().zip(a).enumerate() {
                match_at(pv, av, captures, &format!("{path}[{i}]"))?;
            }
            Ok(())
        }
        _ if pattern == actual => Ok(()),
        _ => Err(format!(
            "at {path}: expected {} {}, got {} {}",
            kind_of(pattern),
            short(pattern),
            kind_of(actual),
            short(actual)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(pattern: Value, actual: Value) -> Result<Vec<(String, Value)>, String> {
        let mut caps = Vec::new();
        matches(&pattern, &actual, &mut caps).map(|()| caps)
    }

    #[test]
    fn exact_objects_and_placeholders() {
        assert!(check(json!({"a": 1, "b": "$string"}), json!({"b": "x", "a": 1.0})).is_ok());
        assert!(check(json!({"a": 1}), json!({"a": 1, "b": 2})).is_err());
        assert!(check(json!({"a": 1, "b": 2}), json!({"a": 1})).is_err());
        assert!(check(json!("$prefix:invalid frame:"), json!("invalid frame: x")).is_ok());
        assert!(
            check(
                json!("$contains:session_create"),
                json!("use session_create")
            )
            .is_ok()
        );
        assert!(check(json!("$$any"), json!("$any")).is_ok());
        assert!(check(json!("$$any"), json!(3)).is_err());
        assert!(check(json!("$bogus"), json!(3)).is_err());
        assert!(check(json!([1, "$any"]), json!([1, null])).is_ok());
        assert!(check(json!([1]), json!([1, 2])).is_err());
    }

    #[test]
    fn captures_and_substitution() -> Result<(), String> {
        let caps = check(
            json!({"s": "$=sid", "n": "$number=n"}),
            json!({"s": "abc", "n": 4}),
        )?;
        assert_eq!(
            caps,
            vec![("sid".into(), json!("abc")), ("n".into(), json!(4))]
        );
        assert!(check(json!("$number=n"), json!("4")).is_err());
        let mut vars = Vars::new();
        vars.insert("sid".into(), json!("abc"));
        vars.insert("n".into(), json!(4));
        vars.insert("odd".into(), json!("$any"));
        let out = substitute(
            &json!({"a": "${sid}", "b": "${n}", "c": "x-${n}-${sid}"}),
            &vars,
            false,
        )?;
        assert_eq!(out, json!({"a": "abc", "b": 4, "c": "x-4-abc"}));
        assert_eq!(substitute(&json!("${odd}"), &vars, true)?, json!("$$any"));
        assert!(substitute(&json!("${missing}"), &vars, false).is_err());
        Ok(())
    }
}
