//! `cargo xtask k8s`: the Kubernetes manifests generated from the monitoring sources
//! (rendered by `stornet_repo_checks::k8s`, which the unit tests also use to catch drift).

use anyhow::{Context, Result, bail};

use stornet_repo_checks::k8s;

/// Writes the generated manifests, or with `check` only reports the stale ones.
pub fn manifests(check: bool) -> Result<()> {
    if check {
        let stale = k8s::stale()?;
        if !stale.is_empty() {
            bail!(
                "{} differ from their sources; run `cargo xtask k8s`",
                stale.join(", ")
            );
        }
        println!("the Kubernetes manifests match their sources");
        return Ok(());
    }
    for g in k8s::render()? {
        let path = stornet_repo_checks::repo::path(g.path);
        let old = std::fs::read_to_string(&path).ok();
        if old.as_deref() == Some(g.text.as_str()) {
            println!("{}: unchanged", g.path);
        } else {
            std::fs::write(&path, &g.text).with_context(|| format!("writing {}", g.path))?;
            println!("{}: written", g.path);
        }
    }
    Ok(())
}
