//! The workspace as `cargo metadata` reports it, reduced to what the tidy checks read: every
//! resolved package with its normal dependencies, and each member with the dependencies it
//! declares.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use serde_json::Value;

/// How a member depends on a crate (one dependency can be several at once).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DepKind {
    Normal,
    Dev,
    Build,
}

impl DepKind {
    pub fn section(self) -> &'static str {
        match self {
            DepKind::Normal => "[dependencies]",
            DepKind::Dev => "[dev-dependencies]",
            DepKind::Build => "[build-dependencies]",
        }
    }
}

/// One resolved dependency of a member.
#[derive(Debug, Clone)]
pub struct Dep {
    /// The package name, as written in Cargo.toml.
    pub package: String,
    /// The name the code uses (`serde_json`, or the rename).
    pub extern_name: String,
    pub kinds: BTreeSet<DepKind>,
}

/// A workspace member.
#[derive(Debug, Clone)]
pub struct Member {
    pub name: String,
    /// The directory holding its Cargo.toml.
    pub dir: PathBuf,
    pub deps: Vec<Dep>,
    /// Dependencies its Cargo.toml says the unused check gets wrong
    /// (`[package.metadata.cargo-machete] ignored = [...]`, the key cargo-machete reads too).
    pub unused_ok: Vec<String>,
}

#[derive(Debug)]
struct Package {
    name: String,
    /// Indices of its normal dependencies.
    normal: Vec<usize>,
}

#[derive(Debug)]
pub struct Workspace {
    pub root: PathBuf,
    pub target_dir: PathBuf,
    /// Sorted by name.
    pub members: Vec<Member>,
    packages: Vec<Package>,
}

fn str_field<'a>(v: &'a Value, key: &str) -> Result<&'a str> {
    v.get(key)
        .and_then(Value::as_str)
        .with_context(|| format!("cargo metadata: `{key}` is missing or not a string"))
}

fn array_field<'a>(v: &'a Value, key: &str) -> Result<&'a Vec<Value>> {
    v.get(key)
        .and_then(Value::as_array)
        .with_context(|| format!("cargo metadata: `{key}` is missing or not an array"))
}

impl Workspace {
    /// Reads `cargo metadata --format-version 1` output (with its `resolve` section).
    pub fn from_metadata(meta: &Value) -> Result<Workspace> {
        let packages_json = array_field(meta, "packages")?;
        let mut index: HashMap<&str, usize> = HashMap::new();
        for (i, p) in packages_json.iter().enumerate() {
            index.insert(str_field(p, "id")?, i);
        }
        let resolve = meta
            .get("resolve")
            .filter(|r| !r.is_null())
            .context("cargo metadata: no `resolve` section (was --no-deps given?)")?;

        let mut packages: Vec<Package> = packages_json
            .iter()
            .map(|p| {
                Ok(Package {
                    name: str_field(p, "name")?.to_string(),
                    normal: Vec::new(),
                })
            })
            .collect::<Result<_>>()?;
        // Per package, its resolved dependencies as (package index, extern name, kinds).
        let mut resolved: HashMap<usize, Vec<(usize, String, BTreeSet<DepKind>)>> = HashMap::new();
        for node in array_field(resolve, "nodes")? {
            let id = str_field(node, "id")?;
            let Some(&from) = index.get(id) else {
                bail!("cargo metadata: resolve node {id} is not a package");
            };
            let mut deps = Vec::new();
            for dep in array_field(node, "deps")? {
                let pkg = str_field(dep, "pkg")?;
                let Some(&to) = index.get(pkg) else {
                    bail!("cargo metadata: dependency {pkg} is not a package");
                };
                let mut kinds = BTreeSet::new();
                for k in array_field(dep, "dep_kinds")? {
                    kinds.insert(match k.get("kind").and_then(Value::as_str) {
                        None => DepKind::Normal,
                        Some("dev") => DepKind::Dev,
                        Some("build") => DepKind::Build,
                        Some(other) => bail!("cargo metadata: unknown dependency kind {other}"),
                    });
                }
                if kinds.contains(&DepKind::Normal) {
                    packages[from].normal.push(to);
                }
                deps.push((to, str_field(dep, "name")?.to_string(), kinds));
            }
            resolved.insert(from, deps);
        }

        let mut members = Vec::new();
        for id in array_field(meta, "workspace_members")? {
            let id = id
                .as_str()
                .context("cargo metadata: a workspace member id is not a string")?;
            let Some(&i) = index.get(id) else {
                bail!("cargo metadata: workspace member {id} is not a package");
            };
            let p = &packages_json[i];
            let manifest = PathBuf::from(str_field(p, "manifest_path")?);
            let dir = manifest
                .parent()
                .with_context(|| format!("{} has no parent directory", manifest.display()))?
                .to_path_buf();
            let deps = resolved
                .remove(&i)
                .unwrap_or_default()
                .into_iter()
                .map(|(to, extern_name, kinds)| Dep {
                    package: packages[to].name.clone(),
                    extern_name,
                    kinds,
                })
                .collect();
            let unused_ok = p
                .pointer("/metadata/cargo-machete/ignored")
                .and_then(Value::as_array)
                .map(|names| {
                    names
                        .iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            members.push(Member {
                name: packages[i].name.clone(),
                dir,
                deps,
                unused_ok,
            });
        }
        members.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Workspace {
            root: PathBuf::from(str_field(meta, "workspace_root")?),
            target_dir: PathBuf::from(str_field(meta, "target_directory")?),
            members,
            packages,
        })
    }

    pub fn member(&self, name: &str) -> Option<&Member> {
        self.members.iter().find(|m| m.name == name)
    }

    fn is_member(&self, name: &str) -> bool {
        self.member(name).is_some()
    }

    /// The workspace members `member` depends on directly (normal dependencies), sorted.
    pub fn member_deps(&self, member: &str) -> Vec<&str> {
        let Some(i) = self.member_package(member) else {
            return Vec::new();
        };
        let mut deps: Vec<&str> = self.packages[i]
            .normal
            .iter()
            .map(|&d| self.packages[d].name.as_str())
            .filter(|name| self.is_member(name))
            .collect();
        deps.sort();
        deps.dedup();
        deps
    }

    fn member_package(&self, member: &str) -> Option<usize> {
        if !self.is_member(member) {
            return None;
        }
        // Member names are unique; several versions of one registry crate never are members.
        self.packages.iter().position(|p| p.name == member)
    }

    /// Every package `from` reaches through normal dependencies that `forbidden` matches, each
    /// with the shortest chain of crates leading to it (`from` first).
    pub fn reachable(&self, from: &str, forbidden: impl Fn(&str) -> bool) -> Vec<Vec<String>> {
        let Some(start) = self.member_package(from) else {
            return Vec::new();
        };
        let mut parent: Vec<Option<usize>> = vec![None; self.packages.len()];
        let mut seen = vec![false; self.packages.len()];
        seen[start] = true;
        let mut queue = VecDeque::from([start]);
        let mut hits = Vec::new();
        while let Some(at) = queue.pop_front() {
            for &next in &self.packages[at].normal {
                if seen[next] {
                    continue;
                }
                seen[next] = true;
                parent[next] = Some(at);
                if forbidden(&self.packages[next].name) {
                    hits.push(next);
                }
                queue.push_back(next);
            }
        }
        let mut chains: Vec<Vec<String>> = hits
            .into_iter()
            .map(|hit| {
                let mut chain = vec![self.packages[hit].name.clone()];
                let mut at = hit;
                while let Some(p) = parent[at] {
                    chain.push(self.packages[p].name.clone());
                    at = p;
                }
                chain.reverse();
                chain
            })
            .collect();
        chains.sort();
        chains
    }
}

/// A package for [`fake_metadata`]: its name and its dependencies with their kinds.
#[cfg(test)]
pub type FakePackage<'a> = (&'a str, &'a [(&'a str, &'a [&'a str])]);

