//! `create`: read the bundle, make the cgroup and the exec fifo, and leave the
//! container's process set up and waiting at the fifo until `start`. A failure at any
//! step removes everything made so far.

use oci_spec::runtime::Spec;

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::cli::{bool_, val, Args, Flag};
use super::state::{self, State};
use super::{log, status, Error, Globals};
use crate::cgroup::recorded as cgroup;
use crate::cgroup::Group;
use crate::runtime::{container, hooks};
use crate::util::Fraction;

pub const BUNDLE: Flag = val(
    &["bundle", "b"],
    "path to the root of the bundle directory, defaults to the current directory",
);
pub const CONSOLE_SOCKET: Flag = val(
    &["console-socket"],
    "path to an AF_UNIX socket which will receive a file descriptor referencing the master end of the console's pseudoterminal",
);
pub const PID_FILE: Flag = val(&["pid-file"], "specify the file to write the process id to");
pub const NO_PIVOT: Flag = bool_(
    &["no-pivot"],
    "do not use pivot root to jail process inside rootfs",
);
pub const NO_NEW_KEYRING: Flag = bool_(
    &["no-new-keyring"],
    "do not create a new session keyring for the container",
);
pub const PRESERVE_FDS: Flag = val(
    &["preserve-fds"],
    "Pass N additional file descriptors to the container (stdio + $LISTEN_FDS + N in total) (default: 0)",
);

pub const FLAGS: &[Flag] = &[
    BUNDLE,
    CONSOLE_SOCKET,
    PID_FILE,
    NO_PIVOT,
    NO_NEW_KEYRING,
    PRESERVE_FDS,
];

/// The options `create` and `run` share.
pub struct Options {
    pub id: String,
    pub bundle: PathBuf,
    pub pid_file: Option<PathBuf>,
    pub console_socket: Option<PathBuf>,
    pub no_pivot: bool,
    pub no_new_keyring: bool,
    pub preserve_fds: u32,
}

impl Options {
    pub fn from_args(verb: &str, a: &Args) -> Result<Options, Error> {
        let id = a.exactly_one(verb)?.to_string();
        state::validate_id(&id)?;
        let bundle = bundle_dir(a.value("bundle").unwrap_or("."))?;
        let listen = listen_fds(
            std::env::var("LISTEN_PID").ok().as_deref(),
            std::env::var("LISTEN_FDS").ok().as_deref(),
        );
        Ok(Options {
            id,
            bundle,
            pid_file: a.value("pid-file").map(PathBuf::from),
            console_socket: a.value("console-socket").map(PathBuf::from),
            no_pivot: a.on("no-pivot"),
            no_new_keyring: a.on("no-new-keyring"),
            preserve_fds: a.number("preserve-fds")? + listen,
        })
    }
}

/// As runc: the fds socket activation passed to us (LISTEN_FDS, when LISTEN_PID is ours)
/// go to the container too.
fn listen_fds(pid: Option<&str>, fds: Option<&str>) -> u32 {
    if pid.and_then(|p| p.parse::<u32>().ok()) != Some(std::process::id()) {
        return 0;
    }
    fds.and_then(|v| v.parse().ok()).unwrap_or(0)
}

pub fn verb(g: &Globals, a: &Args) -> Result<(), super::Error> {
    let o = Options::from_args("create", a)?;
    let spec = bundle_spec(&o.bundle)?;
    let console = match &o.console_socket {
        Some(p) => Some(connect_console(p)?),
        None if terminal(&spec) => {
            return Err(super::Error::Usage(
                "cannot allocate tty if runc will detach without setting console socket".into(),
            ))
        }
        None => None,
    };
    create(g, &o, spec, console).map(drop)
}

/// A container made: its record and its init.
pub struct Made {
    pub state: State,
    pub pidfd: OwnedFd,
}

/// The bundle `given`, absolute; runc changes into it first, so a bundle that is not a
/// directory fails as its `chdir` does, in Go's words.
fn bundle_dir(given: &str) -> Result<PathBuf, Error> {
    let chdir = |e: nix::errno::Errno| Error::Usage(format!("chdir {given}: {}", go_error(e)));
    match std::fs::metadata(given) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(chdir(nix::errno::Errno::ENOTDIR)),
        Err(e) => {
            let errno = e.raw_os_error().unwrap_or(libc::EIO);
            return Err(chdir(nix::errno::Errno::from_raw(errno)));
        }
    }
    std::path::absolute(given).map_err(|e| Error::io(format_args!("bundle {given}"), e))
}

