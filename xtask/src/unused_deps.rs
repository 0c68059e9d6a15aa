//! The lint step's check for unused dependencies: every dependency a workspace crate declares
//! (normal, dev or build) is named in its Rust code (`NAME::…`, `use NAME`, `extern crate
//! NAME`), under the name cargo gives it there (after a rename, the library's own name).
//! `cargo metadata` resolves those names; the crate's files are its folder's `.rs` files
//! (src/, tests/, benches/, examples/, build.rs). A dependency declared for another reason
//! (to rebuild when it changes, or to enable a feature of a crate below) is listed, with why,
//! in its crate's `[package.metadata.unused-deps] allowed`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// A dependency declared and never named: the crate, and the dependency's name in code.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Unused {
    pub krate: String,
    pub dependency: String,
}

/// The unused dependencies of the workspace whose manifest is `manifest`.
pub fn find(manifest: &Path) -> Result<Vec<Unused>> {
    let meta = crate::cmd::metadata(manifest)?;
    let members: BTreeSet<&str> = meta["workspace_members"]
        .as_array()
        .context("no workspace_members")?
        .iter()
        .filter_map(|m| m.as_str())
        .collect();
    let mut unused = Vec::new();
    for package in meta["packages"].as_array().context("no packages")? {
        let id = package["id"].as_str().unwrap_or_default();
        if !members.contains(id) {
            continue;
        }
        let name = package["name"].as_str().unwrap_or_default();
        let dir = Path::new(package["manifest_path"].as_str().unwrap_or_default())
            .parent()
            .context("manifest without a folder")?;
        let allowed: Vec<&str> = package["metadata"]["unused-deps"]["allowed"]
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
            .unwrap_or_default();
        let node = meta["resolve"]["nodes"]
            .as_array()
            .context("no resolve")?
            .iter()
            .find(|n| n["id"] == package["id"])
            .with_context(|| format!("{name} is not in the resolve graph"))?;
        let mut code = String::new();
        for file in rust_files(dir)? {
            code.push_str(&std::fs::read_to_string(&file)?);
            code.push('\n');
        }
        for dep in node["deps"].as_array().into_iter().flatten() {
            let dep_name = dep["name"].as_str().unwrap_or_default();
            let package_name = dep_name.replace('_', "-");
            if allowed.contains(&dep_name) || allowed.contains(&package_name.as_str()) {
                continue;
            }
            if !named(&code, dep_name) {
                unused.push(Unused {
                    krate: name.to_string(),
                    dependency: dep_name.to_string(),
                });
            }
        }
    }
    unused.sort();
    Ok(unused)
}

/// The lint step: fails naming each unused dependency.
pub fn check(root: &Path) -> Result<()> {
    let unused = find(&root.join("Cargo.toml"))?;
    if unused.is_empty() {
        println!("every dependency of every crate is used");
        return Ok(());
    }
    for u in &unused {
        println!("{}: dependency {} is not used", u.krate, u.dependency);
    }
    bail!(
        "{} unused dependencies: remove them, or say why in [package.metadata.unused-deps] allowed",
        unused.len()
    )
}

/// Whether `code` names crate `name`: `name::`, `use name` or `extern crate name`, not as the
/// tail of a longer path or identifier.
fn named(code: &str, name: &str) -> bool {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    code.match_indices(name).any(|(i, _)| {
        let before = &code[..i];
        let after = &code[i + name.len()..];
        // A leading `::` (`::files::read`) names the crate too; `a::files` does not.
        let unrooted = before.strip_suffix("::").unwrap_or(before);
        if unrooted.ends_with(ident) || unrooted.ends_with([':', '>']) || after.starts_with(ident) {
            return false;
        }
        let before = before.trim_end();
        after.starts_with("::") || before.ends_with("use") || before.ends_with("extern crate")
    })
}

/// The `.rs` files of a crate's folder, leaving out build output.
fn rust_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).with_context(|| format!("reading {}", d.display()))? {
            let path = entry?.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "target") {
                    stack.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_found_only_as_crate_paths() {
        assert!(named("use serde::Deserialize;", "serde"));
        assert!(named("    let v = serde_json::from_str(s)?;", "serde_json"));
        assert!(named("use base64;", "base64"));
        assert!(named("extern crate libc;", "libc"));
        assert!(named("#[tokio::main]", "tokio"));
        assert!(named("pub use ::files::{read_capped, read_text};", "files"));
        assert!(!named("Vec::<u8>::files::x", "files"));
        assert!(!named("use serde_json::Value;", "serde"));
        assert!(!named("crate::clock::now()", "clock"));
        assert!(!named("let rcgen = 1;", "rcgen"));
        assert!(!named("// mentions ureq in prose", "ureq"));
    }

    /// A workspace of three crates in a temporary folder: `app` uses `used` (renamed
    /// `used_lib` in its manifest) and declares `spare`, which it never names; `spare` is
    /// reported, and not once it is allowed.
    #[test]
    fn an_unused_dependency_is_reported() {
        let root = std::env::temp_dir().join(format!("unused-deps-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let write = |path: &str, text: &str| {
            let p = root.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        let lib = |name: &str| {
            format!("[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2024\"\n")
        };
        write(
            "Cargo.toml",
            "[workspace]\nmembers = [\"app\", \"used\", \"spare\"]\nresolver = \"3\"\n",
        );
        write("used/Cargo.toml", &lib("used"));
        write("used/src/lib.rs", "pub fn f() {}\n");
        write("spare/Cargo.toml", &lib("spare"));
        write("spare/src/lib.rs", "pub fn g() {}\n");
        let app = format!(
            "{}\n[dependencies]\nused_lib = {{ package = \"used\", path = \"../used\" }}\n\
             spare = {{ path = \"../spare\" }}\n",
            lib("app")
        );
        write("app/Cargo.toml", &app);
        write("app/src/main.rs", "fn main() {\n    used_lib::f();\n}\n");
        let found = find(&root.join("Cargo.toml")).unwrap();
        assert_eq!(
            found,
            [Unused {
                krate: "app".into(),
                dependency: "spare".into()
            }]
        );
        write(
            "app/Cargo.toml",
            &format!("{app}\n[package.metadata.unused-deps]\nallowed = [\"spare\"]\n"),
        );
        assert_eq!(find(&root.join("Cargo.toml")).unwrap(), []);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
