//! `hostUsers: false` (KEP-127): the rules of kubelet's user namespace manager
//! (pkg/kubelet/userns) and of the API server's validation, as pure functions.
//!
//! A pod's user namespace maps container ids 0..65535 to a block of 65536 host ids that
//! starts at a multiple of 65536. The blocks come from kubelet's range: the `kubelet`
//! user's one line of /etc/subuid (and the same in /etc/subgid) when that user exists,
//! else every id from 65536 on. No two pods on the node share a block.

/// The ids of one pod (kubelet's default `idsPerPod`).
pub const IDS_PER_POD: u32 = 1 << 16;

/// kubelet's range of host ids for pods: `first`, `count` (both multiples of 65536).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    pub first: u32,
    pub count: u32,
}

/// kubelet's default when no `kubelet` user is configured: all ids but 0..65535.
pub const DEFAULT_RANGE: Range = Range {
    first: 1 << 16,
    count: u32::MAX - (1 << 16) + 1,
};

impl Range {
    /// The first host id of each block, lowest first (kubelet allocates the lowest free).
    pub fn blocks(self) -> impl Iterator<Item = u32> {
        let n = self.count / IDS_PER_POD;
        (0..n).map(move |i| self.first + i * IDS_PER_POD)
    }
}

/// kubelet's range from /etc/passwd, /etc/subuid and /etc/subgid as read (what its
/// `getsubids kubelet` and `getsubids -g kubelet` answer), checked as kubelet checks it
/// for `max_pods` pods. Errors are kubelet's.
pub fn kubelet_range(
    passwd: &str,
    subuid: &str,
    subgid: &str,
    max_pods: u32,
) -> Result<Range, RangeError> {
    const USER: &str = "kubelet";
    if !passwd.lines().any(|l| l.split(':').next() == Some(USER)) {
        return Ok(DEFAULT_RANGE);
    }
    let entries = |text: &str| -> Vec<String> {
        text.lines()
            .map(str::trim)
            .filter(|l| l.split(':').next() == Some(USER))
            .map(str::to_string)
            .collect()
    };
    let (uids, gids) = (entries(subuid), entries(subgid));
    if uids.is_empty() {
        return Err(RangeError::NoIds);
    }
    if gids.is_empty() {
        return Err(RangeError::NoGids);
    }
    if uids != gids {
        return Err(RangeError::Mismatched);
    }
    if uids.len() != 1 {
        return Err(RangeError::Lines(uids.join("\n")));
    }
    let parts: Vec<&str> = uids[0].split(':').collect();
    let num = |s: &str| {
        s.parse::<u32>().map_err(|e| RangeError::Number {
            line: uids[0].clone(),
            err: e,
        })
    };
    if parts.len() != 3 {
        return Err(RangeError::Line(uids[0].clone()));
    }
    let (first, count) = (num(parts[1])?, num(parts[2])?);
    if first % IDS_PER_POD != 0 {
        return Err(RangeError::FirstNotMultiple(first));
    }
    if first < IDS_PER_POD {
        return Err(RangeError::FirstTooLow(first));
    }
    if count % IDS_PER_POD != 0 {
        return Err(RangeError::CountNotMultiple(count));
    }
    if count / IDS_PER_POD < max_pods {
        return Err(RangeError::TooFew(max_pods));
    }
    Ok(Range { first, count })
}

/// Why kubelet's subordinate ids are no range for its pods, in kubelet's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RangeError {
    NoIds,
    NoGids,
    Mismatched,
    /// More than one line for the user: the lines.
    Lines(String),
    /// A line that is not `user:first:count`.
    Line(String),
    Number {
        line: String,
        err: std::num::ParseIntError,
    },
    FirstNotMultiple(u32),
    FirstTooLow(u32),
    CountNotMultiple(u32),
    /// Not enough ids for this many pods.
    TooFew(u32),
}

impl std::fmt::Display for RangeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const USER: &str = "kubelet";
        match self {
            RangeError::NoIds => write!(
                f,
                "kubelet mappings: error retrieving additional ids for user {USER:?}"
            ),
            RangeError::NoGids => write!(
                f,
                "kubelet mappings: error retrieving additional gids for user {USER:?}"
            ),
            RangeError::Mismatched => write!(
                f,
                "kubelet mappings: mismatched subuids and subgids for user {USER:?}"
            ),
            RangeError::Lines(l) => write!(
                f,
                "kubelet mappings: error parsing line {l:?}: it must contain only one line"
            ),
            RangeError::Line(l) => write!(f, "kubelet mappings: invalid line {l:?}"),
            RangeError::Number { line, err } => {
                write!(f, "kubelet mappings: error parsing line {line:?}: {err}")
            }
            RangeError::FirstNotMultiple(first) => write!(
                f,
                "kubelet user assigned ID {first} is not a multiple of {IDS_PER_POD}"
            ),
            RangeError::FirstTooLow(first) => write!(
                f,
                "kubelet user assigned ID {first} must be greater or equal to {IDS_PER_POD}"
            ),
            RangeError::CountNotMultiple(count) => write!(
                f,
                "kubelet user assigned IDs length {count} is not a multiple of {IDS_PER_POD}"
            ),
            RangeError::TooFew(max_pods) => write!(
                f,
                "kubelet user assigned IDs are not enough to support {max_pods} pods"
            ),
        }
    }
}

impl std::error::Error for RangeError {}

/// The uid_map and gid_map of a pod whose block starts at `base`.
pub fn id_map(base: u32) -> String {
    format!("0 {base} {IDS_PER_POD}\n")
}

