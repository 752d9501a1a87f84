//! The counters behind `GET /metrics` (Prometheus text format): restarts, reaped
//! processes, probe results and durations, container start latency.

use std::collections::BTreeMap;
use std::fmt::Write;

#[derive(Default)]
pub struct Metrics {
    /// (container, probe) → (successes, failures, seconds spent, runs).
    probes: BTreeMap<(String, &'static str), (u64, u64, f64, u64)>,
    /// container → (last, sum of seconds, starts): from the decision to start to exec.
    starts: BTreeMap<String, (f64, f64, u64)>,
}

impl Metrics {
    pub fn probe(&mut self, container: &str, probe: &'static str, ok: bool, seconds: f64) {
        let e = self
            .probes
            .entry((container.to_string(), probe))
            .or_default();
        if ok {
            e.0 += 1;
        } else {
            e.1 += 1;
        }
        e.2 += seconds;
        e.3 += 1;
    }

    pub fn started(&mut self, container: &str, seconds: f64) {
        let e = self.starts.entry(container.to_string()).or_default();
        e.0 = seconds;
        e.1 += seconds;
        e.2 += 1;
    }

    /// The text of `GET /metrics`; `restarts`: (container, restartCount).
    pub fn render(&self, restarts: &[(String, u32)], reaped: u64) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "# HELP podinit_container_restarts_total Restarts of each container."
        );
        let _ = writeln!(o, "# TYPE podinit_container_restarts_total counter");
        for (c, n) in restarts {
            let _ = writeln!(
                o,
                "podinit_container_restarts_total{{container=\"{c}\"}} {n}"
            );
        }
        let _ = writeln!(
            o,
            "# HELP podinit_reaped_processes_total Processes reaped by the supervisor."
        );
        let _ = writeln!(o, "# TYPE podinit_reaped_processes_total counter");
        let _ = writeln!(o, "podinit_reaped_processes_total {reaped}");
        let _ = writeln!(
            o,
            "# HELP podinit_probe_results_total Probe results by container, probe and result."
        );
        let _ = writeln!(o, "# TYPE podinit_probe_results_total counter");
        for ((c, p), (ok, fail, _, _)) in &self.probes {
            let _ = writeln!(o, "podinit_probe_results_total{{container=\"{c}\",probe=\"{p}\",result=\"success\"}} {ok}");
            let _ = writeln!(o, "podinit_probe_results_total{{container=\"{c}\",probe=\"{p}\",result=\"failure\"}} {fail}");
        }
        let _ = writeln!(o, "# HELP podinit_probe_duration_seconds Time probes took.");
        let _ = writeln!(o, "# TYPE podinit_probe_duration_seconds summary");
        for ((c, p), (_, _, secs, n)) in &self.probes {
            let _ = writeln!(
                o,
                "podinit_probe_duration_seconds_sum{{container=\"{c}\",probe=\"{p}\"}} {secs:.6}"
            );
            let _ = writeln!(
                o,
                "podinit_probe_duration_seconds_count{{container=\"{c}\",probe=\"{p}\"}} {n}"
            );
        }
        let _ = writeln!(o, "# HELP podinit_container_start_seconds Time from the decision to start a container to its exec.");
        let _ = writeln!(o, "# TYPE podinit_container_start_seconds summary");
        for (c, (_, sum, n)) in &self.starts {
            let _ = writeln!(
                o,
                "podinit_container_start_seconds_sum{{container=\"{c}\"}} {sum:.6}"
            );
            let _ = writeln!(
                o,
                "podinit_container_start_seconds_count{{container=\"{c}\"}} {n}"
            );
        }
        let _ = writeln!(
            o,
            "# HELP podinit_container_last_start_seconds The latest start's latency."
        );
        let _ = writeln!(o, "# TYPE podinit_container_last_start_seconds gauge");
        for (c, (last, _, _)) in &self.starts {
            let _ = writeln!(
                o,
                "podinit_container_last_start_seconds{{container=\"{c}\"}} {last:.6}"
            );
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_prometheus_text() {
        let mut m = Metrics::default();
        m.probe("web", "readiness", true, 0.002);
        m.probe("web", "readiness", false, 0.004);
        m.started("web", 0.012);
        let t = m.render(&[("web".into(), 2)], 5);
        for want in [
            "podinit_container_restarts_total{container=\"web\"} 2\n",
            "podinit_reaped_processes_total 5\n",
            "podinit_probe_results_total{container=\"web\",probe=\"readiness\",result=\"success\"} 1\n",
            "podinit_probe_results_total{container=\"web\",probe=\"readiness\",result=\"failure\"} 1\n",
            "podinit_probe_duration_seconds_sum{container=\"web\",probe=\"readiness\"} 0.006000\n",
            "podinit_probe_duration_seconds_count{container=\"web\",probe=\"readiness\"} 2\n",
            "podinit_container_start_seconds_count{container=\"web\"} 1\n",
            "podinit_container_last_start_seconds{container=\"web\"} 0.012000\n",
        ] {
            assert!(t.contains(want), "{want:?} missing from\n{t}");
        }
    }
}
