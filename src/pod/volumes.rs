//! kubelet's volume manager for one pod: a volume a container mounts that could not be set
//! up (a ConfigMap or Secret missing from the manifest, a hostPath of the wrong type) keeps
//! every container from starting. They stay waiting (`ContainerCreating`, or
//! `PodInitializing` in a pod with init containers), the pod Pending, while the set-up is
//! tried again with kubelet's exponential back-off, each failure a `FailedMount` Warning
//! with kubelet's text. Pure: the supervisor does the set-up and reports the outcome.

use k8s_openapi::api::core::v1::PodSpec;
use std::collections::{BTreeMap, BTreeSet};

use super::reason::{EventReason, EventType};
use super::state::PodState;
use super::step::EventSpec;
use super::Millis;

/// The first retry of a failed volume set-up (kubelet's `nestedpendingoperations`:
/// `initialDurationBeforeRetry`).
pub const INITIAL_RETRY_MS: Millis = 500;
/// The longest wait between two attempts (`maxDurationBeforeRetry`, 2 min 2 s).
pub const MAX_RETRY_MS: Millis = 122_000;

/// The wait before the next attempt after `failures` failed ones: doubled after each.
pub fn retry_delay(failures: u32) -> Millis {
    let doublings = failures.saturating_sub(1).min(20);
    (INITIAL_RETRY_MS << doublings).min(MAX_RETRY_MS)
}

/// The volumes kubelet sets up for a pod (`GetPodVolumeNames`): those a container mounts.
/// A volume no container mounts is never set up, so it never holds the pod back.
pub fn used(spec: &PodSpec) -> BTreeSet<String> {
    let init = spec.init_containers.iter().flatten();
    let ephemeral = spec.ephemeral_containers.iter().flatten();
    init.chain(&spec.containers)
        .flat_map(|c| c.volume_mounts.iter().flatten().map(|m| m.name.clone()))
        .chain(ephemeral.flat_map(|c| c.volume_mounts.iter().flatten().map(|m| m.name.clone())))
        .collect()
}

/// kubelet's event for a failed set-up of `volume` (the operation executor's
/// `GenerateError` on `MountVolume.SetUp failed`; `error` is the volume plugin's, e.g.
/// `configmap "x" not found`).
pub fn failed_mount(volume: &str, error: &str) -> EventSpec {
    EventSpec {
        type_: EventType::Warning,
        reason: EventReason::FailedMount,
        message: format!("MountVolume.SetUp failed for volume \"{volume}\" : {error}"),
        container: None,
    }
}

/// The volumes not set up yet, each with its failures so far and its next attempt.
#[derive(Clone, Debug, Default)]
pub struct Unmounted {
    pending: BTreeMap<String, Pending>,
}

#[derive(Clone, Debug)]
struct Pending {
    failures: u32,
    /// `None` while an attempt is under way.
    retry_at: Option<Millis>,
}

impl Unmounted {
    /// Every volume the containers need is set up.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// The volumes waiting, by name.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.pending.keys().map(String::as_str)
    }

    /// The volumes due for another attempt at `now` (marked as under way), and when the
    /// next of the others is due.
    pub fn due(&mut self, now: Millis) -> (Vec<String>, Option<Millis>) {
        let mut due = Vec::new();
        let mut next: Option<Millis> = None;
        for (name, p) in &mut self.pending {
            match p.retry_at {
                Some(t) if t <= now => {
                    p.retry_at = None;
                    due.push(name.clone());
                }
                Some(t) => next = Some(next.map_or(t, |n| n.min(t))),
                None => {}
            }
        }
        (due, next)
    }
}

impl PodState {
    /// Setting up `volume` failed with `error` (the volume plugin's words): a
    /// `FailedMount` event, and another attempt after the back-off. Until it succeeds no
    /// container starts.
    pub fn on_mount_failed(&mut self, volume: &str, error: &str, now: Millis) {
        let p = self
            .unmounted
            .pending
            .entry(volume.to_string())
            .or_insert(Pending {
                failures: 0,
                retry_at: None,
            });
        p.failures += 1;
        p.retry_at = Some(now + retry_delay(p.failures));
        self.push_event(failed_mount(volume, error));
    }

