//! `exec`: a further process in the container, from `--process P.json` or from the
//! container's own process with runc's overrides (args, env, cwd, user, caps, tty…).
//! Without `-d` we wait for it in the foreground and exit with its status.

use oci_spec::runtime::{Capabilities, Capability, LinuxCapabilities, Process, Spec};
use std::os::fd::AsFd;

use super::cli::{bool_, val, Args, Flag};
use super::state;
use super::status::{self, Status};
use super::{create, wait, Globals};
use crate::runtime::container;

pub const FLAGS: &[Flag] = &[
    create::CONSOLE_SOCKET,
    val(&["cwd"], "current working directory in the container"),
    val(&["env", "e"], "set environment variables"),
    bool_(&["tty", "t"], "allocate a pseudo-TTY"),
    val(&["user", "u"], "UID (format: <uid>[:<gid>])"),
    val(&["additional-gids", "g"], "additional gids"),
    val(&["process", "p"], "path to the process.json"),
    bool_(&["detach", "d"], "detach from the container's process"),
    create::PID_FILE,
    val(
        &["process-label"],
        "set the asm process label for the process commonly used with selinux",
    ),
    val(&["apparmor"], "set the apparmor profile for the process"),
    bool_(
        &["no-new-privs"],
        "set the no new privileges value for the process",
    ),
    val(
        &["cap", "c"],
        "add a capability to the bounding set for the process",
    ),
    create::PRESERVE_FDS,
    val(
        &["cgroup"],
        "run the process in an (existing) sub-cgroup(s) (not supported)",
    ),
    bool_(&["ignore-paused"], "allow exec in a paused container"),
];

/// As runc: a process that could not be started is exit status 255, its error logged as
/// "exec failed: …" (podman reads the reason from it).
pub fn verb(g: &Globals, a: &Args) -> Result<i32, super::Error> {
    match exec(g, a) {
        Ok(code) => Ok(code),
        Err(e) => {
            super::log::error(&format!("exec failed: {e}"));
            Ok(255)
        }
    }
}

fn exec(g: &Globals, a: &Args) -> Result<i32, super::Error> {
    let id = a.at_least_one("exec")?;
    let s = state::load(&g.root, id)?;
    match status::of(&g.root, &s) {
        Status::Stopped => {
            return Err(super::Error::WrongState(
                "cannot exec in a stopped container".into(),
            ))
        }
        Status::Paused if !a.on("ignore-paused") => {
            return Err(super::Error::WrongState(
                "cannot exec in a paused container (use --ignore-paused to override)".into(),
            ))
        }
        _ => {}
    }
    if a.value("cgroup").is_some() {
        return Err(super::Error::Unsupported(
            "exec --cgroup is not supported by podinit-runc".into(),
        ));
    }
    let process = process(a, &s.config)?;
    let terminal = process.terminal().unwrap_or(false);
    let detach = a.on("detach");
    if a.value("console-socket").is_some() && !detach && !terminal {
        return Err(super::Error::Usage(
            "cannot use console socket if runc will not detach or allocate tty".into(),
        ));
    }
    let console = match a.value("console-socket") {
        Some(p) => Some(create::connect_console(std::path::Path::new(p))?),
        None if terminal && detach => {
            return Err(super::Error::Usage(
                "cannot allocate tty if runc will detach without setting console socket".into(),
            ))
        }
        None => None,
    };
    let mut spec: Spec = s.config.clone();
    spec.set_process(Some(process));
    let target = super::start::open_init(&s)?;
    let group = crate::cgroup::recorded::open(&s.id, s.cgroups_path.as_deref(), &s.cgroup_paths)?;
    let mut placement = group
        .placement()
        .map_err(|e| format!("cgroup of container {id}: {e}"))?;
    let unified = crate::cgroup::recorded::unified_leaf(s.cgroups_path.as_deref(), id);
    if let Some(u) = unified.filter(|_| !group.is_none()) {
        placement = placement
            .with_unified(&u)
            .map_err(|e| format!("cgroup of container {id}: {e}"))?;
    }
    if !detach {
        let _ = nix::sys::prctl::set_child_subreaper(true);
    }
    let spawned = container::exec(&container::Exec {
        spec: &spec,
        target: &target,
        cgroup: &placement,
        stdio: [0, 1, 2],
        console_socket: console.as_ref().map(|c| c.as_fd()),
        preserve_fds: a.number("preserve-fds")?,
    })
    .map_err(|err| super::Error::Exec {
        id: id.to_string(),
        err,
    })?;
    if let Some(e) = spawned.start_error {
        let _ = nix::sys::wait::waitpid(spawned.pid, None);
        return Err(super::Error::Exec {
            id: id.to_string(),
            err: crate::runtime::Error::Start(e),
        });
    }
    if let Some(p) = a.value("pid-file") {
        state::write_pid_file(std::path::Path::new(p), spawned.pid.as_raw())?;
    }
    if detach {
        return Ok(0);
    }
    wait::foreground(spawned.pid.as_raw(), &spawned.pidfd, spawned.console)
}

