//! A container's image as kubelet's image manager handles it (`pkg/kubelet/images`):
//! `imagePullPolicy` and its default, whether a start pulls, the pull back-off, and the
//! waiting reasons, messages and events of each outcome. Pure: the supervisor asks a pull
//! of the process that can reach registries and reports the result here.
//!
//! A start of a container whose image comes from the store or a registry goes through
//! [`ImageGate::on_start`]: the image is used as it is (`Pulled`: "already present"),
//! pulled first (`Pulling`, then `Pulled` or `Failed` with `ErrImagePull`), refused
//! (`ErrImageNeverPull`), or waits out the back-off (`BackOff`, `ImagePullBackOff`). A
//! failure keeps the container waiting and asks `step` to try the start again at kubelet's
//! next sync of the pod.

use super::plan::PodPlan;
use super::reason::{EventReason, EventType, WaitingReason};
use super::state::{Phase, PodState, State};
use super::Millis;

/// kubelet's image back-off: the first delay after a failed pull, doubling to the cap.
pub const INITIAL_MS: Millis = 10_000;
pub const MAX_MS: Millis = 300_000;
/// kubelet's pod worker syncs a pod again this long after a sync that failed
/// (`backOffPeriod`); the image back-off is looked at then.
pub const SYNC_AFTER_ERROR_MS: Millis = 10_000;

/// `imagePullPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    Always,
    IfNotPresent,
    Never,
}

/// The values the API server accepts, in its order.
pub const POLICIES: [&str; 3] = ["Always", "IfNotPresent", "Never"];

impl Policy {
    /// A defaulted, validated policy; anything else is read as `IfNotPresent`.
    pub fn of(s: Option<&str>) -> Policy {
        match s {
            Some("Always") => Policy::Always,
            Some("Never") => Policy::Never,
            _ => Policy::IfNotPresent,
        }
    }
}

/// The API server's default policy for `image`: `Always` when its tag is `latest` or it
/// has neither tag nor digest, else `IfNotPresent` (`SetDefaults_Container`, which reads
/// the tag with `parsers.ParseImageName`: a digest alone means no tag).
pub fn default_policy(image: &str) -> &'static str {
    let (name, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    let last = name.rfind('/').map_or(0, |i| i + 1);
    let tag = name[last..].rfind(':').map(|i| &name[last + i + 1..]);
    let latest = match tag {
        Some(t) => t == "latest",
        None => digest.is_none(),
    };
    if latest {
        "Always"
    } else {
        "IfNotPresent"
    }
}

/// What a start does with an image the store has (`present`) or not: kubelet's
/// `shouldPullImage`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    UsePresent,
    Pull,
    NeverPull,
}

pub fn decide(policy: Policy, present: bool) -> Decision {
    match (policy, present) {
        (Policy::Always, _) | (Policy::IfNotPresent, false) => Decision::Pull,
        (_, true) => Decision::UsePresent,
        (Policy::Never, false) => Decision::NeverPull,
    }
}

/// client-go's `flowcontrol.Backoff` for one key (the pod's UID and the image): a failed
/// pull sets the delay (`INITIAL_MS`, doubling to `MAX_MS`, from the start again once an
/// entry is older than twice the cap); a start within the delay of the last failure is in
/// back-off.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PullBackoff {
    /// The last failure and the delay it set.
    last: Option<(Millis, Millis)>,
    /// Why the last pull failed (`ErrImagePull: <message>`), until the next pull begins:
    /// kubelet adds it to the back-off's waiting message.
    last_error: Option<String>,
}

impl PullBackoff {
    /// A pull failed at `now` with `err` (`Backoff.Next`).
    pub fn failed(&mut self, now: Millis, err: &str) {
        let delay = match self.last {
            Some((at, d)) if now.saturating_sub(at) <= 2 * MAX_MS => (d * 2).min(MAX_MS),
            _ => INITIAL_MS,
        };
        self.last = Some((now, delay));
        self.last_error = Some(format!("{}: {err}", WaitingReason::ErrImagePull));
    }

    /// `IsInBackOffSinceUpdate`: until when a start is refused, if it is now.
    pub fn until(&self, now: Millis) -> Option<Millis> {
        let (at, d) = self.last?;
        (now.saturating_sub(at) < d).then_some(at + d)
    }

