//! `cargo xtask circles` and the lint step's check: no import circle between the modules of
//! a crate. At every level of a crate's module tree, the sibling modules (a folder counts as
//! one, with everything below it) must form a chain, not a circle: a leaf never reaches up
//! into the modules that use it. A reference is any `crate::…` or `super::…` path in code
//! (in `use` lines and inline); a folder's `mod.rs` using its own children is not one.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// A module path from the crate root, e.g. `["options", "parse"]`.
type ModPath = Vec<String>;

/// One reference from a module to another, with where it was written.
#[derive(Clone, Debug)]
struct Edge {
    from: ModPath,
    to: ModPath,
    at: String,
}

/// Sibling modules that reach each other: all of them (`tangle`), and one shortest circle
/// among them (`members`, the last one uses the first) with one reference per step.
#[derive(Debug)]
pub struct Circle {
    pub krate: String,
    pub tangle: Vec<String>,
    pub members: Vec<String>,
    pub evidence: Vec<String>,
}

/// The crates of the workspace with a `src/` folder, by directory name.
fn crate_dirs(root: &Path) -> Result<Vec<PathBuf>> {
    let mut dirs = Vec::new();
    for entry in std::fs::read_dir(root).context("reading the workspace root")? {
        let path = entry?.path();
        if path.join("Cargo.toml").is_file() && path.join("src").is_dir() {
            dirs.push(path);
        }
    }
    dirs.sort();
    Ok(dirs)
}

/// Every circle in every crate of the workspace.
pub fn find(root: &Path) -> Result<Vec<Circle>> {
    let mut all = Vec::new();
    for dir in crate_dirs(root)? {
        let name = dir
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let files = rust_files(&dir.join("src"))?;
        let mut edges = Vec::new();
        for file in &files {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("reading {}", file.display()))?;
            let rel = file
                .strip_prefix(root)
                .unwrap_or(file)
                .display()
                .to_string();
            let module = module_of(file.strip_prefix(dir.join("src")).unwrap_or(file));
            edges.extend(references(&module, &text, &rel));
        }
        let modules: BTreeSet<ModPath> = files
            .iter()
            .map(|f| module_of(f.strip_prefix(dir.join("src")).unwrap_or(f)))
            .collect();
        all.extend(circles(&name, &modules, &edges));
    }
    Ok(all)
}

/// The lint step: fails naming each circle.
pub fn check(root: &Path) -> Result<()> {
    let found = find(root)?;
    if found.is_empty() {
        println!("no import circle between the modules of any crate");
        return Ok(());
    }
    print(&found);
    bail!("{} import circle(s) between modules", found.len())
}

pub fn print(found: &[Circle]) {
    for c in found {
        println!(
            "{}: {} -> {}",
            c.krate,
            c.members.join(" -> "),
            c.members[0]
        );
        if c.tangle.len() > c.members.len() {
            println!("    (tangled together: {})", c.tangle.join(", "));
        }
        for e in &c.evidence {
            println!("    {e}");
        }
    }
}

