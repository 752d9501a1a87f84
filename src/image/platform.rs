//! Picking this machine's manifest from an image index, as containerd's default platform
//! matcher does (os, architecture, variant).

use oci_spec::image::{Descriptor, ImageIndex};

/// The manifest of `index` for this machine's OS and architecture, or an error naming the
/// platforms the index has.
pub fn select(index: &ImageIndex) -> Result<&Descriptor, String> {
    let _ = index;
    todo!("image::platform::select")
}
