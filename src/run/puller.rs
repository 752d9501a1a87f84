//! The image puller: a process forked by `podinit run` before the sandbox exists, so it
//! stays in the caller's namespaces, where registries (one on the host's loopback too) are
//! reachable; the supervisor, in the pod's network namespace, asks it for pulls over a
//! `SOCK_SEQPACKET` socket (`supervisor::images`) and goes on with its loop meanwhile. It
//! pulls one image at a time, as kubelet's default serial puller does, and ends when the
//! supervisor's end of the socket closes.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, Secret};

use crate::admission::pull_logins::{self, Login};
use crate::image::progress::ProgressLine;
use crate::image::pull_records::Records;
use crate::image::reference::Reference;
use crate::image::registry::{self, Options};
use crate::image::store::Store;
use crate::pod::image_pull::PullResult;
use crate::supervisor::images::{parse_request, reply, MAX_MESSAGE};
use crate::sys::clone::Cloned;

/// No progress for this long fails a pull: containerd's `image_pull_progress_timeout`.
const PROGRESS_TIMEOUT: Duration = Duration::from_secs(300);

/// What a pull may log in with, read when the first pull is asked: the pod's
/// `imagePullSecrets` (in its order) before the caller's `~/.docker/config.json`, as
/// kubelet tries the pod's secrets before the node's credentials.
pub(super) struct Logins {
    configs: Vec<pull_logins::Config>,
}

impl Logins {
    pub(super) fn of(pod: &Pod, secrets: &[Secret]) -> Logins {
        let mut configs = pull_logins::secret_configs(pod, secrets);
        // Docker's own lookup: `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`.
        let dir = std::env::var_os("DOCKER_CONFIG")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".docker")));
        if let Some(p) = dir.map(|d| d.join("config.json")) {
            if let Ok(json) = std::fs::read(&p) {
                configs.push(pull_logins::Config {
                    from: p.display().to_string(),
                    secret: None,
                    json,
                });
            }
        }
        Logins { configs }
    }
}

/// `--registry-ca` and `--insecure-registry` as given: a CA file that is not there, or a
/// registry that is not `HOST[:PORT]`, is bad input, refused before anything is made.
pub(super) fn check_options(ca_files: &[PathBuf], insecure: &[String]) -> Result<(), super::Error> {
    for f in ca_files {
        if !f.is_file() {
            return Err(super::Error::Options(format!(
                "--registry-ca {}: not a readable file",
                f.display()
            )));
        }
    }
    for h in insecure {
        let bad = h.is_empty() || h.contains(['/', '@', ' ']) || h.contains("://");
        if bad {
            return Err(super::Error::Options(format!(
                "--insecure-registry {h:?}: want HOST[:PORT], as in registry.example:5000"
            )));
        }
    }
    Ok(())
}

/// How the puller reaches registries and where it stores what it pulls.
pub(super) struct Setup {
    pub images: PathBuf,
    pub ca_files: Vec<PathBuf>,
    pub insecure: Vec<String>,
    pub logins: Logins,
}

/// Fork the puller; returns it and the supervisor's end of its socket. Must be called
/// while `podinit run` is single-threaded.
pub(super) fn spawn(setup: Setup) -> Result<(Cloned, OwnedFd), super::Error> {
    let (ours, theirs) = nix::sys::socket::socketpair(
        nix::sys::socket::AddressFamily::Unix,
        nix::sys::socket::SockType::SeqPacket,
        None,
        nix::sys::socket::SockFlag::SOCK_CLOEXEC,
    )
    .map_err(|e| super::Error::errno("socketpair for the image puller", e))?;
    let cloned = crate::sys::clone::fork(0, None)
        .map_err(|e| super::Error::io("starting the image puller", e))?;
    match cloned {
        Some(child) => {
            drop(theirs);
            Ok((child, ours))
        }
        None => {
            drop(ours);
            let _ = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL);
            // A Ctrl-C reaches the whole process group: the pod's termination is the
            // supervisor's to carry out, and `podinit run` ends the puller itself after.
            for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
                crate::sys::signals::ignore(sig);
            }
            serve(&theirs, &setup);
            std::process::exit(0);
        }
    }
}

/// Answer pull requests until the supervisor's end closes.
fn serve(fd: &OwnedFd, setup: &Setup) {
    let mut opts: Option<(Options, Vec<Login>)> = None;
    loop {
        let m = match crate::sys::packet::recv(fd.as_raw_fd(), MAX_MESSAGE) {
            Ok(m) if !m.is_empty() => m,
            _ => return,
        };
        let Some((to, name)) = parse_request(&m) else {
            continue;
        };
        let (opts, logins) = opts.get_or_insert_with(|| {
            let logins = pull_logins::logins(&setup.logins.configs);
            let opts = Options {
                ca_files: setup.ca_files.clone(),
                insecure: setup.insecure.clone(),
                credentials: logins.iter().map(|l| l.credential.clone()).collect(),
                timeout: Some(PROGRESS_TIMEOUT),
            };
            (opts, logins)
        });
        let r = pull(setup, &name, opts, logins);
        if crate::sys::packet::send(fd.as_raw_fd(), &reply(to, &r)).is_err() {
            return;
        }
    }
}

/// One pull, timed: its result as the supervisor hears it. The store's pull records say
/// a pull of `name` is under way while it is, and then which login pulled it: kubelet's
/// `RecordPullIntent` and `RecordImagePulled` (docs/images.md §Pull records).
fn pull(setup: &Setup, name: &str, opts: &Options, logins: &[Login]) -> PullResult {
    let started = Instant::now();
    let mut line = ProgressLine::new(name, !crate::log::quiet());
    let records = Records::of(&setup.images);
    let pulled = Reference::parse(name).and_then(|r| {
        let store = Store::open(&setup.images)?;
        records.begin(name)?;
        let img = match registry::pull(&store, &r, opts, &mut |p| line.show(&p)) {
            Ok(img) => img,
            Err(e) => {
                let _ = records.end(name);
                return Err(e);
            }
        };
        let creds = pull_logins::pulled_with(logins, registry::login_for(opts, &r));
        if let Err(e) = records.record(&img.digest.to_string(), &r.repository(), Some(&creds)) {
            crate::log::warn(&format!("the pull record of {name}: {e}"));
        }
        if let Err(e) = records.end(name) {
            crate::log::warn(&format!("the pull intent of {name}: {e}"));
        }
        let size = store
            .list()
            .ok()
            .and_then(|l| l.into_iter().find(|e| e.digest == img.digest))
            .map_or(0, |e| e.size);
        Ok(size)
    });
    line.finish();
    match pulled {
        Ok(size) => PullResult::Pulled {
            took_ms: started.elapsed().as_millis() as u64,
            size,
        },
        Err(e) => PullResult::Failed(String::from(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn registry_options_are_checked() {
        assert!(check_options(&[], &["reg.example:5000".into(), "[::1]:5000".into()]).is_ok());
        let e = check_options(&[PathBuf::from("/nonexistent/ca.pem")], &[])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--registry-ca /nonexistent/ca.pem"), "{e}");
        for bad in ["https://reg.example", "reg.example/path", ""] {
            assert!(check_options(&[], &[bad.into()]).is_err(), "{bad}");
        }
    }
}