/// The process to run: `--process`'s as it is, or the container's with runc's overrides.
pub fn process(a: &Args, spec: &Spec) -> Result<Process, super::Error> {
    use super::Error::{Config, Usage};
    if let Some(path) = a.value("process") {
        let text =
            std::fs::read(path).map_err(|e| super::Error::io(format_args!("reading {path}"), e))?;
        return serde_json::from_slice(&text)
            .map_err(|e| Config(format!("process in {path}: {e}")));
    }
    let mut p = spec.process().clone().unwrap_or_default();
    let args = a.pos.get(1..).unwrap_or_default().to_vec();
    if args.is_empty() {
        return Err(Usage("exec args cannot be empty".into()));
    }
    p.set_args(Some(args));
    if let Some(c) = a.value("cwd") {
        p.set_cwd(c.into());
    }
    let env = a.values("env");
    if !env.is_empty() {
        let mut all = p.env().clone().unwrap_or_default();
        all.extend(env);
        p.set_env(Some(all));
    }
    p.set_terminal(Some(a.on("tty")));
    if a.value("no-new-privs").is_some() {
        p.set_no_new_privileges(Some(a.on("no-new-privs")));
    }
    if let Some(v) = a.value("apparmor") {
        p.set_apparmor_profile(Some(v.into()));
    }
    if let Some(v) = a.value("process-label") {
        p.set_selinux_label(Some(v.into()));
    }
    if let Some(u) = a.value("user") {
        let bad = || Usage(format!("invalid user {u:?}: format is <uid>[:<gid>]"));
        let (uid, gid) = match u.split_once(':') {
            Some((u, g)) => (u, Some(g)),
            None => (u, None),
        };
        p.user_mut().set_uid(uid.parse().map_err(|_| bad())?);
        if let Some(g) = gid {
            p.user_mut().set_gid(g.parse().map_err(|_| bad())?);
        }
    }
    let gids = a.values("additional-gids");
    if !gids.is_empty() {
        let gids = gids
            .iter()
            .map(|g| {
                g.parse::<u32>()
                    .map_err(|_| Usage(format!("invalid additional-gids value {g:?}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        p.user_mut().set_additional_gids(Some(gids));
    }
    let caps = a.values("cap");
    if !caps.is_empty() {
        let caps: Vec<Capability> = caps
            .iter()
            .map(|c| {
                crate::tracked::deserialize(&serde_json::Value::from(c.as_str()))
                    .map_err(|_| Usage(format!("unknown capability {c:?}")))
            })
            .collect::<Result<_, _>>()?;
        let mut set = p.capabilities().clone().unwrap_or_default();
        add_caps(&mut set, &caps);
        p.set_capabilities(Some(set));
    }
    Ok(p)
}

/// As runc: to the bounding, effective and permitted sets, and to the ambient one only
/// when the process has an inheritable set (ambient capabilities need to be inheritable).
fn add_caps(set: &mut LinuxCapabilities, caps: &[Capability]) {
    let add = |s: &Option<Capabilities>| -> Option<Capabilities> {
        let mut s = s.clone().unwrap_or_default();
        s.extend(caps.iter().copied());
        Some(s)
    };
    set.set_bounding(add(set.bounding()));
    set.set_effective(add(set.effective()));
    set.set_permitted(add(set.permitted()));
    if set.inheritable().is_some() {
        set.set_ambient(add(set.ambient()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Args {
        let v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
        super::super::cli::parse(FLAGS, &v, false).unwrap()
    }

    fn spec() -> Spec {
        serde_json::from_value(serde_json::json!({
            "ociVersion": "1.0.2",
            "process": {"cwd": "/", "args": ["sh"], "env": ["PATH=/bin"],
                        "user": {"uid": 0, "gid": 0},
                        "capabilities": {"bounding": ["CAP_CHOWN"], "effective": ["CAP_CHOWN"],
                                         "permitted": ["CAP_CHOWN"]}}
        }))
        .unwrap()
    }

    #[test]
    fn overrides_as_runc_applies_them() {
        let a = args(&[
            "-e",
            "A=1",
            "--cwd",
            "/tmp",
            "-u",
            "1000:100",
            "-g",
            "5",
            "--cap",
            "CAP_NET_ADMIN",
            "-t",
            "c1",
            "ls",
            "-l",
        ]);
        let p = process(&a, &spec()).unwrap();
        assert_eq!(
            p.args().as_ref().unwrap(),
            &vec!["ls".to_string(), "-l".into()]
        );
        assert_eq!(
            p.env().as_ref().unwrap(),
            &vec!["PATH=/bin".to_string(), "A=1".into()]
        );
        assert_eq!(p.cwd(), &std::path::PathBuf::from("/tmp"));
        assert_eq!((p.user().uid(), p.user().gid()), (1000, 100));
        assert_eq!(p.user().additional_gids().as_ref().unwrap(), &vec![5]);
        assert_eq!(p.terminal(), Some(true));
        let caps = p.capabilities().as_ref().unwrap();
        assert!(caps
            .bounding()
            .as_ref()
            .unwrap()
            .contains(&Capability::NetAdmin));
        assert!(caps
            .effective()
            .as_ref()
            .unwrap()
            .contains(&Capability::Chown));
        assert!(caps.ambient().is_none());
    }

    #[test]
    fn no_args_and_bad_users_are_refused() {
        let e = process(&args(&["c1"]), &spec()).unwrap_err();
        assert_eq!(e.to_string(), "exec args cannot be empty");
        assert_eq!(e.kind(), crate::error::Kind::InvalidArgument);
        assert!(process(&args(&["-u", "x", "c1", "sh"]), &spec()).is_err());
        assert!(process(&args(&["--cap", "CAP_NOPE", "c1", "sh"]), &spec()).is_err());
    }
}
