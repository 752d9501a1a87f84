//! `fsGroup`'s hold on a pod's volumes, as kubelet's `volume.SetVolumeOwnership`
//! (pkg/volume/volume_linux.go) gives it: every file of an emptyDir and of a volume of
//! files (configMap, secret, downwardAPI, projected) gets the group, group read (and write
//! where the volume is writable), and each directory the set-gid bit, so that what a
//! container writes there later belongs to the group too. hostPath and image volumes are
//! left as they are. Pure: `sandbox::ownership` walks the files.

use k8s_openapi::api::core::v1::{PodSpec, Volume};

/// The group the files of `v` are given, if any (`spec.securityContext.fsGroup`).
pub fn group_of(spec: &PodSpec, v: &Volume) -> Option<u32> {
    let owned = v.empty_dir.is_some()
        || v.config_map.is_some()
        || v.secret.is_some()
        || v.downward_api.is_some()
        || v.projected.is_some();
    if !owned {
        return None;
    }
    let g = spec.security_context.as_ref()?.fs_group?;
    u32::try_from(g).ok()
}

/// The mode a file of mode `mode` gets (kubelet's `changeFilePermission`): group read and
/// write (read only on a read-only volume), and on a directory group search and set-gid.
/// Symbolic links keep theirs: chmod would follow them.
pub fn mode(mode: u32, is_dir: bool, read_only: bool) -> u32 {
    let mut mask = if read_only { 0o440 } else { 0o660 };
    if is_dir {
        mask |= 0o2000 | 0o110;
    }
    mode | mask
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(yaml: &str) -> PodSpec {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    #[test]
    fn the_group_goes_to_empty_dirs_and_volumes_of_files_only() {
        let spec = pod(r#"
securityContext: {fsGroup: 2000}
containers: [{name: c}]
volumes:
- {name: e, emptyDir: {}}
- {name: c, configMap: {name: x}}
- {name: s, secret: {secretName: x}}
- {name: d, downwardAPI: {items: []}}
- {name: p, projected: {sources: []}}
- {name: h, hostPath: {path: /tmp}}
- {name: i, image: {reference: busybox}}
"#);
        let got: Vec<_> = spec
            .volumes
            .iter()
            .flatten()
            .map(|v| (v.name.as_str(), group_of(&spec, v)))
            .collect();
        assert_eq!(
            got,
            [
                ("e", Some(2000)),
                ("c", Some(2000)),
                ("s", Some(2000)),
                ("d", Some(2000)),
                ("p", Some(2000)),
                ("h", None),
                ("i", None)
            ]
        );
        let none = pod("containers: [{name: c}]\nvolumes: [{name: e, emptyDir: {}}]");
        assert_eq!(group_of(&none, &none.volumes.as_ref().unwrap()[0]), None);
    }

    #[test]
    fn modes_as_kubelet_changes_them() {
        // An emptyDir: 0777 becomes drwxrwsrwx; a file a container wrote, 0644 → 0664.
        assert_eq!(mode(0o777, true, false), 0o2777);
        assert_eq!(mode(0o644, false, false), 0o664);
        // A Secret's file of defaultMode 0400 on its read-only volume: 0440.
        assert_eq!(mode(0o400, false, true), 0o440);
        assert_eq!(mode(0o755, true, true), 0o2755);
        assert_eq!(mode(0o700, true, true), 0o2750);
    }
}
