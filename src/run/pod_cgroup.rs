//! The pod cgroup: made by the outer process with the pod's limits before the supervisor
//! exists, and removed by it, whatever happened, once the pod is down.

use k8s_openapi::api::core::v1::Pod;

use super::Error;
use crate::cgroup::{CgroupRoot, Group};
use crate::sys::cgroup::Placement;

/// The cgroups the outer process made, each recorded once it exists.
#[derive(Default)]
pub(super) struct PodCgroup {
    pod: Option<Group>,
    /// The supervisor's leaf, `<pod cgroup>_supervisor` beside it.
    supervisor: Option<Group>,
    /// Outside PID-1 mode: where the cgroups are, to remove the containers' ones, which
    /// the supervisor leaves to us (it exits meanwhile).
    root: Option<CgroupRoot>,
    /// The containers' cgroups below the pod's (names; the handles are made at removal).
    containers: Vec<String>,
    /// With the systemd driver: the pod's slice, stopped at removal (its containers'
    /// scopes with it).
    slice: Option<String>,
}

/// Where the pod's cgroups are made: the hierarchy and the pod cgroup's name in it.
pub(super) struct Made {
    pub root: CgroupRoot,
    pub name: String,
    /// Why the pod runs without cgroups (rootless, none delegated).
    pub without: Option<&'static str>,
}

impl PodCgroup {
    /// Make the pod cgroup below `--cgroup-parent` (or where podinit runs) with the pod's
    /// limits, and the supervisor's leaf when it needs one. `pid1`: podinit is the
    /// sandbox's PID 1, and first moves itself out of the cgroup it was started in. Not
    /// inlined: start-up's frame, gone before the pod's wait (docs/architecture.md §2).
    #[inline(never)]
    pub fn create(&mut self, pod: &Pod, parent: Option<&str>, pid1: bool) -> Result<Made, Error> {
        let cgroups = CgroupRoot::detect(parent)?;
        let name = super::names::pod_cgroup_name(pod);
        if let Some(why) = super::rootless::without_cgroups(&cgroups) {
            // Without root and without delegated cgroups: none are made (docs/interface.md
            // §Without root); the supervisor's event says which limits go unenforced.
            return Ok(Made {
                root: CgroupRoot::none(),
                name,
                without: Some(why),
            });
        }
        let pod_cg = cgroups.group(&name);
        // The supervisor is outside the pod cgroup: it is the shim as well as the pause
        // process, and Kubernetes charges neither the shim's memory nor the container logs
        // it writes (page cache, or RAM on a tmpfs state dir) to the pod. Inside, a full
        // pod would make it the OOM killer's victim once the containers' memory is reaped
        // (-998 ranks last, not never), a chatty container would be OOM-killed for its
        // logs, and the pod's CPU quota would throttle its own probes. It stays in the
        // cgroup podinit was started in, as the outer process does (no cgroup to make,
        // join and remove); below a parent given with --cgroup-parent it gets a leaf beside
        // the pod's, since on v2 that parent can hand controllers down only while it holds
        // no process.
        let sup_cg =
            (!pid1 && parent.is_some()).then(|| cgroups.group(&format!("{name}_supervisor")));
        // Left by a run that was killed: nothing in it can still belong to a live pod,
        // since the state dir lock is ours. (The pod's own is found stale as it is made,
        // by `create_parent`.)
        if let Some(stale) = sup_cg.as_ref().filter(|g| g.exists()) {
            stale
                .destroy()
                .map_err(|e| e.within("removing stale pod cgroup"))?;
        }
        if pid1 {
            // Out of the cgroup we were started in first: on v2 it can pass controllers
            // down to the pod's tree only once no process is left in it.
            let leaf = cgroups.group("supervisor");
            leaf.create()?;
            leaf.add(nix::unistd::getpid().as_raw())
                .map_err(|e| e.within("moving podinit to its leaf cgroup"))?;
        }
        cgroups.delegate_controllers();
        pod_cg.create_parent()?;
        let pod_cg = self.pod.insert(pod_cg);
        set_limits(pod_cg, pod, cgroups.is_v2())?;
        if let Some(leaf) = sup_cg {
            leaf.create()?;
            self.supervisor = Some(leaf);
        }
        Ok(Made {
            root: cgroups,
            name,
            without: None,
        })
    }

