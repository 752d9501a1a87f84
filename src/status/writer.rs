//! `status.json`: the Pod object, replaced atomically whenever it changes. The Pod (its
//! metadata and spec) is the caller's: it is passed to each update, and the caller says
//! when it changed (`pod_changed`).

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use std::io;
use std::path::PathBuf;

pub struct StatusWriter {
    path: PathBuf,
    /// The object up to its status, pretty and compact (`apiVersion`, `kind`, `metadata`
    /// and `spec` come first in key order, `status` last): they change only with the spec
    /// or a deletion, so each update serializes the status alone.
    head: Option<(Vec<u8>, Vec<u8>)>,
    /// The object as one line: what changed is told by it, as it is the pretty text
    /// without its whitespace.
    compact: Vec<u8>,
    /// The status last written: most loop turns change nothing, and comparing is far
    /// cheaper than serializing the Pod.
    last_status: Option<PodStatus>,
    /// The pretty text not in the file yet (a full disk): kept only until it is, so that
    /// a pod at rest holds one copy of its object, not two.
    unwritten: Option<Vec<u8>>,
}

impl StatusWriter {
    pub fn new(path: PathBuf) -> StatusWriter {
        StatusWriter {
            path,
            head: None,
            compact: b"{}".to_vec(),
            last_status: None,
            unwritten: None,
        }
    }

    /// The Pod's metadata or spec changed (a deletion, an ephemeral container): the next
    /// update serializes them again.
    pub fn pod_changed(&mut self) {
        self.head = None;
        self.last_status = None;
    }

    /// The Pod object as last written, as one line of JSON (API and watch streams).
    pub fn compact(&self) -> Vec<u8> {
        self.compact.clone()
    }

    /// Take the pod's current status (`pod`: its metadata and spec, its own status
    /// ignored): whether the object changed (for the API and the watchers, which see it
    /// either way), and how writing the file went. A file that could not be written (a
    /// full disk) is written on the next call, changed or not.
    pub fn update(&mut self, pod: &Pod, status: &PodStatus) -> (bool, io::Result<()>) {
        let mut changed = false;
        if self.last_status.as_ref() != Some(status) {
            let (pretty, compact) = match self.render(pod, status) {
                Ok(r) => r,
                Err(e) => return (false, Err(io::Error::other(e))),
            };
            if compact != self.compact {
                self.compact = compact;
                self.unwritten = Some(pretty);
                changed = true;
            }
            self.last_status = Some(status.clone());
        }
        let file = match self.unwritten.take() {
            Some(pretty) => crate::util::write_atomic(&self.path, &pretty).map_err(|e| {
                self.unwritten = Some(pretty);
                io::Error::new(e.kind(), format!("writing {}: {e}", self.path.display()))
            }),
            None => Ok(()),
        };
        (changed, file)
    }

    /// The Pod with `status`, pretty (the file) and compact (the API's line). Through a
    /// serde_json::Value: the typed objects' serializers are then linked once, for Value,
    /// not a second time for the pretty writer. The line is the pretty text minified, not
    /// a second serialization.
    fn render(&mut self, pod: &Pod, status: &PodStatus) -> serde_json::Result<(Vec<u8>, Vec<u8>)> {
        if self.head.is_none() {
            let view = serde_json::to_value(PodView { pod, status: None })?;
            self.head = Some(open_last_member(&serde_json::to_vec_pretty(&view)?));
        }
        let (head, head_compact) = self.head.as_ref().expect("just made");
        let body = serde_json::to_vec_pretty(&serde_json::to_value(status)?)?;
        let mut pretty = Vec::with_capacity(head.len() + body.len() + body.len() / 8 + 4);
        pretty.extend_from_slice(head);
        // One level deeper than serialized alone: two more spaces after each newline
        // (serde_json escapes every newline inside a string).
        for &b in &body {
            pretty.push(b);
            if b == b'\n' {
                pretty.extend_from_slice(b"  ");
            }
        }
        pretty.extend_from_slice(b"\n}\n");
        let mut compact = head_compact.clone();
        compact.extend(minify(&body));
        compact.push(b'}');
        Ok((pretty, compact))
    }
}

/// A pretty object `{ .. \n}` opened again for one more member, `status`, pretty and
/// compact.
fn open_last_member(pretty: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let inner = pretty.strip_suffix(b"\n}").unwrap_or(pretty);
    let mut head = inner.to_vec();
    head.extend_from_slice(b",\n  \"status\": ");
    let mut compact = minify(inner);
    compact.extend_from_slice(b",\"status\":");
    (head, compact)
}

/// The Pod with `status` in place of its own, serialized as k8s-openapi serializes a Pod.
struct PodView<'a> {
    pod: &'a Pod,
    status: Option<&'a PodStatus>,
}

impl serde::Serialize for PodView<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use k8s_openapi::Resource;
        use serde::ser::SerializeStruct;
        let mut m = s.serialize_struct(Pod::KIND, 5)?;
        m.serialize_field("apiVersion", Pod::API_VERSION)?;
        m.serialize_field("kind", Pod::KIND)?;
        m.serialize_field("metadata", &self.pod.metadata)?;
        if let Some(spec) = &self.pod.spec {
            m.serialize_field("spec", spec)?;
        }
        if let Some(status) = self.status {
            m.serialize_field("status", status)?;
        }
        m.end()
    }
}

