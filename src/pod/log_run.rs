//! Which run's log `logs` and `logs --previous` read, and why there is none (kubelet's
//! `validateContainerLogStatus`).

use super::reason::WaitingReason;
use super::state::{ContainerState, State};

/// Why a log request has no run to read (kubelet's `validateContainerLogStatus`).
#[derive(Debug, PartialEq)]
pub enum NoLog {
    Previous,
    Terminated,
    Waiting(WaitingReason),
}

/// Which run's log a request reads, as kubelet picks the container: `previous` is the run
/// `lastState` shows; otherwise the running or terminated instance, or, while the
/// container waits to be restarted, its last run. Runs are numbered from 0; `runs` were
/// created so far, the latest being `runs - 1`.
pub fn log_run(c: &ContainerState, runs: u32, previous: bool) -> Result<u32, NoLog> {
    // Does the latest run show as the current state, or as lastState?
    let current_is_latest = match &c.state {
        State::Running { .. } => true,
        State::Terminated(t) => t.finished_at.is_some(),
        State::Waiting { .. } => false,
    };
    if previous {
        let back = if current_is_latest { 2 } else { 1 };
        return match (&c.last_state, runs.checked_sub(back)) {
            (Some(_), Some(run)) => Ok(run),
            _ => Err(NoLog::Previous),
        };
    }
    match (&c.state, runs.checked_sub(1)) {
        (_, Some(run)) if current_is_latest || c.last_state.is_some() => Ok(run),
        (State::Waiting { reason, .. }, _) => Err(NoLog::Waiting(*reason)),
        _ => Err(NoLog::Terminated),
    }
}

impl NoLog {
    /// kubelet's error text for container `name` of pod `pod`.
    pub fn message(&self, name: &str, pod: &str) -> String {
        match self {
            NoLog::Previous => {
                format!("previous terminated container {name:?} in pod {pod:?} not found")
            }
            NoLog::Terminated => format!("container {name:?} in pod {pod:?} is terminated"),
            NoLog::Waiting(reason) => {
                format!("container {name:?} in pod {pod:?} is waiting to start: {reason}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::reason::TerminatedReason;
    use super::super::state::Terminated;
    use super::*;

    fn terminated(code: i32, located: bool) -> State {
        State::Terminated(Terminated {
            exit_code: code,
            signal: None,
            reason: TerminatedReason::Error,
            message: None,
            started_at: None,
            finished_at: located.then_some(5),
        })
    }

    fn container(state: State, last: bool) -> ContainerState {
        let mut c = ContainerState::new(WaitingReason::ContainerCreating);
        c.state = state;
        if let (true, State::Terminated(t)) = (last, terminated(1, true)) {
            c.last_state = Some(t);
        }
        c
    }

    #[test]
    fn logs_come_from_the_run_kubelet_would_pick() {
        let waiting = |r: WaitingReason| State::Waiting {
            reason: r,
            message: None,
        };
        let running = State::Running { started_at: 1 };
        // (state, has lastState, runs so far, previous) → run or why not
        let cases = [
            (running.clone(), false, 1, false, Ok(0)),
            (running.clone(), false, 1, true, Err(NoLog::Previous)),
            (running.clone(), true, 3, true, Ok(1)),
            (terminated(0, true), false, 1, false, Ok(0)),
            // In back-off: lastState is the latest run, for both.
            (
                waiting(WaitingReason::CrashLoopBackOff),
                true,
                2,
                false,
                Ok(1),
            ),
            (
                waiting(WaitingReason::CrashLoopBackOff),
                true,
                2,
                true,
                Ok(1),
            ),
            (
                waiting(WaitingReason::PodInitializing),
                false,
                0,
                false,
                Err(NoLog::Waiting(WaitingReason::PodInitializing)),
            ),
            (
                waiting(WaitingReason::PodInitializing),
                false,
                0,
                true,
                Err(NoLog::Previous),
            ),
            // Reported unlocated when the pod ended.
            (terminated(137, false), true, 2, false, Ok(1)),
            (
                terminated(137, false),
                false,
                0,
                false,
                Err(NoLog::Terminated),
            ),
        ];
        for (state, last, runs, previous, want) in cases {
            let c = container(state.clone(), last);
            assert_eq!(
                log_run(&c, runs, previous),
                want,
                "{state:?} {last} {runs} {previous}"
            );
        }
    }

    #[test]
    fn errors_are_worded_as_kubelets() {
        assert_eq!(
            NoLog::Previous.message("web", "p"),
            "previous terminated container \"web\" in pod \"p\" not found"
        );
        assert_eq!(
            NoLog::Terminated.message("web", "p"),
            "container \"web\" in pod \"p\" is terminated"
        );
        assert_eq!(
            NoLog::Waiting(WaitingReason::CrashLoopBackOff).message("web", "p"),
            "container \"web\" in pod \"p\" is waiting to start: CrashLoopBackOff"
        );
    }
}
