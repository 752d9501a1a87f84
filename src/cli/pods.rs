//! Finding a pod by name under the state root, and what is kept of a pod that has ended
//! (docs/interface.md §2 "Finding a pod by name"): the client commands' target, `podinit
//! pods` and `podinit rm`.

use serde_json::Value;
use std::path::{Path, PathBuf};

use super::exit::Failure;
use crate::error::Kind;

pub use crate::run::STATE_ROOT;

/// A pod's state dir under the state root.
#[derive(Debug, Clone, PartialEq)]
pub struct PodDir {
    pub namespace: String,
    pub name: String,
    pub dir: PathBuf,
}

impl PodDir {
    /// `NAMESPACE/NAME`, as a user names it.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.join("pod.sock")
    }

    /// Whether its supervisor answers on the socket.
    pub fn is_running(&self) -> bool {
        std::os::unix::net::UnixStream::connect(self.socket()).is_ok()
    }

    /// The kept Pod object, `status.json`.
    pub fn pod(&self) -> Result<Value, Failure> {
        let path = self.dir.join("status.json");
        let text = std::fs::read(&path)
            .map_err(|e| Failure::io(format_args!("reading {}", path.display()), e))?;
        serde_json::from_slice(&text)
            .map_err(|e| Failure::failed(Kind::Internal, format!("{}: {e}", path.display())))
    }
}

/// What a client command talks to.
#[derive(Debug, PartialEq)]
pub enum Target {
    /// A running pod's status socket.
    Live(PathBuf),
    /// A pod that has ended: its kept files.
    Ended(PodDir),
}

/// `NAME` or `NAMESPACE/NAME` (namespace `default`).
pub fn parse_name(pod: &str) -> Result<(String, String), Failure> {
    let (ns, name) = match pod.split_once('/') {
        Some((ns, name)) => (ns, name),
        None => ("default", pod),
    };
    if ns.is_empty() || name.is_empty() || name.contains('/') {
        return Err(Failure::failed(
            Kind::InvalidArgument,
            format!("POD {pod:?}: give NAME or NAMESPACE/NAME (e.g. web, prod/web)"),
        ));
    }
    Ok((ns.to_string(), name.to_string()))
}

/// Every pod under `root`: each directory with a `status.json` or a `pod.sock`, named by
/// its Pod object (else by the `<namespace>_<name>` of its directory), sorted.
pub fn list(root: &Path) -> Vec<PodDir> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut pods: Vec<PodDir> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|d| d.is_dir() && (d.join("status.json").exists() || d.join("pod.sock").exists()))
        .filter_map(|dir| {
            let kept = std::fs::read(dir.join("status.json"))
                .ok()
                .and_then(|t| serde_json::from_slice::<Value>(&t).ok());
            let meta = kept.as_ref().map(|p| &p["metadata"]);
            let from_meta = meta.and_then(|m| {
                let name = m["name"].as_str()?;
                let ns = m["namespace"].as_str().unwrap_or("default");
                Some((ns.to_string(), name.to_string()))
            });
            // A namespace is a DNS label: the first `_` ends it.
            let (namespace, name) = from_meta.or_else(|| {
                let leaf = dir.file_name()?.to_str()?;
                let (ns, name) = leaf.split_once('_')?;
                Some((ns.to_string(), name.to_string()))
            })?;
            Some(PodDir {
                namespace,
                name,
                dir,
            })
        })
        .collect();
    pods.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    pods
}

/// The pod a command names: `pod` under `root`; else `socket` (`--socket`, then
/// `$PODINIT_SOCKET`); else the only pod under `root`.
pub fn find(pod: Option<&str>, socket: Option<PathBuf>, root: &Path) -> Result<PodDir, Find> {
    let pods = list(root);
    let names = || pods.iter().map(PodDir::key).collect::<Vec<_>>().join(", ");
    if let Some(pod) = pod {
        let (ns, name) = parse_name(pod).map_err(Find::Error)?;
        return pods
            .iter()
            .find(|p| p.namespace == ns && p.name == name)
            .cloned()
            .ok_or_else(|| {
                let there = match pods.is_empty() {
                    true => "there are none".to_string(),
                    false => format!("there are: {}", names()),
                };
                Find::Error(Failure::failed(
                    Kind::NotFound,
                    format!(
                        "pod {ns}/{name} not found under {} ({there})",
                        root.display()
                    ),
                ))
            });
    }
    if let Some(s) = socket {
        return Err(Find::Socket(s));
    }
    match pods.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(Find::Error(Failure::failed(
            Kind::NotFound,
            format!(
                "no pod under {}: give POD, --state-root DIR, --socket PATH or set $PODINIT_SOCKET",
                root.display()
            ),
        ))),
        _ => Err(Find::Error(Failure::failed(
            Kind::InvalidArgument,
            format!(
                "{} pods under {}: name one of {}",
                pods.len(),
                root.display(),
                names()
            ),
        ))),
    }
}