/// Pretty JSON as one line: the whitespace outside strings dropped (inside them serde_json
/// escapes every control character, so a string holds no raw newline).
fn minify(json: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(json.len());
    let (mut in_string, mut escaped) = (false, false);
    for &b in json {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else if b == b'"' {
            in_string = true;
        } else if b.is_ascii_whitespace() {
            continue;
        }
        out.push(b);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod() -> Pod {
        serde_json::from_str(
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"a b":"x \" y"}},
                "spec":{"containers":[{"name":"c","image":"busybox","args":["a  b","\n\\"]}]}}"#,
        )
        .unwrap()
    }

    #[test]
    fn the_file_and_the_line_hold_the_pod_with_its_status() {
        let dir = std::env::temp_dir().join(format!("podinit-sw-{}", crate::util::random_hex(4)));
        std::fs::create_dir_all(&dir).unwrap();
        let mut w = StatusWriter::new(dir.join("status.json"));
        let p = pod();
        let status = PodStatus {
            phase: Some("Running".into()),
            message: Some("two  spaces, a \"quote\" and a \\".into()),
            ..Default::default()
        };
        let (changed, file) = w.update(&p, &status);
        assert!(changed && file.is_ok());
        let (changed, file) = w.update(&p, &status);
        assert!(!changed && file.is_ok(), "unchanged: not written again");
        let mut want = pod();
        want.status = Some(status);
        let file: Pod =
            serde_json::from_slice(&std::fs::read(dir.join("status.json")).unwrap()).unwrap();
        assert_eq!(file, want);
        let line = w.compact();
        assert!(!line.contains(&b'\n'));
        assert_eq!(line, serde_json::to_vec(&want).unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_that_could_not_be_written_is_written_at_the_next_update() {
        let dir = std::env::temp_dir().join(format!("podinit-sw-{}", crate::util::random_hex(4)));
        let mut w = StatusWriter::new(dir.join("status.json"));
        let p = pod();
        let status = PodStatus {
            phase: Some("Pending".into()),
            ..Default::default()
        };
        // No directory yet: the write fails, the line has the new status all the same.
        let (changed, file) = w.update(&p, &status);
        assert!(changed);
        let e = file.unwrap_err();
        assert!(e.to_string().contains("status.json"), "{e}");
        let line: Pod = serde_json::from_slice(&w.compact()).unwrap();
        assert_eq!(line.status, Some(status.clone()));
        assert!(w.update(&p, &status).1.is_err(), "still no directory");
        std::fs::create_dir_all(&dir).unwrap();
        let (changed, file) = w.update(&p, &status);
        assert!(!changed && file.is_ok(), "unchanged, but written now");
        let on_disk: Pod =
            serde_json::from_slice(&std::fs::read(dir.join("status.json")).unwrap()).unwrap();
        assert_eq!(on_disk.status, Some(status));
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "no temporary file left"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_file_is_the_pods_pretty_json_whatever_changed() {
        let dir = std::env::temp_dir().join(format!("podinit-sw-{}", crate::util::random_hex(4)));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("status.json");
        let mut w = StatusWriter::new(file.clone());
        let mut p = pod();
        let status: PodStatus = serde_json::from_value(serde_json::json!({
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "c", "image": "busybox", "imageID": "", "ready": true,
                "restartCount": 0, "state": {"running": {"startedAt": "2026-11-25T01:00:00Z"}}}],
            "podIPs": [],
        }))
        .unwrap();
        let check = |w: &StatusWriter, want: &Pod| {
            let v = serde_json::to_value(want).unwrap();
            let mut pretty = serde_json::to_vec_pretty(&v).unwrap();
            pretty.push(b'\n');
            let on_disk = std::fs::read(&file).unwrap();
            assert_eq!(
                String::from_utf8_lossy(&on_disk),
                String::from_utf8_lossy(&pretty)
            );
            assert_eq!(w.compact(), serde_json::to_vec(&v).unwrap());
        };
        let mut want = pod();
        want.status = Some(status.clone());
        assert!(w.update(&p, &status).1.is_ok());
        check(&w, &want);
        // A new spec and a deletion show in the next update, with the same status.
        let mut spec = want.spec.clone().unwrap();
        spec.containers[0].args = Some(vec!["new".into()]);
        p.spec = Some(spec.clone());
        w.pod_changed();
        want.spec = Some(spec);
        assert!(w.update(&p, &status).0, "the spec changed");
        check(&w, &want);
        let at = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::from_second(1_800_000_000).unwrap(),
        );
        p.metadata.deletion_timestamp = Some(at.clone());
        p.metadata.deletion_grace_period_seconds = Some(30);
        w.pod_changed();
        want.metadata.deletion_timestamp = Some(at);
        want.metadata.deletion_grace_period_seconds = Some(30);
        assert!(w.update(&p, &status).0, "the pod was deleted");
        check(&w, &want);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn minify_keeps_strings_whole() {
        let v = serde_json::json!({"a": [1, {"b": " x \" \\ y "}], "c": "\n\t"});
        let pretty = serde_json::to_vec_pretty(&v).unwrap();
        assert_eq!(minify(&pretty), serde_json::to_vec(&v).unwrap());
    }
}