/// The API server's `validateHostUsers`: a pod in a user namespace shares none of the
/// node's other namespaces. (field, message) of the first it does share.
pub fn host_namespaces_refusal(
    host_network: bool,
    host_pid: bool,
    host_ipc: bool,
) -> Option<(&'static str, &'static str)> {
    const WHY: &str = "Forbidden: when `pod.Spec.HostUsers` is false";
    // Kubernetes spells the last two with capitals.
    [
        (host_network, "spec.hostNetwork"),
        (host_pid, "spec.HostPID"),
        (host_ipc, "spec.HostIPC"),
    ]
    .into_iter()
    .find(|(on, _)| *on)
    .map(|(_, field)| (field, WHY))
}

/// Whose pid namespace a container of the pod lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PidNamespace {
    /// One of its own (the default).
    Own,
    /// The supervisor's: the pod's shared one (`shareProcessNamespace`), or the node's
    /// (`hostPID`).
    Supervisor,
    /// The pod's shared one in its user namespace (`shareProcessNamespace` with
    /// `hostUsers: false`): the supervisor's is owned by the node's user namespace, so the
    /// shared one is a pause's, made inside the pod's, as Kubernetes' pause is PID 1 of a
    /// shared pid namespace.
    Pause,
}

/// The pid namespace of the containers of a pod with this spec.
pub fn pid_namespace(spec: &k8s_openapi::api::core::v1::PodSpec) -> PidNamespace {
    let shared = spec.share_process_namespace == Some(true);
    if spec.host_pid == Some(true) || shared && spec.host_users != Some(false) {
        PidNamespace::Supervisor
    } else if shared {
        PidNamespace::Pause
    } else {
        PidNamespace::Own
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_pid_namespace_is_a_pauses_in_a_user_namespace() {
        let spec = |share: Option<bool>, host_pid: Option<bool>, host_users: Option<bool>| {
            pid_namespace(&k8s_openapi::api::core::v1::PodSpec {
                share_process_namespace: share,
                host_pid,
                host_users,
                ..Default::default()
            })
        };
        use PidNamespace::*;
        assert_eq!(spec(None, None, None), Own);
        assert_eq!(spec(None, None, Some(false)), Own);
        assert_eq!(spec(Some(false), None, Some(false)), Own);
        assert_eq!(spec(Some(true), None, None), Supervisor);
        assert_eq!(spec(Some(true), None, Some(true)), Supervisor);
        assert_eq!(spec(None, Some(true), None), Supervisor);
        assert_eq!(spec(Some(true), None, Some(false)), Pause);
    }

    const PASSWD: &str = "root:x:0:0::/root:/bin/sh\nkubelet:x:999:999::/:/sbin/nologin\n";

    #[test]
    fn without_a_kubelet_user_every_id_from_65536_on_is_the_range() {
        let r = kubelet_range("root:x:0:0::/root:/bin/sh\n", "", "", 110).unwrap();
        assert_eq!(r, DEFAULT_RANGE);
        let mut b = r.blocks();
        assert_eq!(b.next(), Some(65536));
        assert_eq!(b.next(), Some(131072));
        assert_eq!(r.blocks().count(), 65535);
        assert_eq!(r.blocks().last(), Some(u32::MAX - 65535));
    }

    #[test]
    fn the_kubelet_users_subordinate_ids_are_checked_as_kubelet_does() {
        let line = "kubelet:65536:7208960\n";
        let r = kubelet_range(PASSWD, line, line, 110).unwrap();
        assert_eq!(
            r,
            Range {
                first: 65536,
                count: 7208960
            }
        );
        assert_eq!(r.blocks().count(), 110);
        let err = |u: &str, g: &str| kubelet_range(PASSWD, u, g, 110).unwrap_err().to_string();
        assert_eq!(
            err("kubelet:65537:7208960", "kubelet:65537:7208960"),
            "kubelet user assigned ID 65537 is not a multiple of 65536"
        );
        assert_eq!(
            err("kubelet:0:7208960", "kubelet:0:7208960"),
            "kubelet user assigned ID 0 must be greater or equal to 65536"
        );
        assert_eq!(
            err("kubelet:65536:65537", "kubelet:65536:65537"),
            "kubelet user assigned IDs length 65537 is not a multiple of 65536"
        );
        assert_eq!(
            err("kubelet:65536:65536", "kubelet:65536:65536"),
            "kubelet user assigned IDs are not enough to support 110 pods"
        );
        assert!(err(line, "kubelet:131072:7208960").contains("mismatched subuids and subgids"));
        assert!(err("", line).contains("additional ids"));
        let two = "kubelet:65536:7208960\nkubelet:8000000:7208960\n";
        assert!(err(two, two).contains("only one line"));
        assert!(err("kubelet:x:1", "kubelet:x:1").contains("error parsing line"));
    }

    #[test]
    fn a_pods_map_is_one_line_of_65536_ids() {
        assert_eq!(id_map(131072), "0 131072 65536\n");
    }

    #[test]
    fn host_namespaces_are_refused_in_the_api_servers_words() {
        assert_eq!(host_namespaces_refusal(false, false, false), None);
        assert_eq!(
            host_namespaces_refusal(true, true, false),
            Some((
                "spec.hostNetwork",
                "Forbidden: when `pod.Spec.HostUsers` is false"
            ))
        );
        assert_eq!(
            host_namespaces_refusal(false, true, true).unwrap().0,
            "spec.HostPID"
        );
        assert_eq!(
            host_namespaces_refusal(false, false, true).unwrap().0,
            "spec.HostIPC"
        );
    }
}