/// An errno as Go's syscall package words it: the C library's text, lower case first.
pub fn go_error(e: nix::errno::Errno) -> String {
    let text = e.desc();
    let mut c = text.chars();
    match c.next() {
        Some(first) => first.to_lowercase().chain(c).collect(),
        None => String::new(),
    }
}

pub fn terminal(spec: &Spec) -> bool {
    spec.process()
        .as_ref()
        .and_then(|p| p.terminal())
        .unwrap_or(false)
}

/// The environment variable by which a caller that has read the bundle's spec already
/// (the shim, which lays its pause or a pod's files over it) hands it to `create` on an
/// inherited descriptor, as runc hands its init its config (`_LIBCONTAINER_INITPIPE`):
/// config.json is read once per verb and stays as containerd wrote it.
pub const SPEC_FD_ENV: &str = "_PODINIT_SPEC_FD";

/// The bundle's spec for `create` and `run`: the one handed on [`SPEC_FD_ENV`]'s
/// descriptor if the caller named one, else `<bundle>/config.json`; checked either way.
pub fn bundle_spec(bundle: &Path) -> Result<Spec, Error> {
    match std::env::var(SPEC_FD_ENV) {
        Ok(fd) => handed_spec(bundle, &fd),
        Err(_) => load_spec(bundle),
    }
}

/// The spec on inherited descriptor `fd` (a memfd the caller wrote), read from its start
/// and closed before anything is made, so that no container inherits it.
fn handed_spec(bundle: &Path, fd: &str) -> Result<Spec, Error> {
    use std::io::{Read, Seek};
    let path = bundle.join("config.json");
    let what = format!("the spec handed on fd {fd} for {}", path.display());
    let n = fd
        .parse()
        .map_err(|_| Error::Other(format!("{what}: not a descriptor")))?;
    let mut file =
        std::fs::File::from(crate::sys::fd::take_inherited(n).map_err(|e| Error::io(&what, e))?);
    let mut text = Vec::new();
    file.rewind()
        .and_then(|()| file.read_to_end(&mut text))
        .map_err(|e| Error::io(&what, e))?;
    drop(file);
    let spec = crate::tracked::from_slice(&text)
        .map_err(|e| Error::Config(format!("{}: {e}", path.display())))?;
    check_spec(bundle, spec)
}

/// `<bundle>/config.json`, checked, with `root.path` made absolute.
pub fn load_spec(bundle: &Path) -> Result<Spec, Error> {
    let path = bundle.join("config.json");
    let spec = crate::spec::load(bundle).map_err(|e| {
        Error::Config(match e {
            e if e.is_missing() => format!("JSON specification file {} not found", path.display()),
            crate::spec::LoadError::Parse(p, e) => format!("{}: {e}", p.display()),
            e => e.to_string(),
        })
    })?;
    check_spec(bundle, spec)
}

/// What runc checks of a bundle's spec before it makes anything, with `root.path` made
/// absolute.
fn check_spec(bundle: &Path, mut spec: Spec) -> Result<Spec, Error> {
    let path = bundle.join("config.json");
    check_version(spec.version())?;
    let root = spec
        .root()
        .as_ref()
        .map(|r| r.path().clone())
        .ok_or_else(|| Error::Config(format!("{}: root is missing", path.display())))?;
    let root = bundle.join(root);
    if !root.is_dir() {
        return Err(Error::Config(format!(
            "rootfs ({:?}) does not exist",
            root.display()
        )));
    }
    if let Some(r) = spec.root_mut() {
        r.set_path(root);
    }
    if spec.process().is_none() {
        return Err(Error::Config(format!(
            "{}: process is missing",
            path.display()
        )));
    }
    Ok(spec)
}

/// ociVersion 1.0.0 to 1.3.x, a pre-release or build suffix allowed.
pub fn check_version(v: &str) -> Result<(), Error> {
    let core = v.split(['-', '+']).next().unwrap_or("");
    let parts: Vec<&str> = core.split('.').collect();
    let ok = parts.len() == 3
        && parts.iter().all(|p| p.parse::<u32>().is_ok())
        && parts[0] == "1"
        && parts[1].parse::<u32>().is_ok_and(|m| m <= 3);
    if ok {
        Ok(())
    } else {
        Err(Error::Config(format!(
            "unsupported ociVersion {v:?}: podinit-runc takes 1.0.0 to 1.3.x"
        )))
    }
}