/// Builds `cargo metadata`-shaped JSON for tests: `(name, [(dependency, kinds)])` per package,
/// where a kind is `"normal"`, `"dev"` or `"build"`; the first `members` packages are members.
#[cfg(test)]
pub fn fake_metadata(packages: &[FakePackage], members: usize) -> Value {
    use serde_json::json;
    let id = |name: &str| format!("path+file:///ws/{name}#0.1.0");
    let packages_json: Vec<Value> = packages
        .iter()
        .map(|(name, _)| {
            json!({"name": name, "id": id(name), "manifest_path": format!("/ws/{name}/Cargo.toml"),
                   "metadata": null})
        })
        .collect();
    let nodes: Vec<Value> = packages
        .iter()
        .map(|(name, deps)| {
            let deps: Vec<Value> = deps
                .iter()
                .map(|(dep, kinds)| {
                    let kinds: Vec<Value> = kinds
                        .iter()
                        .map(|k| match *k {
                            "normal" => json!({"kind": null, "target": null}),
                            other => json!({"kind": other, "target": null}),
                        })
                        .collect();
                    json!({"name": dep.replace('-', "_"), "pkg": id(dep), "dep_kinds": kinds})
                })
                .collect();
            json!({"id": id(name), "deps": deps})
        })
        .collect();
    let member_ids: Vec<String> = packages.iter().take(members).map(|(n, _)| id(n)).collect();
    json!({
        "packages": packages_json,
        "workspace_members": member_ids,
        "resolve": {"nodes": nodes},
        "workspace_root": "/ws",
        "target_directory": "/ws/target",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains_follow_normal_dependencies_only() -> Result<()> {
        let meta = fake_metadata(
            &[
                ("hub", &[("engine", &["normal"]), ("hyper", &["dev"])]),
                ("engine", &[("tokio", &["normal"])]),
                ("tokio", &[]),
                ("hyper", &[]),
            ],
            2,
        );
        let ws = Workspace::from_metadata(&meta)?;
        assert_eq!(ws.member_deps("hub"), vec!["engine"]);
        assert_eq!(
            ws.reachable("hub", |n| n == "tokio" || n == "hyper"),
            vec![vec!["hub", "engine", "tokio"]]
        );
        assert!(ws.reachable("nobody", |_| true).is_empty());
        Ok(())
    }
}
