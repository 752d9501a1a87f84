//! CrashLoopBackOff: the one place of the restart-delay rule (docs/semantics.md §Restarts).
//!
//! The first restart is immediate, then 10 s, 20 s, 40 s … doubling up to the cap (300 s,
//! or `--max-restart-backoff`; the first delay is clamped to it too), no jitter, measured
//! from the exit (`finishedAt`). A run longer than 10 minutes resets it.

use super::Millis;

/// kubelet's initial container back-off.
pub const INITIAL_MS: Millis = 10_000;
/// kubelet's default `maxContainerRestartPeriod`.
pub const DEFAULT_CAP_MS: Millis = 300_000;
/// A run at least this long resets the back-off.
pub const RESET_AFTER_MS: Millis = 600_000;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Backoff {
    /// The delay the next restart waits; 0 until the first restart has happened.
    next_ms: Millis,
}

impl Backoff {
    /// A run that lasted `ran_ms` ended; the restart it calls for waits the returned delay.
    /// Advances the back-off for the restart after.
    pub fn on_exit(&mut self, ran_ms: Millis, cap_ms: Millis) -> Millis {
        if ran_ms >= RESET_AFTER_MS {
            self.next_ms = 0;
        }
        let delay = self.next_ms;
        self.next_ms = if delay == 0 {
            INITIAL_MS.min(cap_ms)
        } else {
            delay.saturating_mul(2).min(cap_ms)
        };
        delay
    }
}

/// The `waiting.message` of a container in back-off.
pub fn message(delay_ms: Millis, container: &str, pod: &str, ns: &str, uid: &str) -> String {
    format!(
        "back-off {} restarting failed container={container} pod={pod}_{ns}({uid})",
        // kubelet's back-off is whole seconds.
        go_duration(delay_ms / 1000 * 1000)
    )
}

/// A duration as Go's `time.Duration` prints one truncated to milliseconds, below an
/// hour (`512ms`, `10s`, `1.5s`, `5m0s`, `2m3.004s`).
pub fn go_duration(ms: Millis) -> String {
    if ms == 0 {
        return "0s".into();
    }
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let (m, s, frac) = (ms / 60_000, (ms / 1000) % 60, ms % 1000);
    let frac = if frac == 0 {
        String::new()
    } else {
        format!(".{frac:03}").trim_end_matches('0').to_string()
    };
    if m > 0 {
        format!("{m}m{s}{frac}s")
    } else {
        format!("{s}{frac}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn immediate_then_doubling_to_the_cap() {
        let mut b = Backoff::default();
        let delays: Vec<Millis> = (0..9)
            .map(|_| b.on_exit(1000, DEFAULT_CAP_MS) / 1000)
            .collect();
        assert_eq!(delays, vec![0, 10, 20, 40, 80, 160, 300, 300, 300]);
    }

    #[test]
    fn a_long_run_resets_it() {
        let mut b = Backoff::default();
        for _ in 0..4 {
            b.on_exit(1000, DEFAULT_CAP_MS);
        }
        assert_eq!(b.on_exit(RESET_AFTER_MS, DEFAULT_CAP_MS), 0);
        assert_eq!(b.on_exit(1000, DEFAULT_CAP_MS), INITIAL_MS);
    }

    #[test]
    fn a_lower_cap_clamps_even_the_first_delay() {
        let mut b = Backoff::default();
        let delays: Vec<Millis> = (0..4).map(|_| b.on_exit(0, 3000)).collect();
        assert_eq!(delays, vec![0, 3000, 3000, 3000]);
    }

    #[test]
    fn messages() {
        assert_eq!(
            message(20_000, "web", "p", "default", "u"),
            "back-off 20s restarting failed container=web pod=p_default(u)"
        );
        assert_eq!(go_duration(300_000), "5m0s");
        assert_eq!(go_duration(80_000), "1m20s");
        assert_eq!(go_duration(0), "0s");
    }
}