/// Connect to `--console-socket`; the terminal's master is sent on it.
pub fn connect_console(path: &Path) -> Result<OwnedFd, Error> {
    let (_dir, addr) = crate::sys::unix_socket::socket_path(path)
        .map_err(|e| Error::io(format_args!("console socket {}", path.display()), e))?;
    let s = std::os::unix::net::UnixStream::connect(&addr).map_err(|e| {
        Error::io(
            format_args!("connecting to console socket {}", path.display()),
            e,
        )
    })?;
    Ok(OwnedFd::from(s))
}

/// Removes what a failed create made: the cgroup (and any process in it) and the state
/// directory.
struct Undo {
    dir: PathBuf,
    group: Option<Group>,
    unified: Option<PathBuf>,
    /// The systemd unit started for it.
    unit: Option<String>,
    armed: bool,
}

impl Drop for Undo {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if let Some(u) = &self.unit {
            match crate::cgroup::systemd::stop(u) {
                Ok(None) => {}
                Ok(Some(e)) | Err(e) => log::warn(&e.to_string()),
            }
        }
        if let Some(g) = &self.group {
            if let Err(e) = g.destroy() {
                log::warn(&format!("removing cgroup: {e}"));
            }
        }
        if let Some(u) = &self.unified {
            cgroup::remove_unified_leaf(u);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Create the container; `console` is the connected console socket, if any.
pub fn create(
    g: &Globals,
    o: &Options,
    spec: Spec,
    console: Option<OwnedFd>,
) -> Result<Made, super::Error> {
    let id = o.id.as_str();
    state::make_dir(&g.root, id)?;
    let dir = g.root.dir(id);
    let mut undo = Undo {
        dir: dir.clone(),
        group: None,
        unified: None,
        unit: None,
        armed: true,
    };
    let _lock = state::lock(&g.root, id)?;
    let cgroups_path = spec
        .linux()
        .as_ref()
        .and_then(|l| l.cgroups_path().as_ref())
        .map(|p| p.to_string_lossy().into_owned());
    // The systemd driver's cgroup is its unit's, recorded by its absolute path so that
    // every later verb finds it as the cgroupfs driver's.
    let (group, recorded, unit) = if g.systemd {
        let (u, group) = crate::cgroup::systemd::resolve(cgroups_path.as_deref(), id)?;
        (group, Some(u.cgroup.clone()), Some(u))
    } else {
        let (group, recorded) = cgroup::resolve(cgroups_path.as_deref(), id)?;
        (group, recorded, None)
    };
    let me = std::process::id() as i32;
    let mut st = State {
        id: id.to_string(),
        init_process_pid: 0,
        init_process_start: 0,
        creator: crate::sys::proc::start_time(me).map(|t| (me, t)),
        created: crate::util::rfc3339(crate::util::now_unix_nanos(), Fraction::Trimmed),
        bundle: o.bundle.clone(),
        rootfs: spec
            .root()
            .as_ref()
            .map(|r| r.path().clone())
            .unwrap_or_default(),
        annotations: spec.annotations().clone().unwrap_or_default(),
        cgroups_path: recorded,
        cgroup_paths: group.dirs().to_vec(),
        systemd_unit: unit.as_ref().map(|u| u.name.clone()),
        config: spec,
    };
    // Recorded before anything is made, so that `delete --force` can remove what a
    // crashed create leaves.
    state::save(&g.root, &st)?;
    let cg = |e: std::io::Error| format!("cgroup of container {id}: {e}");
    let resources = st
        .config
        .linux()
        .as_ref()
        .and_then(|l| l.resources().clone());
    let group = match group.create_all().map_err(std::io::Error::from) {
        Ok(()) => group,
        Err(e) if super::rootless::ignorable(g.rootless, cgroups_path.as_deref(), &e) => {
            // Without root and without a cgroup, as runc's rootless fs manager goes on.
            let v2 = group.is_v2();
            if let Some(why) =
                (resources.as_ref()).and_then(|r| super::rootless::unsettable(r, v2, &e))
            {
                return Err(why.into());
            }
            st.cgroup_paths.clear();
            state::save(&g.root, &st)?;
            super::rootless::no_group(id)
        }
        Err(e) => {
            undo.group = Some(group);
            return Err(cg(e).into());
        }
    };
    let group = &*undo.group.insert(group);
    // Under systemd the limits wait for the unit: systemd hands the scope its
    // controllers as it starts it.
    if let Some(r) = resources.as_ref().filter(|_| unit.is_none()) {
        group.set(r).map_err(|e| cg(e.into()))?;
    }
    let device_rules = crate::spec::cgroup_rules(&st.config);
    group
        .confine_devices(&device_rules)
        .map_err(|e| cg(e.into()))?;
    let mut placement = group.placement().map_err(|e| cg(e.into()))?;
    let unified = cgroup::unified_leaf(st.cgroups_path.as_deref(), id);
    if let Some(u) = unified.filter(|_| !group.is_none()) {
        std::fs::create_dir_all(&u).map_err(cg)?;
        undo.unified = Some(u.clone());
        placement = placement.with_unified(&u).map_err(cg)?;
    }
    let fifo = state::fifo_path(&dir);
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o622))
        .map_err(|e| format!("creating exec fifo {}: {e}", fifo.display()))?;
    std::fs::set_permissions(&fifo, std::fs::Permissions::from_mode(0o622))
        .map_err(|e| format!("exec fifo {}: {e}", fifo.display()))?;
    let hooks = st.config.hooks().clone().unwrap_or_default();
    let state_json = |pid: i32, status_: &str| status::hook_json(&st, status_, pid);
    let created = container::create(
        &container::Create {
            id,
            spec: &st.config,
            cgroup: &placement,
            exec_fifo: &fifo,
            console_socket: console.as_ref().map(|c| c.as_fd()),
            preserve_fds: o.preserve_fds,
            no_pivot: o.no_pivot,
            no_new_keyring: o.no_new_keyring,
            state_json: &state_json,
        },
        &mut |pid| {
            let json = status::hook_json(&st, "creating", pid);
            hooks::run(
                "prestart",
                hooks.prestart().as_deref().unwrap_or(&[]),
                &json,
            )?;
            hooks::run(
                "createRuntime",
                hooks.create_runtime().as_deref().unwrap_or(&[]),
                &json,
            )
        },
    )
    .map_err(|err| super::Error::Runtime {
        id: id.to_string(),
        err,
    })?;
    if let Some(u) = &unit {
        // runc's Apply and Set: the unit with the init in it, its properties, then the
        // files (systemd writes its own as it starts the unit).
        undo.unit = Some(u.name.clone());
        let r = st
            .config
            .linux()
            .as_ref()
            .and_then(|l| l.resources().as_ref());
        crate::cgroup::systemd::start(u, created.pid, r, Some(&device_rules))?;
        if let Some(r) = r {
            group.set(r).map_err(|e| cg(e.into()))?;
        }
    }
    let start = crate::sys::proc::start_time(created.pid)
        .ok_or_else(|| format!("container {id}: its process exited during create"))?;
    if let Some(p) = &o.pid_file {
        state::write_pid_file(p, created.pid)?;
    }
    st.init_process_pid = created.pid;
    st.init_process_start = start;
    st.creator = None;
    state::save(&g.root, &st)?;
    undo.armed = false;
    Ok(Made {
        state: st,
        pidfd: created.pidfd,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oci_versions_1_0_to_1_3_are_accepted() {
        for ok in ["1.0.0", "1.0.2-dev", "1.1.0", "1.2.1", "1.3.0", "1.3.9+x"] {
            assert!(check_version(ok).is_ok(), "{ok}");
        }
        for bad in ["0.9.0", "1.4.0", "2.0.0", "1.0", "", "x.y.z"] {
            assert!(check_version(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn socket_activation_fds_only_when_meant_for_us() {
        let me = std::process::id().to_string();
        assert_eq!(listen_fds(Some(&me), Some("2")), 2);
        assert_eq!(listen_fds(Some("1"), Some("2")), 0);
        assert_eq!(listen_fds(None, Some("2")), 0);
        assert_eq!(listen_fds(Some(&me), None), 0);
    }

    #[test]
    fn a_missing_bundle_fails_as_runc_chdir_does() {
        let e = bundle_dir("/no/such/bundle").unwrap_err();
        assert_eq!(
            e.to_string(),
            "chdir /no/such/bundle: no such file or directory"
        );
        let e = bundle_dir("/proc/self/status").unwrap_err();
        assert_eq!(e.to_string(), "chdir /proc/self/status: not a directory");
        assert!(bundle_dir(".").unwrap().is_absolute());
    }

    #[test]
    fn a_bundle_without_rootfs_or_config_is_refused() {
        let tmp = std::env::temp_dir().join(format!("runc-create-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).unwrap();
        let e = load_spec(&tmp).unwrap_err().to_string();
        assert!(e.contains("not found"), "{e}");
        std::fs::write(
            tmp.join("config.json"),
            r#"{"ociVersion":"1.0.2","root":{"path":"rootfs"},"process":{"cwd":"/","args":["sh"]}}"#,
        )
        .unwrap();
        let e = load_spec(&tmp).unwrap_err().to_string();
        assert!(e.contains("process: missing field `user`"), "{e}");
        std::fs::write(
            tmp.join("config.json"),
            r#"{"ociVersion":"1.0.2","root":{"path":"rootfs"},"process":{"cwd":"/","args":["sh"],"user":{"uid":0,"gid":0}}}"#,
        )
        .unwrap();
        let e = load_spec(&tmp).unwrap_err();
        assert_eq!(e.kind(), crate::error::Kind::InvalidArgument);
        assert!(e.to_string().contains("does not exist"), "{e}");
        std::fs::create_dir(tmp.join("rootfs")).unwrap();
        let spec = load_spec(&tmp).unwrap();
        assert_eq!(spec.root().as_ref().unwrap().path(), &tmp.join("rootfs"));
        std::fs::write(
            tmp.join("config.json"),
            r#"{"ociVersion":"2.0.0","root":{"path":"rootfs"},"process":{"cwd":"/","args":["sh"],"user":{"uid":0,"gid":0}}}"#,
        )
        .unwrap();
        assert!(load_spec(&tmp)
            .unwrap_err()
            .to_string()
            .contains("unsupported ociVersion"));
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    /// A memfd holding `text`, as the shim hands a spec on, by its number.
    fn handed(text: &str) -> String {
        use std::io::Write;
        use std::os::fd::IntoRawFd;
        let fd =
            nix::sys::memfd::memfd_create("test-spec", nix::sys::memfd::MFdFlags::empty()).unwrap();
        let mut f = std::fs::File::from(fd);
        f.write_all(text.as_bytes()).unwrap();
        f.into_raw_fd().to_string()
    }

    #[test]
    fn a_handed_spec_is_read_from_its_start_and_checked_as_config_json() {
        let tmp = std::env::temp_dir().join(format!("runc-handed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(tmp.join("rootfs")).unwrap();
        // All open at once: a descriptor is taken once per process, and a closed one's
        // number comes back.
        let [good, bad, newer] = [
            r#"{"ociVersion":"1.0.2","root":{"path":"rootfs"},"process":{"cwd":"/","args":["sh"],"user":{"uid":0,"gid":0}}}"#,
            r#"{"ociVersion":"1.0.2","process":{"cwd":1}}"#,
            r#"{"ociVersion":"2.0.0","root":{"path":"rootfs"},"process":{"cwd":"/","args":["sh"],"user":{"uid":0,"gid":0}}}"#,
        ]
        .map(handed);
        let spec = handed_spec(&tmp, &good).unwrap();
        assert_eq!(spec.root().as_ref().unwrap().path(), &tmp.join("rootfs"));
        assert!(!tmp.join("config.json").exists(), "no config.json was read");
        let e = handed_spec(&tmp, &bad).unwrap_err();
        assert_eq!(e.kind(), crate::error::Kind::InvalidArgument);
        assert!(
            e.to_string().starts_with(&format!(
                "{}: process.cwd",
                tmp.join("config.json").display()
            )),
            "{e}"
        );
        let e = handed_spec(&tmp, &newer).unwrap_err();
        assert!(e.to_string().contains("unsupported ociVersion"), "{e}");
        // Taken already: not read twice.
        assert!(handed_spec(&tmp, &good).is_err());
        assert!(handed_spec(&tmp, "x").is_err());
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
