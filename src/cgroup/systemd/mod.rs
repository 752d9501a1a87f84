//! The systemd cgroup driver, as runc's (`libcontainer/cgroups/systemd`): a container's
//! cgroup is a transient scope that systemd owns (`<prefix>-<name>.scope` in the slice
//! that `slice:prefix:name` names, `Delegate=yes`), its limits are the unit's properties
//! and then the cgroup's files, and removing the container stops the unit.
//!
//! One difference of order, none of outcome: runc moves its init into the scope that
//! systemd makes for it; podinit makes the scope's directory first, clones the init into
//! it (`CLONE_INTO_CGROUP`, no migration), then asks systemd for the unit with that pid,
//! and systemd takes over the directory it finds.
//!
//! `unit` names the unit, `properties` maps the spec to systemd's properties, `dbus`
//! speaks to systemd (docs/runc.md, docs/cri.md).

pub mod dbus;
mod devices;
mod error;
mod properties;
mod unit;

use oci_spec::runtime::LinuxResources;

use super::{CgroupRoot, Group, Result};
use crate::sys::devices::Rule;
pub use error::{Error, Refused, Step};
pub use unit::{expand_slice, pod_slice, scope, Unit};

/// Whether systemd is the host's init (runc's `IsRunningSystemd`).
pub fn running() -> bool {
    std::fs::symlink_metadata("/run/systemd/system").is_ok_and(|m| m.is_dir())
}

/// The unit of container `id` and its (not yet made) group, from `linux.cgroupsPath`.
/// As runc, the path is read first, and then whether systemd runs.
pub fn resolve(cgroups_path: Option<&str>, id: &str) -> Result<(Unit, Group)> {
    // runc's words, as they are: its clients match them.
    let u = unit::parse(cgroups_path, id)?;
    if !running() {
        return Err(Error::NotRunning.into());
    }
    let g = CgroupRoot::for_oci_path(Some(u.cgroup.as_str()), id)
        .map_err(|e| super::err(&format!("cgroup of container {id}"), e))?;
    Ok((u, g))
}

/// D-Bus's error at `step` of `unit`.
fn bus(unit: &str, step: Step) -> impl FnOnce(dbus::Error) -> super::Error + '_ {
    move |err| {
        Error::Bus {
            unit: unit.to_string(),
            step,
            err,
        }
        .into()
    }
}

/// The result of StartTransientUnit's job: anything but "done" is an error, and the unit's
/// failed state is reset so that it can be started again (runc's `startUnit`).
fn job_done(sd: &mut dbus::Systemd, unit: &str, result: &str) -> Result<()> {
    if result == "done" {
        return Ok(());
    }
    let _ = sd.reset_failed_unit(unit);
    Err(Error::Job {
        unit: unit.to_string(),
        result: result.to_string(),
    }
    .into())
}

fn connect(unit: &str) -> Result<dbus::Systemd> {
    dbus::Systemd::connect().map_err(bus(unit, Step::Connect))
}

/// Start the unit with `pid` in it (runc's `Apply`), then give it the resources and the
/// device rules (runc's `Set`: the properties here; the caller writes the cgroup's files
/// after). `devices` is `None` for a unit whose devices are not limited (a pod's slice, as
/// kubelet's `SkipDevices`).
pub fn start(
    u: &Unit,
    pid: i32,
    resources: Option<&LinuxResources>,
    devices: Option<&[Rule]>,
) -> Result<()> {
    let mut sd = connect(&u.name)?;
    let v2 = crate::sys::cgroup::unified();
    match sd.start_transient_unit(&u.name, properties::unit(u, Some(pid), v2)) {
        Ok(r) => job_done(&mut sd, &u.name, &r)?,
        // As runc: a unit that exists is taken as started.
        Err(e) if dbus::is_unit_exists(&e) => {}
        Err(e) => {
            if matches!(e, dbus::Error::Timeout(_)) {
                let _ = sd.reset_failed_unit(&u.name);
            }
            return Err(bus(&u.name, Step::Start)(e));
        }
    }
    if resources.is_none() && devices.is_none() {
        return Ok(());
    }
    set_with(
        &mut sd,
        &u.name,
        &resources.cloned().unwrap_or_default(),
        devices,
    )
}

