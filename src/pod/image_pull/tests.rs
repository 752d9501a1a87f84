use super::*;
use crate::pod::plan::Kind;
use crate::pod::step::{step, Action, EventSpec};
use crate::pod::tests::starts;

fn plan(kinds: &[(&str, Kind)]) -> PodPlan {
    PodPlan::bare_of(kinds)
}

fn events(acts: &[Action]) -> Vec<(EventType, String, String)> {
    acts.iter()
        .filter_map(|a| match a {
            Action::Event(EventSpec {
                type_,
                reason,
                message,
                ..
            }) => Some((*type_, reason.to_string(), message.clone())),
            _ => None,
        })
        .collect()
}

fn waiting(st: &PodState, i: usize) -> (String, String) {
    match &st.containers[i].state {
        State::Waiting { reason, message } => {
            (reason.to_string(), message.clone().unwrap_or_default())
        }
        s => panic!("not waiting: {s:?}"),
    }
}

#[test]
fn the_default_policy_is_always_only_for_latest_or_no_tag() {
    for (image, want) in [
        ("nginx", "Always"),
        ("nginx:latest", "Always"),
        ("docker.io/library/nginx:latest", "Always"),
        ("nginx:1.27", "IfNotPresent"),
        ("nginx@sha256:abcd", "IfNotPresent"),
        ("nginx:1.27@sha256:abcd", "IfNotPresent"),
        ("nginx:latest@sha256:abcd", "Always"),
        ("127.0.0.1:5000/team/app", "Always"),
        ("127.0.0.1:5000/team/app:v1", "IfNotPresent"),
        ("localhost:5000/app@sha256:ab", "IfNotPresent"),
    ] {
        assert_eq!(default_policy(image), want, "{image}");
    }
}

#[test]
fn should_pull_follows_the_policy_and_presence() {
    assert_eq!(decide(Policy::Always, true), Decision::Pull);
    assert_eq!(decide(Policy::Always, false), Decision::Pull);
    assert_eq!(decide(Policy::IfNotPresent, true), Decision::UsePresent);
    assert_eq!(decide(Policy::IfNotPresent, false), Decision::Pull);
    assert_eq!(decide(Policy::Never, true), Decision::UsePresent);
    assert_eq!(decide(Policy::Never, false), Decision::NeverPull);
    assert_eq!(Policy::of(Some("Never")), Policy::Never);
    assert_eq!(Policy::of(None), Policy::IfNotPresent);
}

#[test]
fn the_back_off_doubles_to_five_minutes_and_forgets_old_failures() {
    let mut b = PullBackoff::default();
    assert_eq!(b.until(0), None);
    let mut now = 0;
    let mut delays = Vec::new();
    for _ in 0..8 {
        b.failed(now, "x");
        let until = b.until(now).unwrap();
        delays.push((until - now) / 1000);
        assert_eq!(b.until(until), None, "free again once the delay is over");
        now = until;
    }
    assert_eq!(delays, [10, 20, 40, 80, 160, 300, 300, 300]);
    // An entry older than twice the cap starts from the initial delay again.
    now += 2 * MAX_MS + 1;
    b.failed(now, "x");
    assert_eq!(b.until(now), Some(now + INITIAL_MS));
}

#[test]
fn go_durations() {
    assert_eq!(crate::pod::backoff::go_duration(512), "512ms");
    assert_eq!(crate::pod::backoff::go_duration(1500), "1.5s");
    assert_eq!(crate::pod::backoff::go_duration(2000), "2s");
    assert_eq!(crate::pod::backoff::go_duration(123_004), "2m3.004s");
}

#[test]
fn a_present_image_is_used_with_kubelets_event() {
    let p = plan(&[("web", Kind::App)]);
    let mut st = PodState::new(&p);
    st.on_sandbox_ready(0);
    assert_eq!(starts(&step(&p, &mut st, 0)), [0]);
    let mut b = PullBackoff::default();
    let mut g = ImageGate::new("busybox:1.36", Policy::IfNotPresent);
    assert_eq!(g.on_start(&p, &mut st, 0, true, &mut b, 0), Gate::Ready);
    st.on_started(&p, 0, 0);
    let ev = events(&step(&p, &mut st, 0));
    assert_eq!(
        ev[0],
        (
            EventType::Normal,
            "Pulled".into(),
            "Container image \"busybox:1.36\" already present on machine and can be accessed by the pod".into()
        )
    );
    assert_eq!(ev[1].1, "Created");
}

