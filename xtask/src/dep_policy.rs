//! The lint step's dependency policy, read from `cargo metadata` (offline, about a second):
//!
//! - **licences**: every package in the build graph carries an SPDX licence expression that
//!   the allowed licences satisfy (`A OR B` needs one of them, `A AND B` both, `A WITH X` needs
//!   `A` and the exception `X`; the old `A/B` form reads as `A OR B`). A package with only a
//!   licence file fails: its terms need a person to read them.
//! - **sources**: crates come from crates.io or from the workspace's own folders, never from
//!   a git repository or another registry, so a build fetches nothing unreviewed.
//! - **duplicates**: a crate built in two versions is printed as a warning (it costs build
//!   time and binary size, and is often a dependency that lags).
//!
//! The allowed licences and exceptions are in the root `Cargo.toml`,
//! `[workspace.metadata.dep-policy]`.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result, bail};

/// crates.io's index, the only registry a dependency may come from.
const CRATES_IO: &str = "registry+https://github.com/rust-lang/crates.io-index";

/// What the policy found: breaches fail the lint step, duplicates are warnings.
#[derive(Debug, Default)]
pub struct Findings {
    pub breaches: Vec<String>,
    pub duplicates: Vec<String>,
}

/// The policy's findings for the workspace whose manifest is `manifest`.
pub fn find(manifest: &Path) -> Result<Findings> {
    let meta = crate::cmd::metadata(manifest)?;
    let policy = &meta["metadata"]["dep-policy"];
    let list = |key: &str| -> Result<Vec<String>> {
        let values = policy[key].as_array().with_context(|| {
            format!("[workspace.metadata.dep-policy] has no {key} list in the root Cargo.toml")
        })?;
        Ok(values
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect())
    };
    let allowed = Allowed {
        licences: list("licences")?,
        exceptions: list("exceptions")?,
    };
    let built: std::collections::BTreeSet<&str> = meta["resolve"]["nodes"]
        .as_array()
        .context("cargo metadata has no resolve graph")?
        .iter()
        .filter_map(|n| n["id"].as_str())
        .collect();
    let mut findings = Findings::default();
    let mut versions: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for package in meta["packages"].as_array().context("no packages")? {
        if !package["id"].as_str().is_some_and(|id| built.contains(id)) {
            continue;
        }
        let name = package["name"].as_str().unwrap_or_default();
        let version = package["version"].as_str().unwrap_or_default();
        let who = format!("{name} {version}");
        match package["license"].as_str() {
            None => findings.breaches.push(format!(
                "{who}: no SPDX licence expression (only a licence file)"
            )),
            Some(expr) => match allowed.satisfies(expr) {
                Ok(true) => {}
                Ok(false) => findings
                    .breaches
                    .push(format!("{who}: licence {expr:?} is not allowed")),
                Err(e) => findings
                    .breaches
                    .push(format!("{who}: licence {expr:?} cannot be read: {e}")),
            },
        }
        if let Some(source) = package["source"].as_str()
            && source != CRATES_IO
        {
            findings
                .breaches
                .push(format!("{who}: comes from {source}, not crates.io"));
        }
        versions.entry(name).or_default().push(version);
    }
    for (name, mut v) in versions {
        if v.len() > 1 {
            v.sort_unstable();
            findings.duplicates.push(format!(
                "{name} is built in {} versions: {}",
                v.len(),
                v.join(", ")
            ));
        }
    }
    Ok(findings)
}

/// The lint step: prints the duplicates and fails naming each breach.
pub fn check(root: &Path) -> Result<()> {
    let findings = find(&root.join("Cargo.toml"))?;
    for d in &findings.duplicates {
        println!("warning: {d}");
    }
    if findings.breaches.is_empty() {
        println!("every dependency's licence and source is allowed");
        return Ok(());
    }
    for b in &findings.breaches {
        println!("{b}");
    }
    bail!(
        "{} dependencies break the policy in [workspace.metadata.dep-policy]",
        findings.breaches.len()
    )
}

/// The licences and licence exceptions a dependency may carry.
struct Allowed {
    licences: Vec<String>,
    exceptions: Vec<String>,
}

impl Allowed {
    /// Whether SPDX expression `expr` can be met with the allowed licences alone.
    fn satisfies(&self, expr: &str) -> Result<bool> {
        let tokens = tokens(expr);
        let mut parser = Parser {
            tokens: &tokens,
            at: 0,
            allowed: self,
        };
        let ok = parser.or()?;
        if let Some(t) = tokens.get(parser.at) {
            bail!("unexpected {t:?}");
        }
        Ok(ok)
    }
}

