//! Messages packed into protobuf's `Any` under a type name we give. protobuf's own
//! `Any::pack`, and the shim crate's event `publish`, ask protobuf's reflection for the
//! name instead, which builds the descriptor tables of the message's protos on first use
//! and keeps them for good: for containerd's event protos, more of a shim's heap than the
//! rest of it (BENCHMARKS.md has the figure).

use containerd_shim::protos::protobuf::well_known_types::any::Any;
use containerd_shim::protos::protobuf::{Error, MessageDyn};

/// `m` encoded, as an `Any` of type `type_url`.
pub fn any(type_url: &str, m: &dyn MessageDyn) -> Result<Any, Error> {
    Ok(Any {
        type_url: type_url.into(),
        value: m.write_to_bytes_dyn()?,
        ..Default::default()
    })
}
