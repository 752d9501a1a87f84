use super::*;
use crate::image::registry::testserver::{answer, net, Server};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::time::Duration;

#[derive(Default)]
struct Map(RefCell<BTreeMap<Digest, Vec<u8>>>);

impl Blobs for Map {
    fn has_blob(&self, d: &Digest) -> bool {
        self.0.borrow().contains_key(d)
    }
    fn put_blob(&self, d: &Digest, size: Option<u64>, r: &mut dyn Read) -> Result<()> {
        let mut b = Vec::new();
        Verifier::new(r, d, size)
            .read_to_end(&mut b)
            .map_err(Error::Os)?;
        self.0.borrow_mut().insert(d.clone(), b);
        Ok(())
    }
}

/// An image: its manifest, and every blob by digest.
struct Image {
    manifest: Vec<u8>,
    blobs: BTreeMap<String, Vec<u8>>,
}

fn image(layer_type: &str) -> Image {
    let config =
        br#"{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}"#;
    let layer = b"pretend this is a tar".to_vec();
    let desc = |t: &str, b: &[u8]| serde_json::json!({"mediaType": t, "digest": Digest::of(b).to_string(), "size": b.len()});
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": media::OCI_MANIFEST,
        "config": desc("application/vnd.oci.image.config.v1+json", config),
        "layers": [desc(layer_type, &layer)],
    }))
    .unwrap();
    let mut blobs = BTreeMap::new();
    blobs.insert(Digest::of(config).to_string(), config.to_vec());
    blobs.insert(Digest::of(&layer).to_string(), layer);
    Image { manifest, blobs }
}

/// Serves `img` under the tag `1` of `team/app`; `tamper` changes a blob's bytes as served.
fn serve(img: &Image, tamper: bool) -> Server {
    let manifest = img.manifest.clone();
    let blobs = img.blobs.clone();
    Server::start(move |r, _| {
        let t = r.target.strip_prefix("/v2/team/app/").unwrap_or("");
        let m_digest = Digest::of(&manifest).to_string();
        if t == "manifests/1" || t == format!("manifests/{m_digest}") {
            return answer(
                "200 OK",
                &[
                    ("Content-Type", media::OCI_MANIFEST),
                    ("Docker-Content-Digest", &m_digest),
                ],
                &manifest,
            );
        }
        match t.strip_prefix("blobs/").and_then(|d| blobs.get(d)) {
            Some(b) => {
                let mut b = b.clone();
                if tamper {
                    b[0] ^= 1;
                }
                answer("200 OK", &[], &b)
            }
            None => answer(
                "404 Not Found",
                &[],
                br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}"#,
            ),
        }
    })
}

fn reference(port: u16, tag: &str) -> Reference {
    Reference {
        domain: format!("127.0.0.1:{port}"),
        path: "team/app".into(),
        tag: Some(tag.into()),
        digest: None,
    }
}

fn staging(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("podinit-pull-{}-{name}", std::process::id()))
}

fn run(
    port: u16,
    r: &Reference,
    blobs: &Map,
    dir: &Path,
) -> (
    std::result::Result<Digest, crate::image::Error>,
    Vec<Progress>,
) {
    let mut c = Client::new(&r.domain, &r.path, &[], net(Duration::from_secs(5)), None).unwrap();
    let mut seen = Vec::new();
    let res = fetch(&mut c, blobs, dir, r, &mut |p| seen.push(p));
    let _ = port;
    (res, seen)
}

#[test]
fn pulls_a_manifest_its_config_and_layers() {
    let img = image("application/vnd.oci.image.layer.v1.tar");
    let s = serve(&img, false);
    let blobs = Map::default();
    let dir = staging("ok");
    let (res, progress) = run(s.port, &reference(s.port, "1"), &blobs, &dir);
    let top = res.unwrap();
    assert_eq!(top, Digest::of(&img.manifest));
    let got = blobs.0.borrow();
    assert_eq!(got.len(), 3);
    assert_eq!(got[&top], img.manifest);
    for (d, b) in &img.blobs {
        assert_eq!(&got[&Digest::parse(d).unwrap()], b);
    }
    assert!(!dir.exists(), "staging is removed");
    assert!(matches!(&progress[0], Progress::Resolved { digest } if *digest == top.to_string()));
    assert!(progress
        .iter()
        .any(|p| matches!(p, Progress::Blob { done, total, .. } if done == total && *total > 0)));
    drop(got);
    // A second pull fetches only the manifest: the store has the rest.
    let before = s.targets().len();
    let (res, _) = run(s.port, &reference(s.port, "1"), &blobs, &dir);
    assert_eq!(res.unwrap(), top);
    assert_eq!(s.targets()[before..], ["/v2/team/app/manifests/1"]);
}

#[test]
fn by_digest_the_manifest_must_match() {
    let img = image("application/vnd.oci.image.layer.v1.tar+gzip");
    let s = serve(&img, false);
    let blobs = Map::default();
    let mut r = reference(s.port, "1");
    r.digest = Some(Digest::of(&img.manifest));
    assert!(run(s.port, &r, &blobs, &staging("dig")).0.is_ok());
    let mut r = reference(s.port, "1");
    r.tag = None;
    r.digest = Some(Digest::of(b"other"));
    let blobs = Map::default();
    let e = run(s.port, &r, &blobs, &staging("dig2"))
        .0
        .unwrap_err()
        .to_string();
    assert!(e.contains("not found"), "{e}");
    assert!(blobs.0.borrow().is_empty());
}