/// Why `find` found no pod directory.
#[derive(Debug, PartialEq)]
pub enum Find {
    /// A socket was given instead: use it as it is.
    Socket(PathBuf),
    Error(Failure),
}

/// The target of a client command (see `find`): a running pod's socket, or an ended one.
pub fn target(pod: Option<&str>, socket: Option<PathBuf>, root: &Path) -> Result<Target, Failure> {
    let socket = crate::api::client::socket_path(socket.as_deref());
    // A POD named on the command line wins over --socket and $PODINIT_SOCKET.
    match find(pod, socket, root) {
        Ok(p) if p.is_running() => Ok(Target::Live(p.socket())),
        Ok(p) => Ok(Target::Ended(p)),
        Err(Find::Socket(s)) => Ok(Target::Live(s)),
        Err(Find::Error(e)) => Err(e),
    }
}

/// Which kept log file `logs` reads for container `name` of an ended pod, as kubelet
/// picks the run (`pod::log_run`, from the status alone): the latest run's, or with
/// `previous` the one before it.
pub fn kept_log(dir: &Path, pod: &Value, name: &str, previous: bool) -> Result<PathBuf, Failure> {
    let pod_name = pod["metadata"]["name"].as_str().unwrap_or("");
    let st = &pod["status"];
    let c = [
        "initContainerStatuses",
        "containerStatuses",
        "ephemeralContainerStatuses",
    ]
    .iter()
    .filter_map(|l| st[*l].as_array())
    .flatten()
    .find(|c| c["name"] == name)
    .ok_or_else(|| {
        Failure::failed(
            Kind::NotFound,
            format!("container {name} is not valid for pod {pod_name}"),
        )
    })?;
    let count = c["restartCount"].as_u64().unwrap_or(0);
    let ran = |s: &Value| s["terminated"]["finishedAt"].is_string() || s["running"].is_object();
    let current_ran = ran(&c["state"]);
    let last_ran = c["lastState"]["terminated"].is_object();
    let run = if previous {
        match (last_ran, current_ran) {
            (true, true) => count.checked_sub(1),
            (true, false) => Some(count),
            _ => None,
        }
        .ok_or_else(|| {
            Failure::failed(
                Kind::NotFound,
                format!("previous terminated container {name:?} in pod {pod_name:?} not found"),
            )
        })?
    } else if current_ran || last_ran {
        count
    } else if let Some(reason) = c["state"]["waiting"]["reason"].as_str() {
        return Err(Failure::failed(
            Kind::FailedPrecondition,
            format!("container {name:?} in pod {pod_name:?} is waiting to start: {reason}"),
        ));
    } else {
        return Err(Failure::failed(
            Kind::FailedPrecondition,
            format!("container {name:?} in pod {pod_name:?} is terminated"),
        ));
    };
    Ok(crate::logs::LogFile::path_for(
        &dir.join("logs"),
        name,
        run as u32,
    ))
}

/// An ended pod's events as the socket served them: each event once, in the order it
/// first happened, with its latest count (`events.jsonl` has a line per occurrence).
pub fn kept_events(dir: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(dir.join("events.jsonl")).unwrap_or_default();
    let mut events: Vec<Value> = Vec::new();
    for e in text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
    {
        let name = &e["metadata"]["name"];
        match events
            .iter_mut()
            .find(|k| name.is_string() && k["metadata"]["name"] == *name)
        {
            Some(k) => *k = e,
            None => events.push(e),
        }
    }
    events
}

