//! A [`Kernel`] for unit tests: it records every call, in order, as one line of text, and
//! answers from a small imaginary filesystem instead of touching the real one.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::CStr;
use std::io;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};

use super::kernel::{Kernel, Kind};
use crate::runtime::caps_set::Caps;
use crate::runtime::seccomp::Filter;
use crate::runtime::sync::Sync;
use crate::runtime::Error;

#[derive(Default)]
pub struct Recorder {
    calls: RefCell<Vec<String>>,
    /// The environment of the last execve.
    env: RefCell<Vec<String>>,
    /// What exists (by `lstat`); anything else does not. Links are not followed by `stat`.
    pub paths: HashMap<PathBuf, Kind>,
    pub links: HashMap<PathBuf, PathBuf>,
    /// A call (its recorded line's first word) that fails with EPERM.
    pub fail: Option<&'static str>,
    /// What `getcwd` answers (`/` when unset).
    pub cwd: Option<Vec<u8>>,
}

impl Recorder {
    pub fn calls(&self) -> Vec<String> {
        self.calls.borrow().clone()
    }

    pub fn env(&self) -> Vec<String> {
        self.env.borrow().clone()
    }

    fn log(&self, name: &'static str, args: std::fmt::Arguments) -> io::Result<()> {
        self.calls.borrow_mut().push(format!("{name} {args}"));
        if self.fail == Some(name) {
            return Err(io::Error::from_raw_os_error(libc::EPERM));
        }
        Ok(())
    }
}

fn s(c: &CStr) -> std::borrow::Cow<'_, str> {
    c.to_string_lossy()
}

