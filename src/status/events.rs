//! The pod's events: kept in memory (bounded, repeats counted) for the API, and appended to
//! `events.jsonl` so they outlive the pod (docs/interface.md §4).

use crate::pod::{EventReason, EventType};
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use std::collections::VecDeque;
use std::fs;
use std::io::{self, Write};
use std::path::Path;

/// Events kept in memory; older ones remain only in `events.jsonl`.
pub const MAX_EVENTS: usize = 1000;

pub struct EventLog {
    items: VecDeque<Event>,
    file: Option<fs::File>,
    /// Lines not yet in the file (its filesystem full), oldest first, at most
    /// `MAX_EVENTS`, and how much of the first one is written already: they are appended
    /// in order once there is room, so that the file holds whole lines only.
    pending: VecDeque<Vec<u8>>,
    pending_written: usize,
    pod: ObjectReference,
    seq: u64,
}

impl EventLog {
    /// `path`: `events.jsonl`, or `None` to keep events in memory only.
    pub fn open(path: Option<&Path>, name: &str, namespace: &str, uid: &str) -> io::Result<Self> {
        let file = match path {
            Some(p) => Some(
                fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .map_err(|e| {
                        io::Error::new(e.kind(), format!("opening {}: {e}", p.display()))
                    })?,
            ),
            None => None,
        };
        Ok(EventLog {
            items: VecDeque::new(),
            file,
            pending: VecDeque::new(),
            pending_written: 0,
            pod: ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: Some(name.into()),
                namespace: Some(namespace.into()),
                uid: Some(uid.into()),
                ..Default::default()
            },
            seq: 0,
        })
    }

    /// Record an event; a repeat of a kept one (same type, reason, message and object)
    /// bumps its `count` and `lastTimestamp`. Either way one line is appended to the file.
    pub fn record(
        &mut self,
        type_: EventType,
        reason: EventReason,
        message: &str,
        field_path: Option<String>,
        now: Time,
    ) -> &Event {
        self.record_text(type_, reason.as_str(), message, field_path, now)
    }

    /// `record` with a reason that is not one of kubelet's fixed words: an admit
    /// handler's (`NodeAffinity`, `OutOf<resource>`).
    pub fn record_text(
        &mut self,
        type_: EventType,
        reason: &str,
        message: &str,
        field_path: Option<String>,
        now: Time,
    ) -> &Event {
        let same = |e: &Event| {
            e.type_.as_deref() == Some(type_.as_str())
                && e.reason.as_deref() == Some(reason)
                && e.message.as_deref() == Some(message)
                && e.involved_object.field_path == field_path
        };
        let idx = match self.items.iter().position(same) {
            Some(i) => {
                let e = &mut self.items[i];
                e.count = Some(e.count.unwrap_or(1) + 1);
                e.last_timestamp = Some(now);
                i
            }
            None => {
                self.seq += 1;
                let pod_name = self.pod.name.clone().unwrap_or_default();
                let mut obj = self.pod.clone();
                obj.field_path = field_path;
                self.items.push_back(Event {
                    metadata: ObjectMeta {
                        name: Some(format!("{pod_name}.{:x}", self.seq)),
                        namespace: self.pod.namespace.clone(),
                        ..Default::default()
                    },
                    involved_object: obj,
                    type_: Some(type_.as_str().into()),
                    reason: Some(reason.into()),
                    message: Some(message.into()),
                    first_timestamp: Some(now.clone()),
                    last_timestamp: Some(now),
                    count: Some(1),
                    source: Some(EventSource {
                        component: Some("podinit".into()),
                        host: None,
                    }),
                    ..Default::default()
                });
                if self.items.len() > MAX_EVENTS {
                    self.items.pop_front();
                }
                self.items.len() - 1
            }
        };
        if self.file.is_some() {
            if let Ok(mut line) = serde_json::to_vec(&self.items[idx]) {
                line.push(b'\n');
                if self.pending.len() == MAX_EVENTS {
                    // Only a line none of which is written yet may go: the file keeps
                    // whole lines.
                    let drop_at = usize::from(self.pending_written > 0);
                    self.pending.remove(drop_at);
                }
                self.pending.push_back(line);
                // A full disk must not stop the pod: the lines wait for room.
                let _ = self.flush();
            }
        }
        &self.items[idx]
    }

    /// Whether event lines wait for room in the file.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Append the waiting lines, in order, as far as the file takes them; a line written
    /// in part (the disk filled mid-way) is finished first.
    pub fn flush(&mut self) -> io::Result<()> {
        let Some(f) = &mut self.file else {
            self.pending.clear();
            return Ok(());
        };
        while let Some(line) = self.pending.front() {
            match f.write(&line[self.pending_written..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.pending_written += n;
                    if self.pending_written == line.len() {
                        self.pending.pop_front();
                        self.pending_written = 0;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    pub fn items(&self) -> impl Iterator<Item = &Event> {
        self.items.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(s).unwrap())
    }

    #[test]
    fn repeats_are_counted_and_every_one_is_appended() {
        let dir = std::env::temp_dir().join(format!("podinit-ev-{}", crate::util::random_hex(4)));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("events.jsonl");
        let mut log = EventLog::open(Some(&path), "p", "default", "u1").unwrap();
        let fp = Some("spec.containers{web}".to_string());
        log.record(
            EventType::Warning,
            EventReason::BackOff,
            "Back-off",
            fp.clone(),
            t(1),
        );
        log.record(
            EventType::Normal,
            EventReason::Started,
            "Started container web",
            fp.clone(),
            t(2),
        );
        let e = log
            .record(
                EventType::Warning,
                EventReason::BackOff,
                "Back-off",
                fp,
                t(3),
            )
            .clone();
        assert_eq!(e.count, Some(2));
        assert_eq!(e.first_timestamp, Some(t(1)));
        assert_eq!(e.last_timestamp, Some(t(3)));
        assert_eq!(log.items().count(), 2);
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["involvedObject"]["kind"], "Pod");
        assert_eq!(v["involvedObject"]["fieldPath"], "spec.containers{web}");
        assert_eq!(v["type"], "Warning");
        let lines = fs::read_to_string(&path).unwrap();
        assert_eq!(lines.lines().count(), 3);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn lines_that_found_the_disk_full_are_appended_whole_and_in_order_later() {
        // /dev/full refuses every write with ENOSPC, as a full filesystem does.
        let mut log = EventLog::open(Some(Path::new("/dev/full")), "p", "default", "u1").unwrap();
        for (i, m) in ["first", "second"].iter().enumerate() {
            log.record(
                EventType::Normal,
                EventReason::Started,
                m,
                None,
                t(i as i64),
            );
        }
        assert!(log.has_pending());
        assert_eq!(log.flush().unwrap_err().raw_os_error(), Some(libc::ENOSPC));
        assert_eq!(log.items().count(), 2, "the API keeps them meanwhile");
        // Room again: the next write appends both, then the new one.
        let dir = std::env::temp_dir().join(format!("podinit-ev-{}", crate::util::random_hex(4)));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("events.jsonl");
        log.file = Some(fs::File::create(&path).unwrap());
        // Half of the first line was written before the disk filled.
        let half = log.pending[0].len() / 2;
        log.file
            .as_mut()
            .unwrap()
            .write_all(&log.pending[0][..half])
            .unwrap();
        log.pending_written = half;
        log.record(EventType::Normal, EventReason::Started, "third", None, t(3));
        assert!(!log.has_pending());
        let text = fs::read_to_string(&path).unwrap();
        let messages: Vec<String> = text
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["message"].to_string())
            .collect();
        assert_eq!(messages, ["\"first\"", "\"second\"", "\"third\""]);
        fs::remove_dir_all(&dir).unwrap();
    }
}
