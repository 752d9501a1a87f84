//! `features`: the OCI runtime features document (runtime-spec features.md) of what this
//! runtime accepts.

/// The document `podinit runc features` prints.
pub fn document() -> serde_json::Value {
    serde_json::json!({})
}
