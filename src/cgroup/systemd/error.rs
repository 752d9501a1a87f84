//! The systemd driver's errors: the unit each concerns, the property a value could not
//! become, the step of the conversation with systemd that failed and D-Bus's error (with
//! its error name when systemd answered). Each keeps the line podinit printed before it
//! was typed, runc's where runc has one.

use std::fmt;

use super::dbus;
use crate::error::Kind;

#[derive(Debug)]
pub enum Error {
    /// A `cgroupsPath`, slice or pod uid that names no unit, in runc's (or kubelet's)
    /// words.
    Name(String),
    /// systemd is not the host's init (runc's words).
    NotRunning,
    /// A resource or device rule that no property of the unit can hold.
    Property(Refused),
    /// systemd could not be reached, or refused a call: which unit, at which step, and
    /// D-Bus's error.
    Bus {
        unit: String,
        step: Step,
        err: dbus::Error,
    },
    /// The unit's start job ended other than `done` (`failed`, `canceled`, …).
    Job { unit: String, result: String },
    /// The unit's stop job ended other than `done`: runc's warning.
    StopJob { unit: String, result: String },
}

/// A value refused as a unit's property: the unit (empty until the caller names it), the
/// property it would have been, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub unit: String,
    pub property: &'static str,
    pub why: String,
}

impl Refused {
    pub fn new(property: &'static str, why: impl Into<String>) -> Refused {
        Refused {
            unit: String::new(),
            property,
            why: why.into(),
        }
    }

    /// The same refusal, of `unit`'s properties.
    pub fn of(self, unit: &str) -> Error {
        Error::Property(Refused {
            unit: unit.to_string(),
            ..self
        })
    }
}

/// Which call to systemd failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Connect,
    Version,
    Start,
    /// Stopping a slice a killed run left, before it is started again.
    StopStale,
    Set,
    Stop,
}

impl Error {
    pub fn kind(&self) -> Kind {
        match self {
            Error::Name(_) | Error::Property(_) => Kind::InvalidArgument,
            Error::NotRunning => Kind::FailedPrecondition,
            Error::Bus { err, .. } => bus_kind(err),
            Error::Job { .. } | Error::StopJob { .. } => Kind::Unknown,
        }
    }

    /// D-Bus's error name, when systemd (or the bus) answered with one.
    pub fn dbus_name(&self) -> Option<&str> {
        match self {
            Error::Bus {
                err: dbus::Error::Remote { name, .. },
                ..
            } => Some(name),
            _ => None,
        }
    }
}