fn rust_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).with_context(|| format!("reading {}", d.display()))? {
            let path = entry?.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// `a/b.rs` and `a/b/mod.rs` are `a::b`; `lib.rs` and `main.rs` are the root.
fn module_of(rel: &Path) -> ModPath {
    let mut parts: ModPath = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// Source text with comments, strings and char literals blanked (newlines kept), so that
/// neither a doc link nor a message mentioning `crate::` counts as a reference.
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank = |out: &mut String, s: &[u8]| {
        for &c in s {
            out.push(if c == b'\n' { '\n' } else { ' ' });
        }
    };
    while i < b.len() {
        let rest = &b[i..];
        if rest.starts_with(b"//") {
            let end = rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len());
            blank(&mut out, &rest[..end]);
            i += end;
        } else if rest.starts_with(b"/*") {
            let end = text[i + 2..].find("*/").map_or(rest.len(), |p| p + 4);
            blank(&mut out, &rest[..end]);
            i += end;
        } else if rest[0] == b'r' && (rest.starts_with(b"r\"") || rest.starts_with(b"r#")) {
            let hashes = rest[1..].iter().take_while(|&&c| c == b'#').count();
            if rest.get(1 + hashes) == Some(&b'"') {
                let close = format!("\"{}", "#".repeat(hashes));
                let body = 2 + hashes;
                let end = text[i + body..]
                    .find(&close)
                    .map_or(rest.len(), |p| body + p + close.len());
                blank(&mut out, &rest[..end]);
                i += end;
            } else {
                out.push('r');
                i += 1;
            }
        } else if rest[0] == b'"' {
            let mut j = 1;
            while j < rest.len() && rest[j] != b'"' {
                j += if rest[j] == b'\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(rest.len());
            blank(&mut out, &rest[..end]);
            i += end;
        } else if rest[0] == b'\'' {
            // A char literal ('x', '\n', '\u{..}'), or else a lifetime.
            let end = if rest.get(1) == Some(&b'\\') {
                rest[2..].iter().position(|&c| c == b'\'').map(|p| p + 3)
            } else {
                let ch = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                (rest.get(1 + ch) == Some(&b'\'')).then_some(ch + 2)
            };
            match end {
                Some(end) => {
                    blank(&mut out, &rest[..end]);
                    i += end;
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            let ch = text[i..].chars().next().unwrap_or(' ');
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// The references a file makes to other modules of its crate.
fn references(module: &ModPath, text: &str, file: &str) -> Vec<Edge> {
    let code = code_only(text);
    let mut edges = Vec::new();
    // Inline `mod x { … }` blocks shift what `super` means.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let tokens = tokenize(&code);
    let mut k = 0;
    while k < tokens.len() {
        let (tok, line) = (&tokens[k].0, tokens[k].1);
        match tok.as_str() {
            "{" => depth += 1,
            "}" => {
                depth = depth.saturating_sub(1);
                if inline.last().is_some_and(|&(_, d)| d == depth) {
                    inline.pop();
                }
            }
            "mod" if tokens.get(k + 2).is_some_and(|t| t.0 == "{") => {
                inline.push((tokens[k + 1].0.clone(), depth));
            }
            "crate" | "super" | "self" if tokens.get(k + 1).is_some_and(|t| t.0 == "::") => {
                let here: ModPath = module
                    .iter()
                    .cloned()
                    .chain(inline.iter().map(|(m, _)| m.clone()))
                    .collect();
                let (paths, used) = path_tree(&tokens[k..]);
                for p in paths {
                    if let Some(to) = resolve(&here, &p) {
                        edges.push(Edge {
                            from: module.clone(),
                            to,
                            at: format!("{file}:{line}"),
                        });
                    }
                }
                k += used.max(1);
                continue;
            }
            _ => {}
        }
        k += 1;
    }
    edges
}

/// Identifiers, `::`, braces and other single characters, with their line numbers.
fn tokenize(code: &str) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    let mut line = 1;
    let mut chars = code.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c == '\n' {
            line += 1;
        } else if c.is_alphanumeric() || c == '_' {
            let mut end = i + c.len_utf8();
            while let Some(&(j, d)) = chars.peek() {
                if d.is_alphanumeric() || d == '_' {
                    end = j + d.len_utf8();
                    chars.next();
                } else {
                    break;
                }
            }
            out.push((code[i..end].to_string(), line));
        } else if c == ':' && chars.peek().is_some_and(|&(_, d)| d == ':') {
            chars.next();
            out.push(("::".into(), line));
        } else if !c.is_whitespace() {
            out.push((c.to_string(), line));
        }
    }
    out
}

/// The paths of a path expression or `use` tree starting at `tokens[0]`, with `{a, b::c}`
/// groups expanded; and how many tokens it took.
fn path_tree(tokens: &[(String, usize)]) -> (Vec<Vec<String>>, usize) {
    let mut prefix = Vec::new();
    let mut k = 0;
    while let Some((t, _)) = tokens.get(k) {
        if t == "{" {
            let mut paths = Vec::new();
            k += 1;
            loop {
                match tokens.get(k).map(|t| t.0.as_str()) {
                    None => return (paths, k),
                    Some("}") => return (paths, k + 1),
                    Some(",") => k += 1,
                    Some(_) => {
                        let (inner, used) = path_tree(&tokens[k..]);
                        for p in inner {
                            paths.push(prefix.iter().cloned().chain(p).collect());
                        }
                        k += used.max(1);
                        // Skip `as alias` and anything up to the next separator.
                        while let Some(t) = tokens.get(k).map(|t| t.0.as_str()) {
                            if t == "," || t == "}" {
                                break;
                            }
                            k += 1;
                        }
                    }
                }
            }
        }
        if t.chars().all(|c| c.is_alphanumeric() || c == '_') || t == "*" {
            prefix.push(t.clone());
            k += 1;
            if tokens.get(k).is_some_and(|t| t.0 == "::") {
                k += 1;
                continue;
            }
        }
        break;
    }
    (vec![prefix], k)
}

/// The module a path names (its longest module prefix), relative to the module `here`.
/// Anything not below the crate root (an external crate) is None.
fn resolve(here: &ModPath, path: &[String]) -> Option<ModPath> {
    let mut base = match path.first()?.as_str() {
        "crate" => Vec::new(),
        "self" | "super" => here.clone(),
        _ => return None,
    };
    let mut rest = &path[1..];
    if path[0] == "super" {
        base.pop()?;
    }
    while rest.first().is_some_and(|s| s == "super") {
        base.pop()?;
        rest = &rest[1..];
    }
    // Everything that might be a module; `circles` keeps the longest known prefix.
    base.extend(rest.iter().filter(|s| *s != "*").cloned());
    Some(base)
}

/// Circles among siblings at every level of one crate's module tree.
fn circles(krate: &str, modules: &BTreeSet<ModPath>, edges: &[Edge]) -> Vec<Circle> {
    // Trims a path to the longest prefix that is a module of the crate.
    let known = |p: &ModPath| -> ModPath {
        (0..=p.len())
            .rev()
            .map(|n| p[..n].to_vec())
            .find(|q| q.is_empty() || modules.contains(q))
            .unwrap_or_default()
    };
    let parents: BTreeSet<ModPath> = modules
        .iter()
        .flat_map(|m| (0..m.len()).map(|n| m[..n].to_vec()))
        .collect();
    let mut out = Vec::new();
    for parent in &parents {
        let depth = parent.len();
        // Sibling -> sibling, with the first reference seen as evidence.
        let mut graph: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        for e in edges {
            let to = known(&e.to);
            let (Some(a), Some(b)) = (
                e.from.get(depth).filter(|_| e.from.starts_with(parent)),
                to.get(depth).filter(|_| to.starts_with(parent)),
            ) else {
                continue;
            };
            if a != b {
                graph
                    .entry(a.clone())
                    .or_default()
                    .entry(b.clone())
                    .or_insert_with(|| format!("{} uses {}", e.at, to.join("::")));
            }
        }
        for scc in strongly_connected(&graph) {
            if scc.len() < 2 {
                continue;
            }
            let cycle = cycle_in(&graph, &scc);
            let evidence = cycle
                .iter()
                .zip(cycle.iter().cycle().skip(1))
                .map(|(a, b)| graph[a][b].clone())
                .collect();
            let name = |m: &String| {
                parent
                    .iter()
                    .chain(std::iter::once(m))
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("::")
            };
            let mut tangle: Vec<String> = scc.iter().map(name).collect();
            tangle.sort();
            out.push(Circle {
                krate: krate.to_string(),
                tangle,
                members: cycle.iter().map(name).collect(),
                evidence,
            });
        }
    }
    out
}

/// Tarjan's algorithm over a small graph.
fn strongly_connected(graph: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        graph: &'a BTreeMap<String, BTreeMap<String, String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        if let Some(next) = s.graph.get(v) {
            for w in next.keys() {
                let w = w.as_str();
                if !s.index.contains_key(w) {
                    visit(s, w);
                    let lw = s.low[w];
                    let lv = s.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(lw);
                } else if s.on_stack.contains(w) {
                    let iw = s.index[w];
                    let lv = s.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(iw);
                }
            }
        }
        if s.low[v] == s.index[v] {
            let mut scc = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                scc.push(w.to_string());
                if w == v {
                    break;
                }
            }
            s.out.push(scc);
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

/// One shortest cycle through the first member of a strongly connected set.
fn cycle_in(graph: &BTreeMap<String, BTreeMap<String, String>>, scc: &[String]) -> Vec<String> {
    let set: BTreeSet<&String> = scc.iter().collect();
    let start = scc.iter().min().expect("non-empty");
    let mut prev: BTreeMap<&String, &String> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for w in graph.get(v).into_iter().flat_map(|m| m.keys()) {
            if w == start {
                let mut path = vec![v.clone()];
                let mut at = v;
                while let Some(&p) = prev.get(at) {
                    path.push(p.clone());
                    at = p;
                }
                path.reverse();
                return path;
            }
            if set.contains(w) && !prev.contains_key(w) && w != start {
                prev.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    scc.to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(s: &str) -> ModPath {
        s.split("::")
            .filter(|p| !p.is_empty())
            .map(String::from)
            .collect()
    }

    fn targets(module: &str, text: &str) -> Vec<String> {
        references(&m(module), text, "f.rs")
            .into_iter()
            .map(|e| e.to.join("::"))
            .collect()
    }

    #[test]
    fn use_trees_are_expanded() {
        let t = targets(
            "a::b",
            "use crate::{x::{y, z::W}, q as r};\nuse super::c::D;\nfn f() { crate::k::f(); }",
        );
        assert_eq!(t, ["x::y", "x::z::W", "q", "a::c::D", "k::f"]);
    }

    #[test]
    fn comments_strings_and_test_modules_do_not_count() {
        let text = r##"
            /// See [crate::doc].
            // crate::comment
            const S: &str = "crate::string";
            const R: &str = r#"crate::raw"#;
            const C: char = '{';
            fn f<'a>(x: &'a str) {}
            #[cfg(test)]
            mod tests { use super::Thing; }
            use super::Sibling;
        "##;
        assert_eq!(targets("a::b", text), ["a::b::Thing", "a::Sibling"]);
    }

    #[test]
    fn a_circle_among_siblings_is_found_and_a_chain_is_not() {
        let modules: BTreeSet<ModPath> =
            ["a", "b", "c", "d", "d::e"].iter().map(|s| m(s)).collect();
        let edge = |f: &str, t: &str| Edge {
            from: m(f),
            to: m(t),
            at: format!("{f}.rs:1"),
        };
        // d uses its child e and e uses d: a folder and its own parts are not a circle.
        let mut edges = vec![
            edge("a", "b::X"),
            edge("b", "c::Y"),
            edge("d", "d::e::Z"),
            edge("d::e", "d::V"),
        ];
        assert!(circles("k", &modules, &edges).is_empty());
        edges.push(edge("c", "a::W"));
        let found = circles("k", &modules, &edges);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].members, ["a", "b", "c"]);
        assert_eq!(found[0].evidence[2], "c.rs:1 uses a");
        // A part of folder d that uses a, which uses d: a circle between a and d.
        edges.push(edge("d::e", "a::W"));
        edges.push(edge("a", "d::Z"));
        let found = circles("k", &modules, &edges);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].members, ["a", "d"]);
    }
}
