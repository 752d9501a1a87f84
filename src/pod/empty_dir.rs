//! `emptyDir` as kubelet's emptyDir plugin and eviction manager treat it: what a
//! memory- or hugepage-backed one is mounted with, and when a disk one's usage evicts the
//! pod (docs/semantics.md §Sandbox).

use k8s_openapi::api::core::v1::{EmptyDirVolumeSource, PodSpec};

use crate::quantity;

/// What backs an emptyDir on the host.
#[derive(Debug, PartialEq, Eq)]
pub enum Backing {
    /// A directory in the state dir.
    Disk,
    /// A tmpfs of this many bytes.
    Memory(i128),
    /// A hugetlbfs of pages of this many bytes.
    HugePages(i128),
}

/// Why an emptyDir's medium cannot back it, in kubelet's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediumError {
    pub medium: String,
    pub why: Why,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// `HugePages-<size>` with no page size.
    NotHugePages,
    /// `HugePages` while the containers ask hugepages of more than one size.
    SizesDiffer,
    /// A hugepage medium while no container asks hugepages of its size.
    NoRequest,
    /// A medium Kubernetes does not have.
    Unknown,
}

impl std::fmt::Display for MediumError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let medium = &self.medium;
        match self.why {
            Why::NotHugePages => write!(f, "medium: {medium} is not a hugepage medium"),
            Why::SizesDiffer => write!(
                f,
                "medium: {medium} can't be used if container requests multiple huge page sizes"
            ),
            Why::NoRequest => write!(f, "medium {medium}: hugePages storage requested, but there is no resource request for huge pages"),
            Why::Unknown => write!(f, "unknown storage medium {medium:?}"),
        }
    }
}

impl std::error::Error for MediumError {}

/// The page size of a `hugepages-<size>` resource or `HugePages-<size>` medium, in bytes.
fn page_size(size: &str) -> Option<i128> {
    quantity::parse(size)
        .ok()
        .map(|q| q.value())
        .filter(|v| *v > 0)
}

/// kubelet's `getPageSizeMountOption`: the page size of a `HugePages` medium is the one
/// size the containers ask hugepages of; `HugePages-<size>` needs a request of that size.
fn huge_page_size(medium: &str, spec: &PodSpec) -> Result<i128, MediumError> {
    let bad = |why| MediumError {
        medium: medium.to_string(),
        why,
    };
    let wanted = match medium.strip_prefix("HugePages-") {
        Some(size) => Some(page_size(size).ok_or_else(|| bad(Why::NotHugePages))?),
        None => None,
    };
    let mut found: Option<i128> = None;
    for c in spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
    {
        for r in c
            .resources
            .iter()
            .flat_map(|r| r.requests.iter().flatten())
            .map(|(k, _)| k)
        {
            let Some(size) = r.strip_prefix("hugepages-").and_then(page_size) else {
                continue;
            };
            match wanted {
                None if found.is_some_and(|f| f != size) => return Err(bad(Why::SizesDiffer)),
                None => found = Some(size),
                Some(w) if w == size => found = Some(size),
                Some(_) => {}
            }
        }
    }
    found.ok_or_else(|| bad(Why::NoRequest))
}

/// kubelet's `calculateEmptyDirMemorySize`: a memory-backed emptyDir is a tmpfs the size
/// of the node's allocatable memory, or of the pod's memory limit if smaller, or of
/// `sizeLimit` if smaller still.
fn memory_size(spec: &PodSpec, ed: &EmptyDirVolumeSource, node_memory: i128) -> i128 {
    let mut size = node_memory;
    if let Some(Some(pod)) = super::resources::pod_limits(spec).get("memory") {
        if *pod > 0 && *pod <= size {
            size = *pod;
        }
    }
    if let Some(l) = size_limit(ed) {
        if l > 0 && l <= size {
            size = l;
        }
    }
    size
}

/// `sizeLimit` in bytes.
pub fn size_limit(ed: &EmptyDirVolumeSource) -> Option<i128> {
    ed.size_limit
        .as_ref()
        .and_then(|q| quantity::parse(&q.0).ok())
        .map(|q| q.value())
}

