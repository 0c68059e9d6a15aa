//! The README's crate graph is the one the `Cargo.toml` files declare.

use std::collections::{BTreeMap, BTreeSet};

use stornet_repo_checks::repo;

/// Every crate of the repository by folder (a top-level folder with a `Cargo.toml`), with
/// its package name.
fn crates() -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(repo::path("")).unwrap() {
        let dir = entry.unwrap().path();
        let Ok(text) = std::fs::read_to_string(dir.join("Cargo.toml")) else {
            continue;
        };
        let name = text
            .lines()
            .skip_while(|l| l.trim() != "[package]")
            .find_map(|l| l.strip_prefix("name = "))
            .map(|n| n.trim().trim_matches('"').to_string());
        if let Some(name) = name {
            let folder = dir.file_name().unwrap().to_string_lossy().into_owned();
            out.insert(name, folder);
        }
    }
    out
}

/// The stornet crates (by folder) a `Cargo.toml` depends on: (normal and build, dev).
fn dependencies(
    folder: &str,
    by_name: &BTreeMap<String, String>,
) -> (BTreeSet<String>, BTreeSet<String>) {
    let text = std::fs::read_to_string(repo::path(&format!("{folder}/Cargo.toml"))).unwrap();
    let (mut normal, mut dev) = (BTreeSet::new(), BTreeSet::new());
    let mut section = "";
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line;
            continue;
        }
        let Some((key, _)) = line.split_once('=') else {
            continue;
        };
        let Some(dep) = by_name.get(key.trim()) else {
            continue;
        };
        match section {
            "[dependencies]" | "[build-dependencies]" => normal.insert(dep.clone()),
            "[dev-dependencies]" => dev.insert(dep.clone()),
            _ => false,
        };
    }
    dev.retain(|d| !normal.contains(d));
    (normal, dev)
}

#[test]
fn the_readme_crate_graph_is_the_declared_one() {
    let readme = std::fs::read_to_string(repo::path("README.md")).unwrap();
    let mut documented: BTreeMap<String, (BTreeSet<String>, BTreeSet<String>)> = BTreeMap::new();
    for row in readme
        .lines()
        .skip_while(|l| !l.starts_with("| crate | depends on |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
    {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let (plain, bracketed) = cells[2].split_once('[').unwrap_or((cells[2], ""));
        let names = |s: &str| -> BTreeSet<String> {
            s.split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_string)
                .collect()
        };
        documented.insert(
            cells[1].trim_matches('`').to_string(),
            (names(plain), names(bracketed)),
        );
    }
    let by_name = crates();
    assert!(by_name.len() >= 10, "{by_name:?}");
    let mut problems = Vec::new();
    for folder in by_name.values() {
        let declared = dependencies(folder, &by_name);
        let empty = (BTreeSet::new(), BTreeSet::new());
        let shown = documented.get(folder).unwrap_or(&empty);
        if *shown != declared {
            problems.push(format!(
                "{folder}: the README shows {shown:?}, Cargo.toml declares {declared:?}"
            ));
        }
    }
    for folder in documented.keys() {
        if !by_name.values().any(|f| f == folder) {
            problems.push(format!(
                "{folder}: in the README's crate graph, not a crate"
            ));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}
