//! `models`: the model catalog the operator's jcode `config.toml` declares
//! (providers with `model_catalog = true`, their `[[providers.<name>.models]]`
//! ids and any declared `reasoning_efforts`). Effort tiers are display
//! declarations only; jcode ignores that key, so every tier list is printed
//! with the "declared, not provider-verified" caveat beside it.

use std::path::Path;

use crate::{Error, Result};

/// The caveat printed beside every declared tier list.
pub const CAVEAT: &str = "variants (declared, not provider-verified)";

/// One declared model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Declared {
    pub provider: String,
    pub id: String,
    pub efforts: Vec<String>,
}

/// Parse the catalog out of `config.toml` text.
pub fn parse_catalog(text: &str) -> Result<Vec<Declared>> {
    let doc: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| Error::Config(format!("config.toml is malformed: {e}")))?;
    let mut out = Vec::new();
    let Some(providers) = doc.get("providers") else {
        return Ok(out);
    };
    let providers = providers
        .as_table()
        .ok_or_else(|| Error::Config("config.toml: providers is not a table".into()))?;
    for (name, p) in providers {
        let Some(p) = p.as_table() else {
            return Err(Error::Config(format!(
                "config.toml: providers.{name} is not a table"
            )));
        };
        if p.get("model_catalog").and_then(toml::Value::as_bool) != Some(true) {
            continue;
        }
        let models = p
            .get("models")
            .and_then(toml::Value::as_array)
            .filter(|a| !a.is_empty())
            .ok_or_else(|| {
                Error::Config(format!(
                    "config.toml: providers.{name} enables model_catalog but declares no [[providers.{name}.models]]"
                ))
            })?;
        for (i, m) in models.iter().enumerate() {
            let id = m
                .get("id")
                .and_then(toml::Value::as_str)
                .filter(|s| !s.is_empty())
                .ok_or_else(|| {
                    Error::Config(format!(
                        "config.toml: providers.{name}.models[{i}].id is missing"
                    ))
                })?;
            let efforts = match m.get("reasoning_efforts") {
                None => Vec::new(),
                Some(v) => v
                    .as_array()
                    .and_then(|a| {
                        a.iter()
                            .map(|e| e.as_str().map(str::to_string))
                            .collect::<Option<Vec<_>>>()
                    })
                    .ok_or_else(|| {
                        Error::Config(format!(
                            "config.toml: providers.{name}.models[{i}].reasoning_efforts is not a list of strings"
                        ))
                    })?,
            };
            out.push(Declared {
                provider: name.clone(),
                id: id.to_string(),
                efforts,
            });
        }
    }
    Ok(out)
}

/// Read `<jcode_home>/config.toml` and render the listing.
pub fn list(jcode_home: &Path) -> Result<String> {
    let p = jcode_home.join("config.toml");
    let text = std::fs::read_to_string(&p).map_err(|e| Error::io(&p, e))?;
    Ok(render(&parse_catalog(&text)?))
}

/// The same catalog as JSON, in the shape the manager's `listModels` returns
/// (`{source, models: [{id, provider, variants: [{name, options}]}]}`); each
/// declared tier carries the caveat in its options, so no reader can take it
/// for a capability the provider confirmed.
pub fn list_json(jcode_home: &Path) -> Result<serde_json::Value> {
    let p = jcode_home.join("config.toml");
    let text = std::fs::read_to_string(&p).map_err(|e| Error::io(&p, e))?;
    Ok(catalog_json(&parse_catalog(&text)?, &p))
}

pub fn catalog_json(models: &[Declared], source: &Path) -> serde_json::Value {
    let models: Vec<serde_json::Value> = models
        .iter()
        .map(|m| {
            let mut o = serde_json::json!({"id": m.id, "provider": m.provider});
            if !m.efforts.is_empty() {
                o["variants"] = m
                    .efforts
                    .iter()
                    .map(|e| {
                        serde_json::json!({"name": e, "options": {
                            "declared": true, "providerVerified": false, "note": CAVEAT}})
                    })
                    .collect();
            }
            o
        })
        .collect();
    serde_json::json!({"source": source.display().to_string(), "models": models})
}

pub fn render(models: &[Declared]) -> String {
    let mut s = String::new();
    if models.is_empty() {
        s.push_str("no provider in config.toml declares a model catalog\n");
    }
    for m in models {
        s.push_str(&format!("{}\t{}", m.provider, m.id));
        if !m.efforts.is_empty() {
            s.push_str(&format!("\t{CAVEAT}: {}", m.efforts.join(", ")));
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn lists_catalog_models_with_the_caveat() {
        let t = r#"
[provider]
default_provider = "fake"
[providers.fake]
type = "openai-compatible"
model_catalog = true
[[providers.fake.models]]
id = "fake-model"
reasoning_efforts = ["low", "high"]
[[providers.fake.models]]
id = "fake-model-2"
[providers.other]
type = "openai-compatible"
"#;
        let m = parse_catalog(t).unwrap();
        assert_eq!(m.len(), 2);
        let out = render(&m);
        assert!(
            out.contains("fake\tfake-model\tvariants (declared, not provider-verified): low, high")
        );
        assert!(out.contains("fake\tfake-model-2\n"));
        assert!(!out.contains("other"));
        let j = catalog_json(&m, Path::new("/h/config.toml"));
        assert_eq!(
            j,
            serde_json::json!({"source": "/h/config.toml", "models": [
                {"id": "fake-model", "provider": "fake", "variants": [
                    {"name": "low", "options": {"declared": true, "providerVerified": false, "note": CAVEAT}},
                    {"name": "high", "options": {"declared": true, "providerVerified": false, "note": CAVEAT}}]},
                {"id": "fake-model-2", "provider": "fake"}]})
        );
    }

    #[test]
    fn malformed_or_empty_catalogs_fail_loud() {
        assert!(parse_catalog("[providers.x\n").is_err());
        let e = parse_catalog("[providers.x]\nmodel_catalog = true\n").unwrap_err();
        assert!(e.to_string().contains("providers.x"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        assert!(list(dir.path()).is_err());
    }
}