    /// With `--cgroup-driver systemd`: the pod's cgroup is a transient slice that systemd
    /// makes, named and placed as kubelet's systemd driver does (`parent`, a slice, by
    /// default kubelet's slice of the pod's QoS class), with the pod's limits as its
    /// properties and then in its files. The supervisor stays where podinit runs, as with
    /// cgroupfs; the containers get scopes in the slice (`supervisor::containers`).
    #[inline(never)]
    pub fn create_slice(
        &mut self,
        pod: &Pod,
        parent: Option<&str>,
        pid1: bool,
    ) -> Result<Made, Error> {
        use crate::cgroup::systemd;
        if pid1 {
            return Err(Error::Refused(
                "--cgroup-driver systemd cannot be used in PID-1 mode: the runtime that started podinit made its cgroup"
                    .into(),
            ));
        }
        if !systemd::running() {
            return Err(Error::Refused(
                "--cgroup-driver systemd: systemd is not running on this host (no /run/systemd/system)"
                    .into(),
            ));
        }
        let spec = pod.spec.as_ref().expect("admitted pod has a spec");
        let parent = parent.map_or_else(|| qos_slice(spec).to_string(), str::to_string);
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let unit =
            systemd::pod_slice(&parent, uid).map_err(|e| e.within("--cgroup-driver systemd"))?;
        let limits = resources(
            &crate::pod::resources::pod_limits(spec),
            crate::pod::resources::pod_cpu_shares(spec),
        )?;
        systemd::start_slice(&unit, &limits)?;
        self.slice = Some(unit.name.clone());
        let root = CgroupRoot::detect(Some("/"))?;
        let name = unit.cgroup.trim_start_matches('/').to_string();
        let pod_cg = self.pod.insert(root.group(&name));
        // The containers' limits are written before their processes start, as with
        // cgroupfs: their scopes' directories need the controllers from the start, before
        // systemd would enable them for the units.
        pod_cg.hand_down_controllers();
        // runc's Set after the properties: the files systemd has no property for.
        set_limits(pod_cg, pod, root.is_v2())?;
        Ok(Made {
            root,
            name,
            without: None,
        })
    }

    /// The pod's slice, with the systemd driver.
    pub fn slice(&self) -> Option<&str> {
        self.slice.as_deref()
    }

    /// Outside PID-1 mode the containers' cgroups are ours to remove (`remove`): from now
    /// on, `add_container` records each.
    pub fn own_containers(&mut self, root: &CgroupRoot) {
        self.root = Some(root.clone());
    }

    /// Container cgroup `name` (below the pod's) is removed with the pod's.
    pub fn add_container(&mut self, name: String) {
        self.containers.push(name);
    }

    /// Where the supervisor is cloned into: its leaf, or the cgroup podinit runs in.
    pub fn supervisor_placement(&self) -> Result<Placement, Error> {
        match &self.supervisor {
            Some(g) => Ok(g.placement()?),
            None => Ok(Placement {
                dir: None,
                tasks: Vec::new(),
            }),
        }
    }