/// `podinit rm POD`: remove an ended pod's state dir; a running pod is refused.
pub fn remove(pod: &str, root: &Path) -> Result<PodDir, Failure> {
    let p = find(Some(pod), None, root).map_err(|e| match e {
        Find::Error(e) => e,
        Find::Socket(_) => unreachable!("no socket was given"),
    })?;
    if p.is_running() {
        return Err(Failure::failed(
            Kind::FailedPrecondition,
            format!(
                "pod {} is running: stop it first (podinit stop {})",
                p.key(),
                p.key()
            ),
        ));
    }
    std::fs::remove_dir_all(&p.dir)
        .map_err(|e| Failure::io(format_args!("removing {}", p.dir.display()), e))?;
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn root(what: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "podinit-pods-{what}-{}",
            crate::util::random_hex(4)
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn kept(root: &Path, ns: &str, name: &str) -> PathBuf {
        let d = root.join(format!("{ns}_{name}"));
        std::fs::create_dir_all(&d).unwrap();
        let pod =
            json!({"metadata": {"name": name, "namespace": ns}, "status": {"phase": "Succeeded"}});
        std::fs::write(d.join("status.json"), pod.to_string()).unwrap();
        d
    }

    #[test]
    fn names_are_name_or_namespace_slash_name() {
        assert_eq!(parse_name("web").unwrap(), ("default".into(), "web".into()));
        assert_eq!(
            parse_name("prod/web").unwrap(),
            ("prod".into(), "web".into())
        );
        for bad in ["", "/web", "prod/", "a/b/c"] {
            assert!(parse_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_only_pod_is_meant_and_several_are_listed() {
        let r = root("find");
        assert!(
            matches!(find(None, None, &r), Err(Find::Error(e)) if e.kind() == Kind::NotFound && e.to_string().starts_with("no pod under"))
        );
        let web = kept(&r, "default", "web");
        std::fs::create_dir_all(r.join("userns")).unwrap();
        assert_eq!(find(None, None, &r).unwrap().dir, web);
        kept(&r, "prod", "api");
        let Err(Find::Error(e)) = find(None, None, &r) else {
            panic!("two pods, none named")
        };
        assert_eq!((e.kind(), e.exit_status()), (Kind::InvalidArgument, 1));
        let e = e.to_string();
        assert!(
            e.contains("2 pods") && e.contains("default/web, prod/api"),
            "{e}"
        );
        assert_eq!(find(Some("web"), None, &r).unwrap().dir, web);
        assert_eq!(find(Some("prod/api"), None, &r).unwrap().name, "api");
        let Err(Find::Error(e)) = find(Some("nope"), None, &r) else {
            panic!("no such pod")
        };
        assert_eq!(e.kind(), Kind::NotFound);
        let e = e.to_string();
        assert!(
            e.contains("default/nope not found") && e.contains("prod/api"),
            "{e}"
        );
        // A socket given is used as it is; a POD given wins over it.
        assert_eq!(
            find(None, Some("/s".into()), &r),
            Err(Find::Socket("/s".into()))
        );
        assert_eq!(find(Some("web"), Some("/s".into()), &r).unwrap().dir, web);
        // Ended: no socket answers.
        assert_eq!(
            target(Some("web"), None, &r).unwrap(),
            Target::Ended(find(Some("web"), None, &r).unwrap())
        );
        let gone = remove("web", &r).unwrap();
        assert!(!gone.dir.exists());
        let e = remove("web", &r).unwrap_err();
        assert_eq!(e.kind(), Kind::NotFound);
        assert!(e.to_string().contains("not found"), "{e}");
        std::fs::remove_dir_all(&r).unwrap();
    }

    #[test]
    fn kept_events_once_each_with_the_latest_count() {
        let r = root("events");
        let e = |name: &str, count: u32| {
            json!({"metadata": {"name": name}, "reason": "BackOff", "count": count}).to_string()
        };
        let lines = [e("p.1", 1), e("p.2", 1), e("p.1", 2), e("p.1", 3)].join("\n");
        std::fs::write(r.join("events.jsonl"), lines + "\n").unwrap();
        let ev = kept_events(&r);
        assert_eq!(ev.len(), 2);
        assert_eq!(
            (ev[0]["metadata"]["name"].as_str(), ev[0]["count"].as_u64()),
            (Some("p.1"), Some(3))
        );
        std::fs::remove_dir_all(&r).unwrap();
    }

    #[test]
    fn the_kept_log_of_the_run_kubelet_would_pick() {
        let dir = Path::new("/s");
        let pod = |state: Value, last: Value, count: u32| {
            json!({"metadata": {"name": "p"}, "status": {"containerStatuses": [
                {"name": "c", "restartCount": count, "state": state, "lastState": last}]}})
        };
        let done = json!({"terminated": {"exitCode": 1, "finishedAt": "2026-01-01T00:00:00Z"}});
        let log = |n: u32| crate::logs::LogFile::path_for(&dir.join("logs"), "c", n);
        let p = pod(done.clone(), json!({}), 0);
        assert_eq!(kept_log(dir, &p, "c", false).unwrap(), log(0));
        let e = kept_log(dir, &p, "c", true).unwrap_err();
        assert_eq!(e.kind(), Kind::NotFound);
        assert!(e.to_string().contains("previous terminated"), "{e}");
        let p = pod(done.clone(), done.clone(), 2);
        assert_eq!(kept_log(dir, &p, "c", false).unwrap(), log(2));
        assert_eq!(kept_log(dir, &p, "c", true).unwrap(), log(1));
        let p = pod(
            json!({"waiting": {"reason": "ErrImageNeverPull"}}),
            json!({}),
            0,
        );
        let e = kept_log(dir, &p, "c", false).unwrap_err();
        assert_eq!(e.kind(), Kind::FailedPrecondition);
        assert!(
            e.to_string()
                .ends_with("is waiting to start: ErrImageNeverPull"),
            "{e}"
        );
        assert!(kept_log(dir, &p, "x", false)
            .unwrap_err()
            .to_string()
            .contains("not valid"));
    }
}