#[test]
fn a_corrupt_blob_leaves_nothing() {
    let img = image("application/vnd.oci.image.layer.v1.tar");
    let s = serve(&img, true);
    let blobs = Map::default();
    let dir = staging("bad");
    let e = run(s.port, &reference(s.port, "1"), &blobs, &dir)
        .0
        .unwrap_err()
        .to_string();
    assert!(e.contains("digest mismatch"), "{e}");
    assert!(blobs.0.borrow().is_empty(), "nothing entered the store");
    assert!(!dir.exists());
}

#[test]
fn a_missing_tag_says_so() {
    let img = image("application/vnd.oci.image.layer.v1.tar");
    let s = serve(&img, false);
    let blobs = Map::default();
    let e = run(s.port, &reference(s.port, "2"), &blobs, &staging("tag"))
        .0
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "manifest 2: not found: 404 Not Found (MANIFEST_UNKNOWN: manifest unknown)"
    );
}

#[test]
fn an_unknown_layer_type_is_refused_before_fetching() {
    let img = image("application/vnd.example.weird");
    let s = serve(&img, false);
    let blobs = Map::default();
    let e = run(s.port, &reference(s.port, "1"), &blobs, &staging("type"))
        .0
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("unsupported media type \"application/vnd.example.weird\""),
        "{e}"
    );
    assert_eq!(s.targets(), ["/v2/team/app/manifests/1"]);
    assert!(blobs.0.borrow().is_empty());
}

#[test]
fn a_registry_lying_about_a_blobs_size_is_refused() {
    let img = image("application/vnd.oci.image.layer.v1.tar");
    let manifest = img.manifest.clone();
    let s = Server::start(move |r, _| {
        if r.target.contains("/manifests/") {
            return answer(
                "200 OK",
                &[("Content-Type", media::OCI_MANIFEST)],
                &manifest,
            );
        }
        answer("200 OK", &[], b"x")
    });
    let blobs = Map::default();
    let e = run(s.port, &reference(s.port, "1"), &blobs, &staging("size"))
        .0
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("the registry announces 1 bytes, its descriptor says"),
        "{e}"
    );
    assert!(blobs.0.borrow().is_empty());
}

/// An image of `n` layers, served with the layer `missing` (if any) absent.
fn serve_layers(n: usize, missing: Option<usize>) -> (Server, Vec<Digest>) {
    let config = br#"{"architecture":"amd64","os":"linux"}"#.to_vec();
    let layers: Vec<Vec<u8>> = (0..n).map(|i| vec![i as u8; 300_000 + i]).collect();
    let desc = |t: &str, b: &[u8]| serde_json::json!({"mediaType": t, "digest": Digest::of(b).to_string(), "size": b.len()});
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "config": desc("application/vnd.oci.image.config.v1+json", &config),
        "layers": layers.iter().map(|l| desc("application/vnd.oci.image.layer.v1.tar", l)).collect::<Vec<_>>(),
    }))
    .unwrap();
    let mut blobs = BTreeMap::new();
    blobs.insert(format!("blobs/{}", Digest::of(&config)), config.clone());
    for (i, l) in layers.iter().enumerate() {
        if Some(i) != missing {
            blobs.insert(format!("blobs/{}", Digest::of(l)), l.clone());
        }
    }
    let mut all = vec![Digest::of(&manifest), Digest::of(&config)];
    all.extend(layers.iter().map(|l| Digest::of(l)));
    let s = Server::start(move |r, _| {
        let t = r.target.strip_prefix("/v2/team/app/").unwrap_or("");
        if t.starts_with("manifests/") {
            return answer(
                "200 OK",
                &[("Content-Type", media::OCI_MANIFEST)],
                &manifest,
            );
        }
        match blobs.get(t) {
            Some(b) => answer("200 OK", &[], b),
            None => answer("404 Not Found", &[], b""),
        }
    });
    (s, all)
}

#[test]
fn many_layers_come_at_once_and_all_arrive() {
    let (s, all) = serve_layers(7, None);
    let blobs = Map::default();
    let (res, progress) = run(s.port, &reference(s.port, "1"), &blobs, &staging("many"));
    assert_eq!(res.unwrap(), all[0]);
    assert_eq!(blobs.0.borrow().len(), all.len());
    for d in &all[1..] {
        let d = d.to_string();
        assert!(
            progress.iter().any(|p| matches!(p, Progress::Blob { digest, done, total } if *digest == d && done == total)),
            "no final progress for {d}"
        );
    }
}

#[test]
fn one_missing_layer_of_many_fails_the_pull_and_stores_nothing() {
    let (s, _) = serve_layers(7, Some(4));
    let blobs = Map::default();
    let dir = staging("many-bad");
    let e = run(s.port, &reference(s.port, "1"), &blobs, &dir)
        .0
        .unwrap_err()
        .to_string();
    assert!(e.contains("not found: 404 Not Found"), "{e}");
    assert!(blobs.0.borrow().is_empty());
    assert!(!dir.exists());
}
