//! The words kubelet uses in a pod's status and events, as types: container waiting and
//! terminated reasons, event types and reasons, the QoS class. Each `as_str` is kubelet's
//! exact string; nothing matches these as text.

/// An enum of unit variants, each with the exact string it renders as. Comparable with a
/// `&str` so that tests and callers can read like the API they check.
macro_rules! words {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $v:ident = $s:literal,)+ }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vm])* $v,)+
        }

        impl $name {
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$v => $s,)+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }
    };
}

words! {
    /// Why a container is waiting (`state.waiting.reason`).
    WaitingReason {
        /// Not created yet, in a pod without init containers (and app containers once
        /// initialization is done).
        ContainerCreating = "ContainerCreating",
        /// Not created yet while the pod's init containers run.
        PodInitializing = "PodInitializing",
        /// Waiting out its restart back-off.
        CrashLoopBackOff = "CrashLoopBackOff",
        /// Could not be created (nothing ran); retried with back-off.
        CreateContainerError = "CreateContainerError",
        /// Its configuration (env sources) could not be resolved; retried with back-off.
        CreateContainerConfigError = "CreateContainerConfigError",
        /// Killed because its postStart hook failed; waits to be restarted.
        PostStartHookError = "PostStartHookError",
        /// Its image could not be pulled (`pod::image_pull`); tried again after a back-off.
        ErrImagePull = "ErrImagePull",
        /// Waiting out the back-off after a failed pull.
        ImagePullBackOff = "ImagePullBackOff",
        /// `imagePullPolicy: Never` and the image is not in the store.
        ErrImageNeverPull = "ErrImageNeverPull",
        /// The image name cannot be parsed as a reference.
        InvalidImageName = "InvalidImageName",
    }
}

words! {
    /// Why a container terminated (`state.terminated.reason`).
    TerminatedReason {
        Completed = "Completed",
        Error = "Error",
        OOMKilled = "OOMKilled",
        /// The process existed but could not exec the container's program.
        StartError = "StartError",
        /// kubelet's report of a container it could not locate when the pod ended.
        ContainerStatusUnknown = "ContainerStatusUnknown",
    }
}

words! {
    /// An event's `type`.
    EventType {
        Normal = "Normal",
        Warning = "Warning",
    }
}

words! {
    /// An event's `reason`, as kubelet records it.
    EventReason {
        Created = "Created",
        Started = "Started",
        Failed = "Failed",
        Killing = "Killing",
        BackOff = "BackOff",
        Unhealthy = "Unhealthy",
        ProbeWarning = "ProbeWarning",
        FailedPostStartHook = "FailedPostStartHook",
        FailedPreStopHook = "FailedPreStopHook",
        DeadlineExceeded = "DeadlineExceeded",
        Evicted = "Evicted",
        OOMKilling = "OOMKilling",
        MissingClusterDNS = "MissingClusterDNS",
        PodPresetConflict = "PodPresetConflict",
        /// A pod run without root has no cgroups: its limits are not enforced.
        CgroupsUnavailable = "CgroupsUnavailable",
        InvalidEnvironmentVariableNames = "InvalidEnvironmentVariableNames",
        /// A volume could not be set up (kubelet's `FailedMountVolume`).
        FailedMount = "FailedMount",
        Pulling = "Pulling",
        Pulled = "Pulled",
        ErrImageNeverPull = "ErrImageNeverPull",
        /// An image name that does not parse (kubelet's `FailedToInspectImage`).
        InspectFailed = "InspectFailed",
        /// An `imagePullSecrets` entry names no Secret the pod was given.
        FailedToRetrieveImagePullSecret = "FailedToRetrieveImagePullSecret",
        /// The pod's sandbox (its pause) is gone and is made again.
        SandboxChanged = "SandboxChanged",
        /// kubelet allocated a resize and starts to apply it.
        ResizeStarted = "ResizeStarted",
        /// The containers run with the resize's allocation.
        ResizeCompleted = "ResizeCompleted",
        /// A resize that fits the node but not beside its other pods now.
        ResizeDeferred = "ResizeDeferred",
        /// A resize the node can never fit.
        ResizeInfeasible = "ResizeInfeasible",
        /// Applying an allocated resize failed.
        ResizeError = "ResizeError",
    }
}

words! {
    /// Kubernetes' Pod QoS class (`status.qosClass`).
    QosClass {
        Guaranteed = "Guaranteed",
        Burstable = "Burstable",
        BestEffort = "BestEffort",
    }
}

/// Why a container could not be started, as the supervisor observed it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartFailure {
    /// Nothing ran (root filesystem, cgroup, clone): it stays waiting in
    /// `CreateContainerError` and is retried with back-off.
    Create,
    /// Its environment could not be resolved: waiting in `CreateContainerConfigError`.
    Config,
    /// The process existed but could not exec: it terminated, `StartError`, exit code 128.
    Exec,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_render_as_kubelet_writes_them() {
        assert_eq!(WaitingReason::CrashLoopBackOff.as_str(), "CrashLoopBackOff");
        assert_eq!(
            WaitingReason::CreateContainerConfigError.to_string(),
            "CreateContainerConfigError"
        );
        assert_eq!(TerminatedReason::OOMKilled, "OOMKilled");
        assert_eq!(
            TerminatedReason::ContainerStatusUnknown,
            "ContainerStatusUnknown"
        );
        assert_eq!(EventType::Warning.as_str(), "Warning");
        assert_eq!(EventReason::MissingClusterDNS, "MissingClusterDNS");
        assert_eq!(QosClass::BestEffort.as_str(), "BestEffort");
        assert!(TerminatedReason::Error != "Completed");
    }
}