    /// A pull succeeded (`Backoff.GC` forgets the entry once expired; a success that
    /// follows a back-off starts the next failure from the initial delay again once the
    /// entry is old, as there).
    pub fn succeeded(&mut self, now: Millis) {
        if self
            .last
            .is_some_and(|(at, _)| now.saturating_sub(at) > 2 * MAX_MS)
        {
            self.last = None;
        }
    }
}

/// One container's image, across its starts.
#[derive(Clone, Debug)]
pub struct ImageGate {
    /// As the container writes it: kubelet's messages quote it so.
    pub image: String,
    pub policy: Policy,
    /// A pull for the start in progress was asked at this time.
    pub pulling_since: Option<Millis>,
    /// The start in progress has its image (pulled just now).
    pulled: bool,
    /// An image volume's: kubelet's image manager records its events on the pod (the
    /// reference `getImageVolumes` passes), not on a container.
    on_pod: bool,
}

/// What to do with a start `step` asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gate {
    /// Start the container with the image the store has.
    Ready,
    /// Ask for a pull; the container stays being created until the result comes.
    Pull,
    /// The start failed (never-pull, back-off): recorded, `step` tries again later.
    Failed,
}

/// How a pull ended, as the puller measured it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PullResult {
    /// Pulled in this long; the image's size in bytes.
    Pulled {
        took_ms: Millis,
        size: u64,
    },
    Failed(String),
}

impl ImageGate {
    pub fn new(image: &str, policy: Policy) -> ImageGate {
        ImageGate {
            image: image.to_string(),
            policy,
            pulling_since: None,
            pulled: false,
            on_pod: false,
        }
    }

    /// The gate of an image volume (`volumes[].image`) that container `i` mounts: the
    /// same decisions, waiting reasons and back-off as its own image, its events on the pod.
    pub fn for_volume(reference: &str, policy: Policy) -> ImageGate {
        ImageGate {
            on_pod: true,
            ..ImageGate::new(reference, policy)
        }
    }

    /// The container an event of this gate names, if any.
    fn event_on(&self, i: usize) -> Option<usize> {
        (!self.on_pod).then_some(i)
    }

    /// `step` asked to start container `i`; `present`: the store has its image now and
    /// the pod may use it (`image_access`: an image the pod may not use is pulled, or
    /// refused under `Never`, as one the store lacks);
    /// `backoff`: the pod's back-off of this image (kubelet keys it by the pod's UID and
    /// the image, so containers of one image share it).
    pub fn on_start(
        &mut self,
        plan: &PodPlan,
        st: &mut PodState,
        i: usize,
        present: bool,
        backoff: &mut PullBackoff,
        now: Millis,
    ) -> Gate {
        if std::mem::take(&mut self.pulled) {
            return Gate::Ready;
        }
        let image = &self.image;
        let on = self.event_on(i);
        match decide(self.policy, present) {
            Decision::UsePresent => {
                st.event(
                    EventType::Normal,
                    EventReason::Pulled,
                    format!(
                        "Container image {image:?} already present on machine and can be accessed by the pod"
                    ),
                    on,
                );
                Gate::Ready
            }
            Decision::NeverPull => {
                let msg =
                    format!("Container image {image:?} is not present with pull policy of Never");
                st.event(
                    EventType::Warning,
                    EventReason::ErrImageNeverPull,
                    msg.clone(),
                    on,
                );
                st.image_failed(
                    plan,
                    i,
                    WaitingReason::ErrImageNeverPull,
                    &msg,
                    now + SYNC_AFTER_ERROR_MS,
                );
                Gate::Failed
            }
            Decision::Pull => match backoff.until(now) {
                Some(until) => {
                    let msg = format!("Back-off pulling image {image:?}");
                    st.event(EventType::Normal, EventReason::BackOff, msg.clone(), on);
                    let waiting = match &backoff.last_error {
                        Some(e) => format!("{msg}: {e}"),
                        None => msg,
                    };
                    st.image_failed(plan, i, WaitingReason::ImagePullBackOff, &waiting, until);
                    Gate::Failed
                }
                None => {
                    backoff.last_error = None;
                    st.event(
                        EventType::Normal,
                        EventReason::Pulling,
                        format!("Pulling image {image:?}"),
                        on,
                    );
                    self.pulling_since = Some(now);
                    Gate::Pull
                }
            },
        }
    }