    /// Remove the pod cgroup tree (killing anything left in it); the supervisor's leaf only
    /// once the supervisor is gone (`supervisor_gone`), so call again after waiting for it.
    /// Each failure is pushed to `errs`.
    pub fn remove(&mut self, supervisor_gone: bool, errs: &mut Vec<Error>) {
        // The containers' cgroups first (the supervisor leaves them to us): the pod's then
        // goes with one rmdir per hierarchy.
        if let Some(root) = &self.root {
            for name in self.containers.drain(..) {
                if let Err(e) = root.group(&name).destroy() {
                    errs.push(e.into());
                }
            }
        }
        // The supervisor's leaf holds it until it has exited.
        if let Some(cg) = self.supervisor.take_if(|_| supervisor_gone) {
            if let Err(e) = cg.destroy() {
                errs.push(e.into());
            }
        }
        if let Some(unit) = self.slice.take() {
            // Whatever is left is killed first: stopping the slice would otherwise give
            // each scope in it systemd's stop timeout.
            if let Some(cg) = &self.pod {
                cg.kill_all();
            }
            match crate::cgroup::systemd::stop(&unit) {
                Ok(None) => {}
                Ok(Some(e)) | Err(e) => errs.push(e.into()),
            }
        }
        if let Some(cg) = self.pod.take() {
            if let Err(e) = cg.destroy() {
                errs.push(e.into());
            }
        }
    }
}

/// kubelet's slice for the pods of a QoS class, under its systemd driver.
fn qos_slice(spec: &k8s_openapi::api::core::v1::PodSpec) -> &'static str {
    use crate::pod::QosClass;
    match crate::pod::plan::qos_class(spec) {
        QosClass::Guaranteed => "kubepods.slice",
        QosClass::Burstable => "kubepods-burstable.slice",
        QosClass::BestEffort => "kubepods-besteffort.slice",
    }
}

/// The pod's limits, as kubelet computes them (`pod::resources`), on its cgroup.
fn set_limits(pod_cg: &Group, pod: &Pod, v2: bool) -> Result<(), Error> {
    let pod_spec = pod.spec.as_ref().expect("admitted pod has a spec");
    let limits = resources(
        &crate::pod::resources::pod_limits(pod_spec),
        crate::pod::resources::pod_cpu_shares(pod_spec),
    )?;
    pod_cg.set(&limits)?;
    if v2 && !pod_cg.has_controller("memory") {
        // No limit asked for it (set would have failed), but OOM kills go unseen.
        crate::log::warn(&format!(
            "the pod's cgroups have no memory controller, so an OOM kill is reported as Error, not OOMKilled: {}",
            crate::cgroup::V2_DELEGATION
        ));
    }
    Ok(())
}

/// The pod cgroup's limits as OCI resources (CFS quota over kubelet's 100 ms period), and
/// the shares of a pod-level CPU request.
fn resources(
    l: &crate::pod::resources::Limits,
    shares: Option<u64>,
) -> Result<oci_spec::runtime::LinuxResources, Error> {
    let v = crate::pod::resources::pod_cgroup_json(l, shares);
    crate::tracked::deserialize(&v).map_err(|(_, e)| Error::Internal {
        what: "pod cgroup limits".into(),
        why: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_become_a_quota_over_100ms_and_byte_limits() {
        let limits: crate::pod::resources::Limits = [
            ("cpu".to_string(), Some(250)),
            ("memory".to_string(), Some(64 << 20)),
            ("hugepages-2Mi".to_string(), Some(4 << 20)),
            ("ephemeral-storage".to_string(), None),
        ]
        .into_iter()
        .collect();
        let r = resources(&limits, Some(256)).unwrap();
        let cpu = r.cpu().as_ref().unwrap();
        assert_eq!(cpu.quota(), Some(25_000));
        assert_eq!(cpu.shares(), Some(256));
        assert_eq!(cpu.period(), Some(100_000));
        assert_eq!(r.memory().as_ref().unwrap().limit(), Some(64 << 20));
        let huge = r.hugepage_limits().as_ref().unwrap();
        assert_eq!(huge.len(), 1);
        assert_eq!(huge[0].page_size(), "2MB");
        assert_eq!(huge[0].limit(), 4 << 20);
    }

    #[test]
    fn a_tiny_cpu_limit_gets_the_kernel_minimum_quota() {
        let limits: crate::pod::resources::Limits =
            [("cpu".to_string(), Some(1))].into_iter().collect();
        let r = resources(&limits, None).unwrap();
        assert_eq!(r.cpu().as_ref().unwrap().quota(), Some(1000));
        assert_eq!(r.cpu().as_ref().unwrap().shares(), None);
        assert!(r.memory().is_none());
    }
}