/// The kind of a D-Bus failure: a bus that is not there is unavailable, systemd's named
/// errors are what they say.
fn bus_kind(e: &dbus::Error) -> Kind {
    match e {
        dbus::Error::Connect { .. } | dbus::Error::Io { .. } => Kind::Unavailable,
        dbus::Error::Auth(_) => Kind::PermissionDenied,
        dbus::Error::Malformed(_) => Kind::Internal,
        dbus::Error::Timeout(_) => Kind::DeadlineExceeded,
        dbus::Error::Remote { name, .. } => match name.as_str() {
            "org.freedesktop.systemd1.NoSuchUnit" => Kind::NotFound,
            "org.freedesktop.systemd1.UnitExists" => Kind::AlreadyExists,
            "org.freedesktop.DBus.Error.AccessDenied"
            | "org.freedesktop.DBus.Error.InteractiveAuthorizationRequired" => {
                Kind::PermissionDenied
            }
            "org.freedesktop.DBus.Error.InvalidArgs" => Kind::InvalidArgument,
            "org.freedesktop.DBus.Error.NoReply" | "org.freedesktop.DBus.Error.Timeout" => {
                Kind::DeadlineExceeded
            }
            "org.freedesktop.DBus.Error.ServiceUnknown" => Kind::Unavailable,
            _ => Kind::Unknown,
        },
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Name(m) => f.write_str(m),
            Error::NotRunning => {
                f.write_str("systemd not running on this host, cannot use systemd cgroups manager")
            }
            Error::Property(r) if r.unit.is_empty() => f.write_str(&r.why),
            Error::Property(r) => write!(f, "systemd unit {}: {}", r.unit, r.why),
            Error::Bus { unit, step, err } => match step {
                Step::Connect => write!(f, "systemd unit {unit}: {err}"),
                Step::Version => write!(f, "systemd unit {unit}: systemd's version: {err}"),
                Step::Start => write!(f, "unable to start unit {unit:?}: {err}"),
                Step::StopStale => write!(f, "stopping the stale systemd unit {unit}: {err}"),
                Step::Set => write!(f, "unable to set unit properties of {unit}: {err}"),
                Step::Stop => write!(f, "stopping systemd unit {unit}: {err}"),
            },
            Error::Job { unit, result } => {
                write!(f, "error creating systemd unit `{unit}`: got `{result}`")
            }
            Error::StopJob { unit, result } => {
                write!(
                    f,
                    "error removing unit `{unit}`: got `{result}`. Continuing..."
                )
            }
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    fn bus(step: Step, err: dbus::Error) -> Error {
        Error::Bus {
            unit: "podinit-c1.scope".into(),
            step,
            err,
        }
    }

    fn remote(name: &str) -> dbus::Error {
        dbus::Error::Remote {
            name: name.into(),
            message: "m".into(),
        }
    }

    #[test]
    fn each_error_has_its_kind_and_line() {
        let cases = [
            (
                Error::Name("invalid slice name: x".into()),
                Kind::InvalidArgument,
                "invalid slice name: x",
            ),
            (
                Error::NotRunning,
                Kind::FailedPrecondition,
                "systemd not running on this host, cannot use systemd cgroups manager",
            ),
            (
                Refused::new(
                    "TasksMax",
                    "unified resource \"pids.max\" value \"x\": not a number",
                )
                .of("u.scope"),
                Kind::InvalidArgument,
                "systemd unit u.scope: unified resource \"pids.max\" value \"x\": not a number",
            ),
            (
                bus(
                    Step::Connect,
                    dbus::Error::Connect {
                        path: "/run/systemd/private".into(),
                        err: std::io::Error::from_raw_os_error(libc::ENOENT),
                    },
                ),
                Kind::Unavailable,
                "systemd unit podinit-c1.scope: connecting to /run/systemd/private: \
                 No such file or directory (os error 2)",
            ),
            (
                bus(Step::Version, dbus::Error::Timeout("x".into())),
                Kind::DeadlineExceeded,
                "systemd unit podinit-c1.scope: systemd's version: timed out waiting for x",
            ),
            (
                bus(Step::Start, remote("org.freedesktop.systemd1.UnitExists")),
                Kind::AlreadyExists,
                "unable to start unit \"podinit-c1.scope\": \
                 org.freedesktop.systemd1.UnitExists: m",
            ),
            (
                bus(
                    Step::StopStale,
                    remote("org.freedesktop.DBus.Error.AccessDenied"),
                ),
                Kind::PermissionDenied,
                "stopping the stale systemd unit podinit-c1.scope: \
                 org.freedesktop.DBus.Error.AccessDenied: m",
            ),
            (
                bus(Step::Set, remote("org.freedesktop.DBus.Error.InvalidArgs")),
                Kind::InvalidArgument,
                "unable to set unit properties of podinit-c1.scope: \
                 org.freedesktop.DBus.Error.InvalidArgs: m",
            ),
            (
                bus(Step::Stop, remote("org.freedesktop.systemd1.NoSuchUnit")),
                Kind::NotFound,
                "stopping systemd unit podinit-c1.scope: org.freedesktop.systemd1.NoSuchUnit: m",
            ),
            (
                Error::Job {
                    unit: "u.slice".into(),
                    result: "failed".into(),
                },
                Kind::Unknown,
                "error creating systemd unit `u.slice`: got `failed`",
            ),
            (
                Error::StopJob {
                    unit: "u.slice".into(),
                    result: "canceled".into(),
                },
                Kind::Unknown,
                "error removing unit `u.slice`: got `canceled`. Continuing...",
            ),
        ];
        for (e, kind, line) in cases {
            assert_eq!(e.kind(), kind, "{e}");
            assert_eq!(e.to_string(), line);
        }
        let e = bus(Step::Start, remote("org.freedesktop.systemd1.UnitExists"));
        assert_eq!(e.dbus_name(), Some("org.freedesktop.systemd1.UnitExists"));
        assert_eq!(Error::NotRunning.dbus_name(), None);
    }
}
