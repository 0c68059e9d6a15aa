//! Every dependency a crate declares is used by its code: a dependency nothing names still
//! costs build time, a place in the lock file and a licence to keep.

use std::collections::BTreeMap;
use std::path::Path;

use stornet_repo_checks::repo;

/// Dependencies no source file names, and why they are declared anyway.
const NOT_NAMED: &[(&str, &str, &str)] = &[(
    "agent",
    "agent-ebpf",
    "built by build.rs with nightly as the eBPF object, never linked",
)];

/// Each top-level crate folder: the name its code imports it by (`[lib] name`, else the
/// package name with `_` for `-`), by package name.
fn import_names() -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(repo::path("")).unwrap() {
        let Ok(text) = std::fs::read_to_string(entry.unwrap().path().join("Cargo.toml")) else {
            continue;
        };
        let key = |section: &str| {
            text.lines()
                .skip_while(|l| l.trim() != section)
                .skip(1)
                .take_while(|l| !l.starts_with('['))
                .find_map(|l| l.strip_prefix("name = "))
                .map(|n| n.trim().trim_matches('"').to_string())
        };
        if let Some(package) = key("[package]") {
            let lib = key("[lib]").unwrap_or_else(|| package.replace('-', "_"));
            out.insert(package, lib);
        }
    }
    out
}

/// The dependencies a crate folder's `Cargo.toml` declares (normal, dev and build), with
/// the name its code would import each by.
fn declared(folder: &Path, libs: &BTreeMap<String, String>) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(folder.join("Cargo.toml")).unwrap();
    let mut out = Vec::new();
    let mut in_deps = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_deps = line.ends_with("dependencies]");
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if !in_deps || key.trim().starts_with('#') {
            continue;
        }
        let key = key.trim().to_string();
        // `name = { package = "x", ... }` is imported by `name`.
        let package = value
            .split_once("package = \"")
            .and_then(|(_, rest)| rest.split_once('"'))
            .map_or(key.clone(), |(p, _)| p.to_string());
        let import = if package != key {
            key.replace('-', "_")
        } else {
            libs.get(&key)
                .cloned()
                .unwrap_or_else(|| key.replace('-', "_"))
        };
        out.push((key, import));
    }
    out
}

/// The text of every Rust file below `dir` (no build output).
fn sources(dir: &Path, out: &mut String) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy();
        if p.is_dir() && name != "target" && !name.starts_with('.') {
            sources(&p, out);
        } else if name.ends_with(".rs") {
            out.push_str(&std::fs::read_to_string(&p).unwrap());
            out.push('\n');
        }
    }
}

/// Whether `text` names `ident` as a whole word.
fn names(text: &str, ident: &str) -> bool {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(ident).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + ident.len()..].chars().next();
        !before.is_some_and(word) && !after.is_some_and(word)
    })
}

#[test]
fn every_declared_dependency_is_named_by_the_code() {
    let libs = import_names();
    let mut unused = Vec::new();
    let mut checked = 0;
    for entry in std::fs::read_dir(repo::path("")).unwrap() {
        let folder = entry.unwrap().path();
        if !folder.join("Cargo.toml").is_file() || !folder.join("src").is_dir() {
            continue;
        }
        let name = folder.file_name().unwrap().to_string_lossy().into_owned();
        let mut text = String::new();
        sources(&folder, &mut text);
        for (dep, import) in declared(&folder, &libs) {
            checked += 1;
            let excused = NOT_NAMED.iter().any(|(f, d, _)| *f == name && *d == dep);
            if !excused && !names(&text, &import) {
                unused.push(format!("{name}: {dep} (imported as {import})"));
            }
        }
    }
    assert!(checked > 50, "only {checked} dependencies found");
    assert!(
        unused.is_empty(),
        "declared but never named in the code: {unused:#?}"
    );
}

#[test]
fn a_dependency_is_found_unused_only_when_nothing_names_it() {
    assert!(names("use base64::Engine;", "base64"));
    assert!(names("x = files::read_text(p)", "files"));
    assert!(!names("let base64_text = 1; // base64x", "base64"));
    assert!(!names("", "ureq"));
}
