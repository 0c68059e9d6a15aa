//! Files of this repository (dashboards, rules, docs, packaging), for tests that check them.

use std::path::PathBuf;

/// `<workspace>/<rel>`.
pub fn path(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(rel)
}
