//! The Cotal extension's package: every dependency in package.json is an exact version (no
//! range, tag or URL), and package-lock.json is present and pins those same versions, so
//! `npm ci` installs what was reviewed.

use std::path::Path;

use serde_json::Value;

/// An exact semver: digits.digits.digits with an optional pre-release or build suffix.
pub fn exact(version: &str) -> bool {
    let core = version.split(['-', '+']).next().unwrap_or("");
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
}

/// Check `package` against `lock`; returns how many dependencies are pinned.
pub fn check_docs(package: &Value, lock: &Value) -> Result<usize, String> {
    let mut n = 0;
    for section in [
        "dependencies",
        "devDependencies",
        "optionalDependencies",
        "peerDependencies",
    ] {
        let Some(deps) = package.get(section).and_then(Value::as_object) else {
            continue;
        };
        for (name, v) in deps {
            let v = v.as_str().unwrap_or("");
            if !exact(v) {
                return Err(format!("{section}.{name} is {v:?}, not an exact version"));
            }
            let locked = lock
                .pointer(&format!(
                    "/packages/node_modules~1{}",
                    name.replace('/', "~1")
                ))
                .and_then(|p| p.get("version"))
                .and_then(Value::as_str);
            if locked != Some(v) {
                return Err(format!(
                    "package-lock.json pins {name} at {locked:?}, package.json says {v}: run npm install"
                ));
            }
            n += 1;
        }
    }
    Ok(n)
}

pub fn check(dir: &Path) -> Result<usize, String> {
    let read = |name: &str| -> Result<Value, String> {
        let p = dir.join(name);
        let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", p.display()))
    };
    check_docs(&read("package.json")?, &read("package-lock.json")?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_exact_versions_the_lockfile_pins_pass() {
        assert!(exact("5.9.3") && exact("1.0.0-beta.7") && exact("2.0.0+b1"));
        assert!(!exact("^5.9.3") && !exact("~1.2.0") && !exact("latest") && !exact("1.2"));
        let lock = json!({"packages": {"node_modules/typescript": {"version": "5.9.3"},
            "node_modules/@types/node": {"version": "20.19.43"}}});
        let ok = json!({"devDependencies": {"typescript": "5.9.3", "@types/node": "20.19.43"}});
        assert_eq!(check_docs(&ok, &lock), Ok(2));
        let ranged = json!({"devDependencies": {"typescript": "^5.9.3"}});
        assert!(
            check_docs(&ranged, &lock)
                .unwrap_err()
                .contains("not an exact version")
        );
        let drifted = json!({"devDependencies": {"typescript": "5.9.2"}});
        assert!(
            check_docs(&drifted, &lock)
                .unwrap_err()
                .contains("run npm install")
        );
    }
}
