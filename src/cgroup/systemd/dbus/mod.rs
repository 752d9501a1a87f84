//! A minimal synchronous D-Bus client, for the few calls the systemd cgroup driver makes
//! to systemd's manager. Written here rather than taken from zbus, whose async runtime
//! and dependencies would be most of the code for four method calls and one signal:
//! `wire` marshals, `bus` connects and calls, this module names systemd's methods.

mod bus;
pub mod wire;

use std::path::Path;
use std::time::{Duration, Instant};

pub use bus::Error;
use bus::{Bus, Result};
use wire::Message;
pub use wire::Value;

const SYSTEMD: &str = "org.freedesktop.systemd1";
const MANAGER_PATH: &str = "/org/freedesktop/systemd1";
const MANAGER: &str = "org.freedesktop.systemd1.Manager";

/// The system bus's socket (D-Bus's default address for it).
pub const SYSTEM_BUS: &str = "/run/dbus/system_bus_socket";
/// systemd's own socket, for root, which works without a bus daemon.
pub const PRIVATE: &str = "/run/systemd/private";

/// How long a job (a unit's start or stop) may take, as runc waits for it.
const JOB_LIMIT: Duration = Duration::from_secs(30);

/// systemd's manager, over one connection.
pub struct Systemd {
    bus: Bus,
}

impl Systemd {
    /// Connect as go-systemd does for runc: the system bus first, then (root only)
    /// systemd's private socket.
    pub fn connect() -> Result<Systemd> {
        let system = std::env::var("DBUS_SYSTEM_BUS_ADDRESS")
            .ok()
            .and_then(|a| a.strip_prefix("unix:path=").map(str::to_string))
            .unwrap_or_else(|| SYSTEM_BUS.to_string());
        let bus = match Bus::connect(Path::new(&system), true) {
            Ok(b) => Ok(b),
            Err(e) if nix::unistd::geteuid().is_root() => Bus::connect(Path::new(PRIVATE), false)
                .map_err(|p| Error::Io {
                    what: "connection to systemd",
                    err: std::io::Error::other(format!("{e}; {p}")),
                }),
            Err(e) => Err(e),
        }?;
        let mut s = Systemd { bus };
        if system_bus_is_used(&s) {
            // Through the bus daemon, JobRemoved reaches us only by a match rule.
            s.bus.call(Message::call(
                Some("org.freedesktop.DBus"),
                "/org/freedesktop/DBus",
                "org.freedesktop.DBus",
                "AddMatch",
                vec![Value::str(
                    "type='signal',sender='org.freedesktop.systemd1',\
                     interface='org.freedesktop.systemd1.Manager',member='JobRemoved',\
                     path='/org/freedesktop/systemd1'",
                )],
            ))?;
        }
        Ok(s)
    }

    fn manager(&mut self, member: &str, body: Vec<Value>) -> Result<Vec<Value>> {
        self.bus.call(Message::call(
            Some(SYSTEMD),
            MANAGER_PATH,
            MANAGER,
            member,
            body,
        ))
    }

    /// Wait for the job at `job` to end: its result (`done`, `failed`, `canceled`…).
    fn wait_job(&mut self, job: &str, unit: &str) -> Result<String> {
        let deadline = Instant::now() + JOB_LIMIT;
        let m = self
            .bus
            .wait_signal(&format!("systemd's job for {unit}"), deadline, |m| {
                m.member.as_deref() == Some("JobRemoved")
                    && m.body.get(1).and_then(Value::as_str) == Some(job)
            })?;
        Ok(m.body
            .get(3)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string())
    }

    fn job_of(body: &[Value]) -> String {
        body.first()
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    }

    /// StartTransientUnit(name, "replace", properties, no auxiliary units), then the
    /// job's result.
    pub fn start_transient_unit(&mut self, name: &str, properties: Vec<Value>) -> Result<String> {
        let body = self.manager(
            "StartTransientUnit",
            vec![
                Value::str(name),
                Value::str("replace"),
                Value::Array("(sv)".into(), properties),
                Value::Array("(sa(sv))".into(), vec![]),
            ],
        )?;
        self.wait_job(&Self::job_of(&body), name)
    }

    /// StopUnit(name, "replace"), then the job's result.
    pub fn stop_unit(&mut self, name: &str) -> Result<String> {
        let body = self.manager("StopUnit", vec![Value::str(name), Value::str("replace")])?;
        self.wait_job(&Self::job_of(&body), name)
    }

    pub fn reset_failed_unit(&mut self, name: &str) -> Result<()> {
        self.manager("ResetFailedUnit", vec![Value::str(name)])
            .map(drop)
    }

    /// SetUnitProperties(name, runtime = true, properties).
    pub fn set_unit_properties(&mut self, name: &str, properties: Vec<Value>) -> Result<()> {
        self.manager(
            "SetUnitProperties",
            vec![
                Value::str(name),
                Value::Bool(true),
                Value::Array("(sv)".into(), properties),
            ],
        )
        .map(drop)
    }

    /// The manager's version number (`252` of "252.38-1~deb12u1"), as runc reads it to
    /// know which properties systemd takes.
    pub fn version(&mut self) -> Result<u32> {
        let body = self.bus.call(Message::call(
            Some(SYSTEMD),
            MANAGER_PATH,
            "org.freedesktop.DBus.Properties",
            "Get",
            vec![Value::str(MANAGER), Value::str("Version")],
        ))?;
        let text = match body.first() {
            Some(Value::Variant(v)) => v.as_str().unwrap_or_default().to_string(),
            _ => String::new(),
        };
        parse_version(&text).ok_or_else(|| Error::Remote {
            name: "podinit.BadVersion".into(),
            message: format!("systemd's version {text:?} has no number"),
        })
    }
}

/// Whether `s` talks through the bus daemon (it got a unique name from Hello).
fn system_bus_is_used(s: &Systemd) -> bool {
    s.bus.unique_name().is_some()
}

/// The first number in a version string, after an optional `v` (runc's
/// `systemdVersionAtoi`).
pub fn parse_version(text: &str) -> Option<u32> {
    let digits: String = text
        .trim_start_matches('v')
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// Whether the error is systemd's "unit already exists" (runc takes that as started).
pub fn is_unit_exists(e: &Error) -> bool {
    matches!(e, Error::Remote { name, .. } if name == "org.freedesktop.systemd1.UnitExists")
}

/// Whether the error is systemd's "no such unit" (a unit already gone).
pub fn is_no_such_unit(e: &Error) -> bool {
    matches!(e, Error::Remote { name, .. } if name == "org.freedesktop.systemd1.NoSuchUnit")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_as_runc_reads_them() {
        assert_eq!(parse_version("252.38-1~deb12u1"), Some(252));
        assert_eq!(parse_version("v245"), Some(245));
        assert_eq!(parse_version("249"), Some(249));
        assert_eq!(parse_version(""), None);
        assert_eq!(parse_version("x"), None);
    }
}