#[test]
fn always_pulls_at_every_start_even_when_present() {
    let p = plan(&[("web", Kind::App)]);
    let mut st = PodState::new(&p);
    st.on_sandbox_ready(0);
    step(&p, &mut st, 0);
    let mut b = PullBackoff::default();
    let mut g = ImageGate::new("reg:5000/app", Policy::Always);
    assert_eq!(g.on_start(&p, &mut st, 0, true, &mut b, 0), Gate::Pull);
    assert!(st.containers[0].is_active(), "being created while it pulls");
    let r = PullResult::Pulled {
        took_ms: 1200,
        size: 4096,
    };
    assert!(g.on_pulled(&p, &mut st, 0, r, &mut b, 1500));
    // The start that follows uses what was pulled, once.
    assert_eq!(g.on_start(&p, &mut st, 0, true, &mut b, 1500), Gate::Ready);
    st.on_started(&p, 0, 1500);
    let ev = events(&step(&p, &mut st, 1500));
    let texts: Vec<&str> = ev.iter().map(|e| e.2.as_str()).collect();
    assert_eq!(
        texts[..2],
        [
            "Pulling image \"reg:5000/app\"",
            "Successfully pulled image \"reg:5000/app\" in 1.2s (1.5s including waiting). Image size: 4096 bytes."
        ]
    );
    assert_eq!(g.on_start(&p, &mut st, 0, true, &mut b, 2000), Gate::Pull);
}

#[test]
fn a_failed_pull_is_err_image_pull_then_image_pull_back_off() {
    let p = plan(&[("web", Kind::App)]);
    let mut st = PodState::new(&p);
    st.on_sandbox_ready(0);
    let mut b = PullBackoff::default();
    let mut g = ImageGate::new("127.0.0.1:1/none:v1", Policy::IfNotPresent);
    let mut now = 0;
    let mut pulls = Vec::new();
    let mut states = Vec::new();
    let mut all = Vec::new();
    while now <= 320_000 {
        let acts = step(&p, &mut st, now);
        all.extend(events(&acts));
        for i in starts(&acts) {
            match g.on_start(&p, &mut st, i, false, &mut b, now) {
                Gate::Pull => {
                    pulls.push(now / 1000);
                    let r = PullResult::Failed("connection refused".into());
                    assert!(!g.on_pulled(&p, &mut st, i, r, &mut b, now));
                }
                Gate::Failed => {}
                Gate::Ready => panic!("nothing to start"),
            }
            states.push((now / 1000, waiting(&st, 0).0));
        }
        all.extend(events(&step(&p, &mut st, now)));
        now += 1000;
    }
    // kubelet syncs again a while after each error; a pull happens only once the back-off
    // the last failure set has run out.
    assert_eq!(pulls, [0, 10, 30, 70, 150, 310]);
    assert_eq!(
        states[..4],
        [
            (0, "ErrImagePull".to_string()),
            (10, "ErrImagePull".into()),
            (20, "ImagePullBackOff".into()),
            (30, "ErrImagePull".into()),
        ]
    );
    assert_eq!(st.containers[0].restart_count, 0);
    let first: Vec<(EventType, &str, &str)> = all
        .iter()
        .take(3)
        .map(|(t, r, m)| (*t, r.as_str(), m.as_str()))
        .collect();
    assert_eq!(
        first,
        [
            (
                EventType::Normal,
                "Pulling",
                "Pulling image \"127.0.0.1:1/none:v1\""
            ),
            (
                EventType::Warning,
                "Failed",
                "Failed to pull image \"127.0.0.1:1/none:v1\": connection refused"
            ),
            (EventType::Warning, "Failed", "Error: ErrImagePull"),
        ]
    );
    assert!(all.iter().any(|(t, r, m)| *t == EventType::Normal
        && r == "BackOff"
        && m == "Back-off pulling image \"127.0.0.1:1/none:v1\""));
    assert!(all
        .iter()
        .any(|(_, r, m)| r == "Failed" && m == "Error: ImagePullBackOff"));
    // The waiting message of the back-off is kubelet's.
    let acts = step(&p, &mut st, 330_000);
    for i in starts(&acts) {
        g.on_start(&p, &mut st, i, false, &mut b, 330_000);
    }
    // kubelet's waiting message of the back-off carries the last pull's error.
    assert_eq!(
        waiting(&st, 0),
        (
            "ImagePullBackOff".into(),
            "Back-off pulling image \"127.0.0.1:1/none:v1\": ErrImagePull: connection refused"
                .into()
        )
    );
}