/// Start a pod's slice (no process of its own) with `resources` as its properties, as
/// kubelet's systemd driver makes a pod's cgroup (devices not limited: kubelet's
/// `SkipDevices`). A slice of the same name is left by a run that was killed (the caller
/// holds the pod's state dir lock): it is stopped first, with whatever is left in it.
pub fn start_slice(u: &Unit, resources: &LinuxResources) -> Result<()> {
    let mut sd = connect(&u.name)?;
    let v2 = crate::sys::cgroup::unified();
    let mut started = sd.start_transient_unit(&u.name, properties::unit(u, None, v2));
    if matches!(&started, Err(e) if dbus::is_unit_exists(e)) {
        sd.stop_unit(&u.name)
            .map_err(bus(&u.name, Step::StopStale))?;
        let _ = sd.reset_failed_unit(&u.name);
        started = sd.start_transient_unit(&u.name, properties::unit(u, None, v2));
    }
    let r = started.map_err(bus(&u.name, Step::Start))?;
    job_done(&mut sd, &u.name, &r)?;
    // A slice that cannot have its limits is not left behind.
    set_with(&mut sd, &u.name, resources, None).inspect_err(|_| {
        let _ = sd.stop_unit(&u.name);
        let _ = sd.reset_failed_unit(&u.name);
    })
}

/// Start a pod container's scope with `pid` in it, its resources and device rules among
/// the properties it starts with: the process runs already (in the scope's directory,
/// made beforehand), so systemd must not write its defaults over the limits first.
pub fn start_scope(u: &Unit, pid: i32, r: &LinuxResources, devices: &[Rule]) -> Result<()> {
    let mut sd = connect(&u.name)?;
    let version = sd.version().map_err(bus(&u.name, Step::Version))?;
    let v2 = crate::sys::cgroup::unified();
    let mut props = properties::unit(u, Some(pid), v2);
    props.extend(devices::properties(devices, version).map_err(|e| e.of(&u.name))?);
    props.extend(properties::resources(r, v2, version).map_err(|e| e.of(&u.name))?);
    match sd.start_transient_unit(&u.name, props) {
        Ok(res) => job_done(&mut sd, &u.name, &res),
        Err(e) => {
            let _ = sd.reset_failed_unit(&u.name);
            Err(bus(&u.name, Step::Start)(e))
        }
    }
}

/// The resources and device rules as the unit's properties (runc's `Set` before it
/// writes the files).
pub fn set(unit: &str, r: &LinuxResources, devices: Option<&[Rule]>) -> Result<()> {
    set_with(&mut connect(unit)?, unit, r, devices)
}

fn set_with(
    sd: &mut dbus::Systemd,
    unit: &str,
    r: &LinuxResources,
    devices: Option<&[Rule]>,
) -> Result<()> {
    let version = sd.version().map_err(bus(unit, Step::Version))?;
    // The device properties first, as runc's `genV2ResourcesProperties` puts them.
    let mut props = match devices {
        Some(d) => devices::properties(d, version).map_err(|e| e.of(unit))?,
        None => Vec::new(),
    };
    props.extend(
        properties::resources(r, crate::sys::cgroup::unified(), version).map_err(|e| e.of(unit))?,
    );
    if props.is_empty() {
        return Ok(());
    }
    sd.set_unit_properties(unit, props)
        .map_err(bus(unit, Step::Set))
}

/// Stop the unit and let systemd forget it if it failed (runc's `stopUnit`). As runc,
/// only a job that does not end in time is an error: a unit already gone, a bus that
/// cannot be reached or a job that ends other than `done` is returned as a warning.
pub fn stop(unit: &str) -> Result<Option<super::Error>> {
    let mut sd = match connect(unit) {
        Ok(sd) => sd,
        Err(e) => return Ok(Some(e)),
    };
    let warning = match sd.stop_unit(unit) {
        Ok(r) if r == "done" => None,
        Ok(r) => Some(
            Error::StopJob {
                unit: unit.to_string(),
                result: r,
            }
            .into(),
        ),
        Err(e) if dbus::is_no_such_unit(&e) => None,
        Err(e @ dbus::Error::Timeout(_)) => return Err(bus(unit, Step::Stop)(e)),
        Err(e) => Some(bus(unit, Step::Stop)(e)),
    };
    let _ = sd.reset_failed_unit(unit);
    Ok(warning)
}
