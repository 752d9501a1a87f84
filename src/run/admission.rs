//! The first stage of `podinit run`: the pod's admission (`crate::admission`, shared
//! with the ephemeral-container route), stamped with its creation time.

use crate::admission::{admit, bundles_dir, Admission};

/// `podinit run`'s admission: the manifest of `opts`, with the creation time of now.
pub(super) fn for_run(opts: &super::RunOptions) -> Result<Admission, String> {
    let bundles = bundles_dir(opts.bundles.as_deref());
    let mut adm = admit(
        &opts.manifest,
        &bundles,
        opts.presets.as_deref(),
        opts.max_restart_backoff,
    )?;
    // Set by the API server when it takes the pod; a manifest's own value is replaced.
    let now_ms = (crate::util::now_unix_nanos() / 1_000_000) as i64;
    adm.pod.metadata.creation_timestamp = k8s_openapi::jiff::Timestamp::from_millisecond(now_ms)
        .ok()
        .map(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time);
    Ok(adm)
}