#[test]
fn never_with_a_missing_image_waits_in_err_image_never_pull_until_it_is_there() {
    let p = plan(&[("web", Kind::App)]);
    let mut st = PodState::new(&p);
    st.on_sandbox_ready(0);
    let mut b = PullBackoff::default();
    let mut g = ImageGate::new("app:v1", Policy::Never);
    step(&p, &mut st, 0);
    assert_eq!(g.on_start(&p, &mut st, 0, false, &mut b, 0), Gate::Failed);
    assert_eq!(
        waiting(&st, 0),
        (
            "ErrImageNeverPull".into(),
            "Container image \"app:v1\" is not present with pull policy of Never".into()
        )
    );
    let ev = events(&step(&p, &mut st, 0));
    assert_eq!(ev[0].1, "ErrImageNeverPull");
    assert_eq!(ev[0].0, EventType::Warning);
    assert_eq!(ev[1].2, "Error: ErrImageNeverPull");
    // Looked at again at the next sync; imported meanwhile, it is used.
    assert!(starts(&step(&p, &mut st, 9_999)).is_empty());
    assert_eq!(starts(&step(&p, &mut st, 10_000)), [0]);
    assert_eq!(
        g.on_start(&p, &mut st, 0, true, &mut b, 10_000),
        Gate::Ready
    );
}

#[test]
fn an_init_container_waiting_for_its_image_holds_the_apps_back() {
    let p = plan(&[("init", Kind::Init), ("web", Kind::App)]);
    let mut st = PodState::new(&p);
    st.on_sandbox_ready(0);
    let mut b = PullBackoff::default();
    let mut g = ImageGate::new("init:v1", Policy::IfNotPresent);
    assert_eq!(starts(&step(&p, &mut st, 0)), [0]);
    assert_eq!(g.on_start(&p, &mut st, 0, false, &mut b, 0), Gate::Pull);
    assert!(starts(&step(&p, &mut st, 1)).is_empty());
    g.on_pulled(&p, &mut st, 0, PullResult::Failed("nope".into()), &mut b, 2);
    assert!(starts(&step(&p, &mut st, 3)).is_empty(), "the app waits");
    assert_eq!(waiting(&st, 1).0, "PodInitializing");
}

#[test]
fn a_pod_deleted_during_a_pull_ends_without_starting_it() {
    let p = plan(&[("web", Kind::App)]);
    let mut st = PodState::new(&p);
    st.on_sandbox_ready(0);
    let mut b = PullBackoff::default();
    let mut g = ImageGate::new("app:v1", Policy::IfNotPresent);
    step(&p, &mut st, 0);
    assert_eq!(g.on_start(&p, &mut st, 0, false, &mut b, 0), Gate::Pull);
    st.request_deletion(&p, 100, None);
    step(&p, &mut st, 100);
    g.abandon(&mut st, 0);
    let acts = step(&p, &mut st, 200);
    assert!(acts.contains(&Action::Finish), "{acts:?}");
    // A result that comes after is not a start.
    let r = PullResult::Pulled {
        took_ms: 5,
        size: 1,
    };
    assert!(!g.on_pulled(&p, &mut st, 0, r, &mut b, 300));
}

#[test]
fn missing_pull_secrets_are_one_warning() {
    let e = missing_pull_secrets(&["a".into(), "b".into()]);
    assert_eq!(e.type_, EventType::Warning);
    assert_eq!(e.reason, "FailedToRetrieveImagePullSecret");
    assert_eq!(
        e.message,
        "Unable to retrieve some image pull secrets (a, b); attempting to pull the image may not succeed."
    );
}

#[test]
fn an_invalid_name_waits_in_invalid_image_name() {
    let p = plan(&[("web", Kind::App)]);
    let mut st = PodState::new(&p);
    st.on_sandbox_ready(0);
    step(&p, &mut st, 0);
    invalid_name(&p, &mut st, 0, "Bad//Name", "invalid reference format", 0);
    assert_eq!(waiting(&st, 0).0, "InvalidImageName");
    let ev = events(&step(&p, &mut st, 0));
    assert_eq!(ev[0].1, "InspectFailed");
}

#[test]
fn containers_of_one_image_share_the_pods_back_off() {
    let p = plan(&[("a", Kind::App), ("b", Kind::App)]);
    let mut st = PodState::new(&p);
    st.on_sandbox_ready(0);
    let mut b = PullBackoff::default();
    let (mut ga, mut gb) = (
        ImageGate::new("reg:5000/app:v1", Policy::IfNotPresent),
        ImageGate::new("reg:5000/app:v1", Policy::IfNotPresent),
    );
    // Containers start one after the other: b's turn comes once a's pull has ended.
    assert_eq!(starts(&step(&p, &mut st, 0)), [0]);
    assert_eq!(ga.on_start(&p, &mut st, 0, false, &mut b, 0), Gate::Pull);
    assert!(starts(&step(&p, &mut st, 50)).is_empty());
    ga.on_pulled(
        &p,
        &mut st,
        0,
        PullResult::Failed("refused".into()),
        &mut b,
        100,
    );
    assert_eq!(starts(&step(&p, &mut st, 100)), [1]);
    // Within the back-off a's failure set, b does not pull the same image again.
    assert_eq!(
        gb.on_start(&p, &mut st, 1, false, &mut b, 100),
        Gate::Failed
    );
    assert_eq!(waiting(&st, 1).0, "ImagePullBackOff");
    // At the next sync, the back-off over, a pulls again.
    assert_eq!(starts(&step(&p, &mut st, 10_100)), [0, 1]);
    assert_eq!(
        ga.on_start(&p, &mut st, 0, false, &mut b, 10_100),
        Gate::Pull
    );
}