impl Kernel for Recorder {
    fn join_cgroups(&self, tasks: &[PathBuf]) -> crate::runtime::Result<()> {
        self.log("join_cgroups", format_args!("{tasks:?}"))
            .map_err(|e| Error::os("joining the cgroups", e))
    }
    fn reset_signals(&self, ignored: u64) {
        let _ = self.log("reset_signals", format_args!("{ignored:#x}"));
    }
    fn unshare(&self, flags: libc::c_int) -> io::Result<()> {
        self.log("unshare", format_args!("{flags:#x}"))
    }
    fn setsid(&self) {
        let _ = self.log("setsid", format_args!(""));
    }
    fn set_stdio(&self, fd: RawFd, target: RawFd) -> io::Result<()> {
        self.log("set_stdio", format_args!("{fd} {target}"))
    }
    fn console(&self, sock: RawFd, size: Option<(u16, u16)>) -> io::Result<()> {
        self.log("console", format_args!("{sock} {size:?}"))
    }
    fn setns(&self, fd: RawFd, nstype: libc::c_int) -> io::Result<()> {
        self.log("setns", format_args!("{fd} {nstype:#x}"))
    }
    fn mount(
        &self,
        src: Option<&Path>,
        target: &Path,
        fstype: Option<&str>,
        flags: libc::c_ulong,
        data: &str,
    ) -> io::Result<()> {
        let src = src.map_or(String::from("-"), |p| p.display().to_string());
        let fstype = fstype.unwrap_or("-");
        self.log(
            "mount",
            format_args!("{src} {} {fstype} {flags:#x} {data}", target.display()),
        )
    }
    fn mount_in_root(
        &self,
        _root: &Path,
        src: Option<&Path>,
        target: &Path,
        fstype: Option<&str>,
        flags: libc::c_ulong,
        data: &str,
    ) -> io::Result<()> {
        self.mount(src, target, fstype, flags, data)
    }
    fn bind_beneath(
        &self,
        src_root: &Path,
        src: &Path,
        _root: &Path,
        target: &Path,
        flags: libc::c_ulong,
    ) -> io::Result<()> {
        self.log(
            "bind_beneath",
            format_args!(
                "{} {} {} {flags:#x}",
                src_root.display(),
                src.display(),
                target.display()
            ),
        )
    }
    fn bind_null(&self, target: &Path) -> io::Result<()> {
        self.mount(
            Some(Path::new("/dev/null")),
            target,
            None,
            libc::MS_BIND,
            "",
        )
    }
    fn mask_dir(&self, target: &Path) -> io::Result<()> {
        self.log("mask_dir", format_args!("{}", target.display()))
    }
    fn bind_readonly(&self, path: &Path) -> io::Result<()> {
        self.log("bind_readonly", format_args!("{}", path.display()))
    }
    fn ensure_dir_in_root(&self, _root: &Path, path: &Path) -> io::Result<()> {
        self.log("ensure_dir", format_args!("{}", path.display()))
    }
    fn create_file_in_root(&self, _root: &Path, path: &Path) -> io::Result<()> {
        self.create_file(path)
    }
    fn set_attr_recursive(&self, target: &Path, set: u64, clr: u64) -> io::Result<()> {
        self.log(
            "set_attr_recursive",
            format_args!("{} {set:#x} {clr:#x}", target.display()),
        )
    }
    fn chdir(&self, dir: &CStr) -> io::Result<()> {
        self.log("chdir", format_args!("{}", s(dir)))
    }
    fn getcwd(&self) -> io::Result<Vec<u8>> {
        self.log("getcwd", format_args!(""))?;
        Ok(self.cwd.clone().unwrap_or_else(|| b"/".to_vec()))
    }
    fn set_dumpable(&self, on: bool) -> io::Result<()> {
        self.log("set_dumpable", format_args!("{on}"))
    }
    fn pivot_root_here(&self) -> io::Result<()> {
        self.log("pivot_root", format_args!(". ."))
    }
    fn detach(&self, target: &CStr) -> io::Result<()> {
        self.log("detach", format_args!("{}", s(target)))
    }
    fn statfs_type(&self, path: &CStr) -> io::Result<libc::__fsword_t> {
        self.log("statfs", format_args!("{}", s(path)))?;
        Ok(libc::PROC_SUPER_MAGIC)
    }
    fn lstat(&self, path: &Path) -> Option<Kind> {
        self.paths.get(path).copied()
    }
    fn stat(&self, path: &Path) -> io::Result<Kind> {
        self.paths
            .get(path)
            .copied()
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))
    }
    fn read_link(&self, path: &Path) -> Option<PathBuf> {
        self.links.get(path).cloned()
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.log("create_dir_all", format_args!("{}", path.display()))
    }
    fn create_file(&self, path: &Path) -> io::Result<()> {
        self.log("create_file", format_args!("{}", path.display()))
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.log("remove_file", format_args!("{}", path.display()))
    }
    fn write_proc(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        let data = String::from_utf8_lossy(data);
        self.log("write_proc", format_args!("{} {data}", path.display()))
    }
    fn symlink(&self, target: &str, link: &Path) -> io::Result<()> {
        self.log("symlink", format_args!("{target} {}", link.display()))
    }
    fn mknod(&self, path: &CStr, mode: libc::mode_t, major: u64, minor: u64) -> io::Result<()> {
        self.log(
            "mknod",
            format_args!("{} {mode:o} {major}:{minor}", s(path)),
        )
    }
    fn chown(&self, path: &CStr, uid: u32, gid: u32) -> io::Result<()> {
        self.log("chown", format_args!("{} {uid}:{gid}", s(path)))
    }
    fn umask(&self, mask: libc::mode_t) -> libc::mode_t {
        let _ = self.log("umask", format_args!("{mask:o}"));
        0o22
    }
    fn is_root(&self) -> bool {
        true
    }
    fn setrlimit(&self, res: libc::__rlimit_resource_t, soft: u64, hard: u64) -> io::Result<()> {
        self.log("setrlimit", format_args!("{res} {soft} {hard}"))
    }
    fn close_range_cloexec(&self, first: u32) {
        let _ = self.log("close_range_cloexec", format_args!("{first}"));
    }
    fn close_fds_except(&self, first: u32, keep: &[RawFd]) {
        let _ = self.log("close_fds_except", format_args!("{first} {keep:?}"));
    }
    fn mount_flags(&self, path: &CStr) -> io::Result<libc::c_ulong> {
        self.log("mount_flags", format_args!("{}", s(path)))?;
        Ok(libc::MS_NOSUID | libc::MS_RELATIME)
    }
    fn mount_point_of(&self, path: &Path) -> Option<PathBuf> {
        let _ = self.log("mount_point_of", format_args!("{}", path.display()));
        Some(PathBuf::from("/"))
    }
    fn read_file(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.log("read_file", format_args!("{}", path.display()))?;
        Ok(b"root:x:0:0:root:/root:/bin/sh\nu:x:1000:1000::/home/u:/bin/sh\n".to_vec())
    }
    fn setgroups(&self, groups: &[libc::gid_t]) -> io::Result<()> {
        self.log("setgroups", format_args!("{groups:?}"))
    }
    fn keep_caps(&self, on: bool) -> io::Result<()> {
        self.log("keep_caps", format_args!("{on}"))
    }
    fn setresgid(&self, gid: libc::gid_t) -> io::Result<()> {
        self.log("setresgid", format_args!("{gid}"))
    }
    fn setresuid(&self, uid: libc::uid_t) -> io::Result<()> {
        self.log("setresuid", format_args!("{uid}"))
    }
    fn drop_bounding(&self, caps: &Caps) -> crate::runtime::Result<()> {
        self.log("drop_bounding", format_args!("{}", caps.bounding.len()))
            .map_err(|e| Error::os("dropping the bounding set", e))
    }
    fn set_caps(&self, caps: &Caps) -> crate::runtime::Result<()> {
        self.log("set_caps", format_args!("{}", caps.effective.len()))
            .map_err(|e| Error::os("setting the capabilities", e))
    }
    fn no_new_privs(&self) -> io::Result<()> {
        self.log("no_new_privs", format_args!(""))
    }
    fn seccomp(&self, filter: &Filter) -> crate::runtime::Result<()> {
        self.log("seccomp", format_args!("{}", filter.program.len()))
            .map_err(|e| Error::os("installing the seccomp filter", e))
    }
    fn set_hostname(&self, name: &CStr) -> io::Result<()> {
        self.log("set_hostname", format_args!("{}", s(name)))
    }
    fn set_domainname(&self, name: &CStr) -> io::Result<()> {
        self.log("set_domainname", format_args!("{}", s(name)))
    }
    fn join_keyring(&self, name: &CStr) -> io::Result<()> {
        self.log("join_keyring", format_args!("{}", s(name)))
    }
    fn personality(&self, persona: libc::c_ulong) -> io::Result<()> {
        self.log("personality", format_args!("{persona}"))
    }
    fn chroot(&self, dir: &CStr) -> io::Result<()> {
        self.log("chroot", format_args!("{}", s(dir)))
    }
    fn sync_send(&self, fd: RawFd, msg: &[u8]) -> io::Result<()> {
        self.log(
            "sync_send",
            format_args!("{fd} {}", String::from_utf8_lossy(msg)),
        )
    }
    fn sync_recv(&self, fd: RawFd) -> io::Result<Vec<u8>> {
        self.log("sync_recv", format_args!("{fd}"))?;
        // The creator's answers: "go" with the two states first, then "continue".
        let first = self
            .calls
            .borrow()
            .iter()
            .filter(|c| c.starts_with("sync_recv"))
            .count()
            == 1;
        if !first {
            return Ok(Sync::Continue.encode());
        }
        Ok(Sync::Go {
            creating: r#"{"status":"creating"}"#.into(),
            created: r#"{"status":"created"}"#.into(),
        }
        .encode())
    }
    fn pass_gate(&self, fifo: RawFd) -> io::Result<()> {
        self.log("pass_gate", format_args!("{fifo}"))
    }
    fn run_hooks(
        &self,
        phase: &str,
        hooks: &[oci_spec::runtime::Hook],
        state: &str,
    ) -> crate::runtime::Result<()> {
        self.log("run_hooks", format_args!("{phase} {} {state}", hooks.len()))
            .map_err(|e| Error::Hook(format!("{phase}: {e}")))
    }
    fn access(&self, path: &CStr) -> io::Result<()> {
        self.log("access", format_args!("{}", s(path)))?;
        if self.paths.contains_key(Path::new(&*s(path))) {
            Ok(())
        } else {
            Err(io::Error::from_raw_os_error(libc::ENOENT))
        }
    }
    fn execve(
        &self,
        path: &CStr,
        _argv: &[*const libc::c_char],
        envp: &[*const libc::c_char],
    ) -> io::Error {
        let _ = self.log("execve", format_args!("{}", s(path)));
        *self.env.borrow_mut() = envp
            .iter()
            .take_while(|e| !e.is_null())
            // SAFETY: the caller's NUL-terminated envp of valid C strings.
            .map(|&e| s(unsafe { CStr::from_ptr(e) }).into_owned())
            .collect();
        // A recorder cannot become another program: the exec fails, and the set-up ends.
        io::Error::from_raw_os_error(libc::ENOEXEC)
    }
}
