//! Messages packed into protobuf's `Any` under a type name we give. protobuf's own
//! `Any::pack`, the shim crate's event `publish` and protobuf's `write_to_bytes_dyn` (for
//! the name in an error it may never give) ask protobuf's reflection for the message's
//! name, which builds the descriptor tables of the message's protos and of every proto they
//! import (containerd's import gogo's, which imports `descriptor.proto` with its comments)
//! on first use and keeps them for good: more of a shim's heap than the rest of it
//! (BENCHMARKS.md has the figure). Encoding through the message's own size and write needs
//! none of it.

use containerd_shim::protos::protobuf::well_known_types::any::Any;
use containerd_shim::protos::protobuf::{CodedOutputStream, Error, MessageDyn};

/// `m` encoded, as an `Any` of type `type_url`.
pub fn any(type_url: &str, m: &dyn MessageDyn) -> Result<Any, Error> {
    Ok(Any {
        type_url: type_url.into(),
        value: encode(m)?,
        ..Default::default()
    })
}

/// `m` encoded, as `write_to_bytes_dyn` does it but for the name it asks reflection for.
/// The shim's messages are proto3 (always initialized) and far below protobuf's 2 GiB
/// limit, the two checks that name it.
pub fn encode(m: &dyn MessageDyn) -> Result<Vec<u8>, Error> {
    let size = m.compute_size_dyn();
    let mut v = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    let mut os = CodedOutputStream::vec(&mut v);
    m.write_to_with_cached_sizes_dyn(&mut os)?;
    os.flush()?;
    drop(os);
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use containerd_shim::protos::events::task::TaskOOM;
    use containerd_shim::protos::protobuf::{Message, MessageFull};

    /// Set in the copy of the test binary that measures (a process of its own: reflection's
    /// tables, once any test has built them, are the process's for good).
    const CHILD: &str = "PODINIT_TEST_PACK_CHILD";

    use podinit::sys::pages::heap_in_use;

    /// Packing encodes as protobuf does, byte for byte, and builds none of reflection's
    /// tables, which asking for the descriptor then does (so the measure sees them).
    #[test]
    fn packing_encodes_without_building_reflection_tables() {
        let m = TaskOOM {
            container_id: "c1".into(),
            ..Default::default()
        };
        if std::env::var_os(CHILD).is_none() {
            let a = any("containerd.events.TaskOOM", &m).unwrap();
            assert_eq!(a.value, m.write_to_bytes().unwrap());
            assert_eq!(a.type_url, "containerd.events.TaskOOM");
            let out = std::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    "shim::pack::tests::packing_encodes_without_building_reflection_tables",
                    "--exact",
                    "--test-threads=1",
                    "--nocapture",
                ])
                .env(CHILD, "1")
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success() && text.contains("1 passed"),
                "the measuring copy: {}\n{text}{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
            return;
        }
        let before = heap_in_use();
        let a = any("containerd.events.TaskOOM", &m).unwrap();
        let packed = heap_in_use().saturating_sub(before);
        let name = TaskOOM::descriptor().full_name().to_string();
        let reflected = heap_in_use().saturating_sub(before);
        println!("packing kept {packed} bytes; reflection's tables {reflected}");
        assert_eq!(name, "containerd.events.TaskOOM");
        assert!(packed < 1024, "packing kept {packed} bytes of heap");
        assert!(
            reflected > 64 << 10,
            "the descriptor took only {reflected} bytes: was it built before?"
        );
        drop(a);
    }
}