    /// `volume` is set up (at last).
    pub fn on_mounted(&mut self, volume: &str) {
        self.unmounted.pending.remove(volume);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod::plan::{Kind, PodPlan};
    use crate::pod::reason::WaitingReason;
    use crate::pod::state::{PodPhase, State};
    use crate::pod::step::{step, Action};

    fn plan(kinds: &[(&str, Kind)]) -> PodPlan {
        PodPlan::bare_of(kinds)
    }

    fn events(acts: &[Action]) -> Vec<String> {
        acts.iter()
            .filter_map(|a| match a {
                Action::Event(e) if e.reason == EventReason::FailedMount => {
                    assert_eq!(e.type_, EventType::Warning);
                    Some(e.message.clone())
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn back_off_doubles_from_half_a_second_to_two_minutes() {
        let got: Vec<Millis> = (1..=10).map(retry_delay).collect();
        assert_eq!(
            got,
            [500, 1000, 2000, 4000, 8000, 16_000, 32_000, 64_000, 122_000, 122_000]
        );
        assert_eq!(retry_delay(u32::MAX), MAX_RETRY_MS);
    }

    #[test]
    fn only_mounted_volumes_are_needed() {
        let spec: PodSpec = serde_yaml_ng::from_str(
            "initContainers: [{name: i, volumeMounts: [{name: a, mountPath: /a}]}]\ncontainers: [{name: c, volumeMounts: [{name: b, mountPath: /b}]}]\nvolumes: [{name: a, emptyDir: {}}, {name: b, emptyDir: {}}, {name: unused, emptyDir: {}}]",
        )
        .unwrap();
        assert_eq!(
            used(&spec).into_iter().collect::<Vec<_>>(),
            ["a".to_string(), "b".to_string()]
        );
    }

    #[test]
    fn a_volume_that_cannot_be_set_up_holds_every_container_back() {
        let plan = plan(&[("web", Kind::App)]);
        let mut st = PodState::new(&plan);
        st.on_sandbox_ready(0);
        st.on_mount_failed("config", "configmap \"app-config\" not found", 0);
        let acts = step(&plan, &mut st, 0);
        assert_eq!(
            events(&acts),
            ["MountVolume.SetUp failed for volume \"config\" : configmap \"app-config\" not found"]
        );
        assert!(!acts.iter().any(|a| matches!(a, Action::Start(_))));
        assert!(acts.contains(&Action::WakeAt(500)));
        assert_eq!(crate::pod::phase(&plan, &st), PodPhase::Pending);
        assert!(matches!(
            st.containers[0].state,
            State::Waiting {
                reason: WaitingReason::ContainerCreating,
                message: None
            }
        ));
        // Retried with back-off: each attempt that fails again is another event.
        let mut at = 0;
        for delay in [500, 1000, 2000, 4000] {
            at += delay;
            assert!(!step(&plan, &mut st, at - 1)
                .iter()
                .any(|a| matches!(a, Action::MountVolumes(_))));
            let acts = step(&plan, &mut st, at);
            assert!(
                acts.contains(&Action::MountVolumes(vec!["config".into()])),
                "{acts:?}"
            );
            assert!(step(&plan, &mut st, at).is_empty(), "one attempt at a time");
            st.on_mount_failed("config", "configmap \"app-config\" not found", at);
            assert_eq!(events(&step(&plan, &mut st, at)).len(), 1);
        }
        // Once set up, the containers start.
        at += 8000;
        assert!(step(&plan, &mut st, at).contains(&Action::MountVolumes(vec!["config".into()])));
        st.on_mounted("config");
        assert!(step(&plan, &mut st, at).contains(&Action::Start(0)));
    }

    #[test]
    fn a_pod_waiting_for_a_volume_terminates_on_request() {
        let plan = plan(&[("init", Kind::Init), ("web", Kind::App)]);
        let mut st = PodState::new(&plan);
        st.on_sandbox_ready(0);
        st.on_mount_failed("s", "secret \"creds\" not found", 0);
        step(&plan, &mut st, 0);
        assert!(matches!(
            st.containers[0].state,
            State::Waiting {
                reason: WaitingReason::PodInitializing,
                ..
            }
        ));
        st.request_termination(&plan, 100, None);
        let acts = step(&plan, &mut st, 100);
        assert!(acts.contains(&Action::Finish), "{acts:?}");
        assert!(!acts.iter().any(|a| matches!(a, Action::MountVolumes(_))));
    }
}