/// What backs emptyDir `ed` of a pod with `spec`, on a node with `node_memory` bytes
/// allocatable; the error is kubelet's for a hugepage medium it cannot mount.
pub fn backing(
    spec: &PodSpec,
    ed: &EmptyDirVolumeSource,
    node_memory: i128,
) -> Result<Backing, MediumError> {
    match ed.medium.as_deref().unwrap_or("") {
        "" => Ok(Backing::Disk),
        "Memory" => Ok(Backing::Memory(memory_size(spec, ed, node_memory))),
        m if m == "HugePages" || m.starts_with("HugePages-") => {
            huge_page_size(m, spec).map(Backing::HugePages)
        }
        m => Err(MediumError {
            medium: m.to_string(),
            why: Why::Unknown,
        }),
    }
}

/// kubelet's `emptyDirLimitEviction`: the message of the eviction of a pod whose disk
/// emptyDir `name` uses more than its `sizeLimit` (written `limit`), or `None`.
pub fn eviction(name: &str, used: u64, limit_bytes: i128, limit: &str) -> Option<String> {
    (limit_bytes > 0 && i128::from(used) > limit_bytes)
        .then(|| format!("Usage of EmptyDir volume {name:?} exceeds the limit {limit:?}. "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> PodSpec {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    fn ed(yaml: &str) -> EmptyDirVolumeSource {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    #[test]
    fn a_memory_medium_is_the_smallest_of_node_pod_and_size_limit() {
        let gi = 1i128 << 30;
        let none = spec("containers: [{name: a}]");
        assert_eq!(
            backing(&none, &ed("{medium: Memory}"), 8 * gi),
            Ok(Backing::Memory(8 * gi)),
            "unlimited pod: the node's allocatable"
        );
        let limited = spec("containers: [{name: a, resources: {limits: {memory: 1Gi}}}]");
        assert_eq!(
            backing(&limited, &ed("{medium: Memory}"), 8 * gi),
            Ok(Backing::Memory(gi))
        );
        assert_eq!(
            backing(&limited, &ed("{medium: Memory, sizeLimit: 64Mi}"), 8 * gi),
            Ok(Backing::Memory(64 << 20))
        );
        assert_eq!(
            backing(&limited, &ed("{medium: Memory, sizeLimit: 2Gi}"), 8 * gi),
            Ok(Backing::Memory(gi)),
            "a sizeLimit above the pod's limit does not count"
        );
        let pod_level = spec("resources: {limits: {memory: 256Mi}}\ncontainers: [{name: a}]");
        assert_eq!(
            backing(&pod_level, &ed("{medium: Memory}"), 8 * gi),
            Ok(Backing::Memory(256 << 20))
        );
        assert_eq!(backing(&none, &ed("{}"), gi), Ok(Backing::Disk));
    }

    #[test]
    fn a_hugepage_medium_takes_the_size_the_containers_request() {
        let one = spec(
            "containers: [{name: a, resources: {requests: {hugepages-2Mi: 4Mi, memory: 1Mi}}}]",
        );
        assert_eq!(
            backing(&one, &ed("{medium: HugePages}"), 0),
            Ok(Backing::HugePages(2 << 20))
        );
        assert_eq!(
            backing(&one, &ed("{medium: HugePages-2Mi}"), 0),
            Ok(Backing::HugePages(2 << 20))
        );
        assert_eq!(
            backing(&one, &ed("{medium: HugePages-1Gi}"), 0).map_err(|e| e.to_string()),
            Err("medium HugePages-1Gi: hugePages storage requested, but there is no resource request for huge pages".to_string())
        );
        let two = spec("containers: [{name: a, resources: {requests: {hugepages-2Mi: 4Mi, hugepages-1Gi: 1Gi}}}]");
        assert_eq!(
            backing(&two, &ed("{medium: HugePages}"), 0).map_err(|e| e.to_string()),
            Err(
                "medium: HugePages can't be used if container requests multiple huge page sizes"
                    .to_string()
            )
        );
        assert_eq!(
            backing(&two, &ed("{medium: HugePages-1Gi}"), 0),
            Ok(Backing::HugePages(1 << 30))
        );
        let none = spec("containers: [{name: a}]");
        assert!(backing(&none, &ed("{medium: HugePages}"), 0).is_err());
    }

    #[test]
    fn eviction_past_the_size_limit() {
        assert_eq!(eviction("cache", 10 << 20, 10 << 20, "10Mi"), None);
        assert_eq!(
            eviction("cache", (10 << 20) + 1, 10 << 20, "10Mi").as_deref(),
            Some("Usage of EmptyDir volume \"cache\" exceeds the limit \"10Mi\". ")
        );
        assert_eq!(eviction("cache", 1 << 40, 0, "0"), None, "0 is no limit");
    }
}