    /// The pull asked for container `i`'s start ended. Returns whether to start it now
    /// (the pod may have begun terminating meanwhile: then it is not started).
    pub fn on_pulled(
        &mut self,
        plan: &PodPlan,
        st: &mut PodState,
        i: usize,
        result: PullResult,
        backoff: &mut PullBackoff,
        now: Millis,
    ) -> bool {
        let Some(since) = self.pulling_since.take() else {
            return false;
        };
        let image = &self.image;
        let on = self.event_on(i);
        match result {
            PullResult::Pulled { took_ms, size } => {
                backoff.succeeded(now);
                st.event(
                    EventType::Normal,
                    EventReason::Pulled,
                    format!(
                        "Successfully pulled image {image:?} in {} ({} including waiting). Image size: {size} bytes.",
                        super::backoff::go_duration(took_ms),
                        super::backoff::go_duration(now.saturating_sub(since).max(took_ms)),
                    ),
                    on,
                );
                if st.terminating.is_some() {
                    st.abandon_start(i);
                    return false;
                }
                self.pulled = true;
                true
            }
            PullResult::Failed(err) => {
                st.event(
                    EventType::Warning,
                    EventReason::Failed,
                    format!("Failed to pull image {image:?}: {err}"),
                    on,
                );
                backoff.failed(now, &err);
                st.image_failed(
                    plan,
                    i,
                    WaitingReason::ErrImagePull,
                    &err,
                    now + SYNC_AFTER_ERROR_MS,
                );
                false
            }
        }
    }

    /// The pod began terminating while a pull for container `i` was in flight: the start
    /// is given up (the container was never created), so the pod can end.
    pub fn abandon(&mut self, st: &mut PodState, i: usize) {
        if self.pulling_since.take().is_some() {
            st.abandon_start(i);
        }
    }
}

/// An image name that is not a reference: kubelet's `InspectFailed` event and
/// `InvalidImageName`, tried again at each sync.
pub fn invalid_name(
    plan: &PodPlan,
    st: &mut PodState,
    i: usize,
    image: &str,
    why: &str,
    now: Millis,
) {
    let msg = format!("Failed to apply default image tag {image:?}: {why}");
    st.event(
        EventType::Warning,
        EventReason::InspectFailed,
        msg.clone(),
        Some(i),
    );
    st.image_failed(
        plan,
        i,
        WaitingReason::InvalidImageName,
        &msg,
        now + SYNC_AFTER_ERROR_MS,
    );
}

/// kubelet's warning for `imagePullSecrets` that name no Secret the pod was given.
pub fn missing_pull_secrets(names: &[String]) -> super::step::EventSpec {
    super::step::EventSpec {
        type_: EventType::Warning,
        reason: EventReason::FailedToRetrieveImagePullSecret,
        message: format!(
            "Unable to retrieve some image pull secrets ({}); attempting to pull the image may not succeed.",
            names.join(", ")
        ),
        container: None,
    }
}

impl PodState {
    /// Container `i` could not start for its image: waiting with `reason` and `msg`, the
    /// start tried again at `retry_at` (kubelet's next sync), kubelet's `Failed` event
    /// "Error: <reason>". The container's own restart back-off is not touched: no
    /// container was created.
    pub(super) fn image_failed(
        &mut self,
        plan: &PodPlan,
        i: usize,
        reason: WaitingReason,
        msg: &str,
        retry_at: Millis,
    ) {
        let _ = plan;
        self.event(
            EventType::Warning,
            EventReason::Failed,
            format!("Error: {reason}"),
            Some(i),
        );
        let c = &mut self.containers[i];
        if c.ever_created {
            // `mark_creating` counted a run that never came.
            c.restart_count = c.restart_count.saturating_sub(1);
        }
        c.phase = Phase::Idle;
        c.state = State::Waiting {
            reason,
            message: Some(msg.to_string()),
        };
        if self.terminating.is_none() {
            c.restart_at = Some(retry_at);
        }
    }

    /// A start `step` decided will not happen (the pod is terminating): the container
    /// goes back to never having been started this time.
    fn abandon_start(&mut self, i: usize) {
        let c = &mut self.containers[i];
        if c.phase != Phase::Creating {
            return;
        }
        c.phase = Phase::Idle;
        if c.ever_created {
            c.restart_count = c.restart_count.saturating_sub(1);
            if let Some(t) = c.last_state.take() {
                c.state = State::Terminated(t);
                c.phase = Phase::Exited;
            }
        }
    }
}

#[cfg(test)]
mod tests;