/// The words and parentheses of an SPDX expression; `/` is the old spelling of `OR`.
fn tokens(expr: &str) -> Vec<String> {
    expr.replace('(', " ( ")
        .replace(')', " ) ")
        .replace('/', " OR ")
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// A recursive-descent reading of SPDX: `WITH` binds tighter than `AND`, `AND` than `OR`.
struct Parser<'a> {
    tokens: &'a [String],
    at: usize,
    allowed: &'a Allowed,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&str> {
        self.tokens.get(self.at).map(String::as_str)
    }

    fn next(&mut self) -> Result<&str> {
        let t = self
            .tokens
            .get(self.at)
            .context("the expression ends early")?;
        self.at += 1;
        Ok(t)
    }

    fn or(&mut self) -> Result<bool> {
        let mut ok = self.and()?;
        while self.peek() == Some("OR") {
            self.at += 1;
            ok |= self.and()?;
        }
        Ok(ok)
    }

    fn and(&mut self) -> Result<bool> {
        let mut ok = self.term()?;
        while self.peek() == Some("AND") {
            self.at += 1;
            ok &= self.term()?;
        }
        Ok(ok)
    }

    fn term(&mut self) -> Result<bool> {
        let word = self.next()?.to_string();
        if word == "(" {
            let ok = self.or()?;
            if self.next()? != ")" {
                bail!("a parenthesis is not closed");
            }
            return Ok(ok);
        }
        if matches!(word.as_str(), ")" | "AND" | "OR" | "WITH") {
            bail!("{word:?} where a licence belongs");
        }
        let mut ok = self.allowed.licences.contains(&word);
        if self.peek() == Some("WITH") {
            self.at += 1;
            let exception = self.next()?.to_string();
            ok &= self.allowed.exceptions.contains(&exception);
        }
        Ok(ok)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed() -> Allowed {
        Allowed {
            licences: vec!["MIT".into(), "Apache-2.0".into(), "Unicode-3.0".into()],
            exceptions: vec!["LLVM-exception".into()],
        }
    }

    #[test]
    fn expressions_are_read_as_spdx_says() {
        let a = allowed();
        assert!(a.satisfies("MIT").unwrap());
        assert!(a.satisfies("MIT OR GPL-3.0-only").unwrap());
        assert!(!a.satisfies("GPL-3.0-only").unwrap());
        assert!(!a.satisfies("MIT AND GPL-3.0-only").unwrap());
        assert!(a.satisfies("(MIT OR Apache-2.0) AND Unicode-3.0").unwrap());
        assert!(!a.satisfies("(MIT OR Apache-2.0) AND ISC").unwrap());
        // AND binds tighter than OR: the left side alone meets it.
        assert!(a.satisfies("MIT OR ISC AND GPL-2.0-only").unwrap());
        assert!(a.satisfies("MIT/Apache-2.0").unwrap());
        assert!(a.satisfies("Apache-2.0 WITH LLVM-exception").unwrap());
        assert!(
            !a.satisfies("Apache-2.0 WITH Classpath-exception-2.0")
                .unwrap()
        );
        assert!(!a.satisfies("GPL-2.0-only WITH LLVM-exception").unwrap());
    }

    #[test]
    fn malformed_expressions_are_errors_not_verdicts() {
        let a = allowed();
        for bad in [
            "",
            "MIT OR",
            "(MIT",
            "MIT)",
            "AND MIT",
            "MIT WITH",
            "MIT Apache-2.0",
        ] {
            assert!(a.satisfies(bad).is_err(), "{bad:?} was read");
        }
    }

    /// A workspace of two crates in a temporary folder: the one under GPL is named, the MIT
    /// one is not; without the policy table the check says where it belongs.
    #[test]
    fn a_crate_under_a_licence_not_allowed_is_named() {
        let root = std::env::temp_dir().join(format!("dep-policy-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let write = |path: &str, text: &str| {
            let p = root.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        let krate = |name: &str, licence: &str| {
            format!(
                "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\
                 license = \"{licence}\"\n"
            )
        };
        let workspace = "[workspace]\nmembers = [\"app\", \"lib\"]\nresolver = \"3\"\n";
        write("Cargo.toml", workspace);
        write("lib/Cargo.toml", &krate("lib", "GPL-3.0-only"));
        write("lib/src/lib.rs", "");
        write(
            "app/Cargo.toml",
            &format!(
                "{}[dependencies]\nlib = {{ path = \"../lib\" }}\n",
                krate("app", "MIT")
            ),
        );
        write("app/src/main.rs", "fn main() {}\n");
        let err = find(&root.join("Cargo.toml")).unwrap_err().to_string();
        assert!(err.contains("[workspace.metadata.dep-policy]"), "{err}");
        write(
            "Cargo.toml",
            &format!(
                "{workspace}[workspace.metadata.dep-policy]\nlicences = [\"MIT\"]\nexceptions = []\n"
            ),
        );
        let found = find(&root.join("Cargo.toml")).unwrap();
        assert_eq!(
            found.breaches,
            ["lib 0.1.0: licence \"GPL-3.0-only\" is not allowed"]
        );
        assert!(found.duplicates.is_empty());
        std::fs::remove_dir_all(&root).unwrap();
    }
}
