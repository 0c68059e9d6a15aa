//! Files of this repository (dashboards, rules, docs, packaging), for the tests and tasks that
//! read them.

use std::path::PathBuf;

/// `<workspace>/<rel>`.
pub fn path(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(rel)
}

/// The documents of a YAML file of the repository, as JSON values; panics naming the file
/// when one does not parse (for tests).
pub fn yaml_documents(rel: &str) -> Vec<serde_json::Value> {
    use serde::Deserialize;
    let text = std::fs::read_to_string(path(rel)).unwrap();
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|doc| serde_json::Value::deserialize(doc).unwrap_or_else(|e| panic!("{rel}: {e}")))
        .collect()
}
