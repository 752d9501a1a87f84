//! The status socket (docs/interface.md §3): HTTP/1.1 on a Unix socket, served inside the
//! supervisor's loop.

pub mod client;
mod error;
pub mod http;
pub mod routes;
pub mod server;

pub use error::Error;

/// A Kubernetes `Status` object for an error reply.
pub fn status_error(code: u16, reason: &str, message: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }))
    .unwrap_or_default()
}