/// The events and whose they are: the container's index, or `None` for the pod's.
fn events_on(acts: &[Action]) -> Vec<(String, String, Option<usize>)> {
    acts.iter()
        .filter_map(|a| match a {
            Action::Event(EventSpec {
                reason,
                message,
                container,
                ..
            }) => Some((reason.to_string(), message.clone(), *container)),
            _ => None,
        })
        .collect()
}

#[test]
fn an_image_volumes_pull_is_the_pods_and_its_failure_the_mounting_containers() {
    let p = plan(&[("web", Kind::App)]);
    let mut st = PodState::new(&p);
    st.on_sandbox_ready(0);
    step(&p, &mut st, 0);
    let mut b = PullBackoff::default();
    let reference = "reg:5000/data:v1";
    let mut g = ImageGate::for_volume(reference, Policy::IfNotPresent);
    assert_eq!(g.on_start(&p, &mut st, 0, false, &mut b, 0), Gate::Pull);
    assert!(st.containers[0].is_active(), "being created while it pulls");
    let r = PullResult::Failed("unauthorized: authentication required".into());
    assert!(!g.on_pulled(&p, &mut st, 0, r, &mut b, 800));
    assert_eq!(
        waiting(&st, 0),
        (
            "ErrImagePull".into(),
            "unauthorized: authentication required".into()
        )
    );
    // kubelet's image manager names the pod (`getImageVolumes` passes the pod's
    // reference); the container it keeps from starting has its own `Error:` event.
    let ev = events_on(&step(&p, &mut st, 800));
    assert_eq!(
        ev,
        [
            (
                "Pulling".into(),
                format!("Pulling image {reference:?}"),
                None
            ),
            (
                "Failed".into(),
                format!(
                    "Failed to pull image {reference:?}: unauthorized: authentication required"
                ),
                None
            ),
            ("Failed".into(), "Error: ErrImagePull".into(), Some(0)),
        ]
    );
    // kubelet's next sync pulls again; the sync after that failure is within its back-off.
    assert_eq!(starts(&step(&p, &mut st, 10_800)), [0]);
    assert_eq!(
        g.on_start(&p, &mut st, 0, false, &mut b, 10_800),
        Gate::Pull
    );
    let r = PullResult::Failed("unauthorized: authentication required".into());
    assert!(!g.on_pulled(&p, &mut st, 0, r, &mut b, 10_800));
    assert_eq!(starts(&step(&p, &mut st, 20_800)), [0]);
    assert_eq!(
        g.on_start(&p, &mut st, 0, false, &mut b, 20_800),
        Gate::Failed
    );
    let (reason, message) = waiting(&st, 0);
    assert_eq!(reason, "ImagePullBackOff");
    assert_eq!(
        message,
        format!("Back-off pulling image {reference:?}: ErrImagePull: unauthorized: authentication required")
    );
    let ev = events_on(&step(&p, &mut st, 20_800));
    assert!(
        ev.contains(&(
            "BackOff".into(),
            format!("Back-off pulling image {reference:?}"),
            None
        )),
        "{ev:?}"
    );
    // Once pulled, the start goes on with it, once; the next start finds it present.
    assert_eq!(starts(&step(&p, &mut st, 30_800)), [0]);
    assert_eq!(
        g.on_start(&p, &mut st, 0, false, &mut b, 30_800),
        Gate::Pull
    );
    let r = PullResult::Pulled {
        took_ms: 300,
        size: 10,
    };
    assert!(g.on_pulled(&p, &mut st, 0, r, &mut b, 31_100));
    assert_eq!(
        g.on_start(&p, &mut st, 0, true, &mut b, 31_100),
        Gate::Ready
    );
    assert_eq!(
        g.on_start(&p, &mut st, 0, true, &mut b, 31_100),
        Gate::Ready
    );
    let pulled: Vec<_> = events_on(&step(&p, &mut st, 31_100))
        .into_iter()
        .filter(|e| e.0 == "Pulled")
        .collect();
    assert_eq!(pulled.len(), 2, "{pulled:?}");
    assert!(pulled[0]
        .1
        .starts_with(&format!("Successfully pulled image {reference:?} in 300ms")));
    assert_eq!(
        pulled[1],
        (
            "Pulled".into(),
            format!("Container image {reference:?} already present on machine and can be accessed by the pod"),
            None
        )
    );
}
