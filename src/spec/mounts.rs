//! The container's mounts: its `volumeMounts` as bind mounts of the pod's volumes, the
//! termination-message file, and the pod's `/etc` files.

use oci_spec::runtime::{Mount, Spec};
use std::path::{Component, Path};

use super::{Ctx, Error, Result};

/// A bind mount of `source` at `destination`.
fn bind(destination: &str, source: &Path, options: &[&str]) -> Mount {
    let mut m = Mount::default();
    m.set_destination(destination.into());
    m.set_typ(Some("bind".into()));
    m.set_source(Some(source.to_path_buf()));
    m.set_options(Some(options.iter().map(|o| o.to_string()).collect()));
    m
}

/// The options of a file the pod provides (termination log, `/etc/hosts`).
const FILE_OPTIONS: &[&str] = &["bind", "rprivate", "nosuid", "nodev", "noexec", "rw"];

/// `name` is one of the pod's image volumes (`volumes[].image`).
fn is_image_volume(ctx: &Ctx, name: &str) -> bool {
    let volumes = ctx.pod.volumes.iter().flatten();
    volumes
        .filter(|v| v.name == name)
        .any(|v| v.image.is_some())
}

/// Volume mounts replace a base mount at the same destination; the termination log and
/// the pod's files go where the container mounts nothing itself.
pub fn with_mounts(spec: &mut Spec, ctx: &Ctx) -> Result<()> {
    let c = ctx.container;
    let cx = ctx.cx;
    let mut list: Vec<Mount> = spec.mounts().clone().unwrap_or_default();
    let add = |m: Mount, list: &mut Vec<Mount>| {
        list.retain(|x| x.destination() != m.destination());
        list.push(m);
    };
    let mounted =
        |list: &[Mount], dest: &str| list.iter().any(|m| m.destination() == Path::new(dest));
    for (i, vm) in c.volume_mounts.iter().flatten().enumerate() {
        let field = format!("volumeMounts[{i}]");
        let vol = cx
            .volumes
            .get(&vm.name)
            .ok_or_else(|| Error::Invalid(format!("{field}.name: Not found: {:?}", vm.name)))?;
        let mut src = vol.host_path.clone();
        let mut beneath = None;
        let sub_path = match cx.sub_paths.get(i) {
            Some(resolved) => resolved.as_deref(),
            None => vm.sub_path.as_deref(),
        };
        if let Some(sp) = sub_path.filter(|s| !s.is_empty()) {
            let p = Path::new(sp);
            if p.is_absolute() || p.components().any(|c| c == Component::ParentDir) {
                return Err(Error::Invalid(format!(
                    "{field}.subPath: Invalid value: {sp:?}: must be a relative path without '..'"
                )));
            }
            if is_image_volume(ctx, &vm.name) {
                // An image's files decide where its symlinks lead: the subPath is resolved
                // inside the image, and must be there (nothing is made in an image, and no
                // container can write to it to race the resolution).
                src = crate::runtime::mounts::secure_join(&src, p, &|q| std::fs::read_link(q).ok())
                    .map_err(|e| Error::Invalid(format!("{field}.subPath: {e}")))?;
                if !src.exists() {
                    return Err(Error::Invalid(format!(
                        "{field}.subPath: {sp:?} does not exist in image volume {:?}",
                        vm.name
                    )));
                }
            } else {
                let base = vol.made_at.clone().unwrap_or_else(|| src.clone());
                let made = base.join(p);
                // A container sharing the volume may have made a component a link to the
                // host: the subPath is made, and later bound, below the volume with no
                // link followed (kubelet's safe subPath, CVE-2017-1002101).
                if !base.exists() {
                    std::fs::create_dir_all(&base).map_err(|err| Error::Io {
                        what: format!("{field}.subPath: creating {}", base.display()),
                        err,
                    })?;
                }
                crate::sys::beneath::ensure_dir(&base, &made).map_err(|err| Error::Io {
                    what: format!("{field}.subPath: creating {}", made.display()),
                    err,
                })?;
                beneath = Some(format!(
                    "{}{}",
                    crate::runtime::mounts::SOURCE_BENEATH,
                    src.display()
                ));
                src = src.join(p);
            }
        }
        let ro = vm.read_only.unwrap_or(false) || vol.read_only;
        let mut opts = vec![
            "rbind",
            "rprivate",
            "nosuid",
            "nodev",
            if ro { "ro" } else { "rw" },
        ];
        // containerd's CRI asks the runtime for `rro` (mount_setattr with AT_RECURSIVE).
        if cx.recursive_read_only.get(i).copied().unwrap_or(false) {
            opts.push("rro");
        }
        if let Some(b) = &beneath {
            opts.push(b.as_str());
        }
        add(bind(&vm.mount_path, &src, &opts), &mut list);
    }
    if let Some(tl) = cx.termination_log {
        let dest = c
            .termination_message_path
            .as_deref()
            .unwrap_or("/dev/termination-log");
        if !mounted(&list, dest) {
            add(bind(dest, tl, FILE_OPTIONS), &mut list);
        }
    }
    for (src, dest) in cx.pod_files {
        if !mounted(&list, dest) {
            add(bind(dest, src, FILE_OPTIONS), &mut list);
        }
    }
    spec.set_mounts(Some(list));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn volume_mounts_replace_the_bases_and_the_termination_log_follows() {
        let c = container("name: c\nvolumeMounts: [{name: data, mountPath: /data, readOnly: true}]\nterminationMessagePath: /dev/termination-log");
        let s = apply(with_mounts, &c);
        let m = s.mounts().as_ref().unwrap();
        assert_eq!(m.len(), 3, "the volume replaced the bundle's /data: {m:?}");
        assert_eq!(
            m[1].source().as_ref().unwrap(),
            &PathBuf::from("/host/data")
        );
        assert!(m[1].options().as_ref().unwrap().contains(&"ro".to_string()));
        assert_eq!(m[2].destination(), &PathBuf::from("/dev/termination-log"));
        assert_eq!(m[2].source().as_ref().unwrap(), &PathBuf::from("/state/tl"));
    }

    #[test]
    fn a_recursively_read_only_mount_asks_for_rro() {
        let c = container("name: c\nvolumeMounts: [{name: data, mountPath: /a, readOnly: true, recursiveReadOnly: Enabled}, {name: data, mountPath: /b, readOnly: true}]");
        let mut p = Pod::new(&c);
        p.recursive_read_only = vec![true, false];
        let s = try_apply_in(with_mounts, &bundle(), &Default::default(), &c, &p).unwrap();
        let opts = |d: &str| {
            let m = s.mounts().as_ref().unwrap();
            let m = m.iter().find(|m| m.destination() == Path::new(d)).unwrap();
            m.options().clone().unwrap()
        };
        assert_eq!(
            opts("/a"),
            ["rbind", "rprivate", "nosuid", "nodev", "ro", "rro"]
        );
        assert_eq!(opts("/b"), ["rbind", "rprivate", "nosuid", "nodev", "ro"]);
    }

    #[test]
    fn pod_files_go_where_the_container_mounts_nothing() {
        let c = container("name: c\nvolumeMounts: [{name: data, mountPath: /etc/hosts}]");
        let mut p = Pod::new(&c);
        p.env.clear();
        let files = [
            (PathBuf::from("/pod/hosts"), "/etc/hosts"),
            (PathBuf::from("/pod/resolv.conf"), "/etc/resolv.conf"),
        ];
        let mut cx = p.context();
        cx.pod_files = &files;
        let b = bundle();
        let ctx = Ctx {
            base: &b,
            pod: &Default::default(),
            container: &c,
            cx: &cx,
            vars: Default::default(),
        };
        let mut s = b.spec.clone();
        with_mounts(&mut s, &ctx).unwrap();
        let m = s.mounts().as_ref().unwrap();
        let at = |d: &str| {
            m.iter()
                .filter(|m| m.destination() == Path::new(d))
                .collect::<Vec<_>>()
        };
        assert_eq!(at("/etc/hosts").len(), 1);
        assert_eq!(
            at("/etc/hosts")[0].source().as_ref().unwrap(),
            &PathBuf::from("/host/data")
        );
        assert_eq!(
            at("/etc/resolv.conf")[0].options().as_ref().unwrap(),
            FILE_OPTIONS
        );
    }

    #[test]
    fn bad_volume_mounts_name_their_field() {
        let c = container("name: c\nvolumeMounts: [{name: data, mountPath: /d, subPath: ../x}]");
        let e = try_apply(with_mounts, &Default::default(), &c)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("volumeMounts[0].subPath: Invalid value"),
            "{e}"
        );
        let c = container("name: c\nvolumeMounts: [{name: nope, mountPath: /d}]");
        let e = try_apply(with_mounts, &Default::default(), &c)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "volumeMounts[0].name: Not found: \"nope\"");
    }
}
