//! `podinit images pull` against a real registry (Debian's docker-registry) on 127.0.0.1:
//! plain HTTP, htpasswd and token auth, TLS with a CA made here, a missing tag, a blob
//! altered on the registry's disk, a registry that never answers. A failed pull leaves
//! nothing in the store. Images come from scripts/make-oci-image, pushed with skopeo.

#[path = "common/bomb.rs"]
mod bomb;
mod common;
#[path = "common/registry.rs"]
mod registry;

use podinit::image::store::Store;
use registry::{make_certs, run_bounded, Auth, Registry, TempDir, TokenServer};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const REPO: &str = "podinit-test/busybox";
const LIMIT: Duration = Duration::from_secs(120);

/// A busybox oci-archive in `dir`.
fn archive(dir: &Path) -> PathBuf {
    let out = dir.join("busybox.tar");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/make-oci-image");
    let mut c = Command::new(script);
    c.arg(&out).arg("podinit.test/busybox:1");
    let o = run_bounded(c, LIMIT);
    assert!(
        o.status.success(),
        "make-oci-image: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

struct Pulled {
    code: i32,
    stdout: String,
    stderr: String,
}

fn pull(store: &Path, name: &str, args: &[&str]) -> Pulled {
    pull_env(store, name, args, &[])
}

fn pull_env(store: &Path, name: &str, args: &[&str], env: &[(&str, &Path)]) -> Pulled {
    let mut c = Command::new(common::bin());
    c.args(["images", "pull", "--images"])
        .arg(store)
        .args(args)
        .arg(name);
    // No login of the machine's user may leak into a test.
    c.env("DOCKER_CONFIG", store.with_extension("no-docker-config"));
    for (k, v) in env {
        c.env(k, v);
    }
    let o: Output = run_bounded(c, LIMIT);
    Pulled {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).trim().to_string(),
        stderr: String::from_utf8_lossy(&o.stderr).to_string(),
    }
}

/// The pull succeeded, printed the tag's digest, and the store has the image by name with
/// its manifest, config and layers.
fn assert_pulled(reg: &Registry, store: &Path, p: &Pulled, name: &str) {
    assert_eq!(
        p.code,
        0,
        "pull {name}: {}\nregistry: {}",
        p.stderr,
        reg.log()
    );
    let digest = reg.tag_digest(REPO, "1");
    assert_eq!(p.stdout, digest);
    let s = Store::open(store).unwrap();
    let img = s
        .get(name)
        .unwrap()
        .unwrap_or_else(|| panic!("{name} not in the store"));
    assert_eq!(img.digest.to_string(), digest);
    let manifest: serde_json::Value = serde_json::from_slice(&reg.blob(&digest)).unwrap();
    let mut blobs = vec![
        digest.clone(),
        manifest["config"]["digest"].as_str().unwrap().into(),
    ];
    for l in manifest["layers"].as_array().unwrap() {
        blobs.push(l["digest"].as_str().unwrap().into());
    }
    for b in blobs {
        let d = podinit::image::digest::Digest::parse(&b).unwrap();
        assert!(s.has_blob(&d), "{b} is not in the store");
    }
    assert_no_staging(store);
}

/// A failed pull left no blob, no name and no staging directory.
fn assert_nothing_stored(store: &Path) {
    assert_no_staging(store);
    let blobs = store.join("blobs/sha256");
    let left: Vec<_> = std::fs::read_dir(&blobs)
        .map(|d| d.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert!(
        left.is_empty(),
        "blobs left in {}: {left:?}",
        blobs.display()
    );
    if store.exists() {
        let names = Store::open(store).unwrap().list().unwrap();
        assert!(names.is_empty(), "names left: {names:?}");
    }
}

/// A pull stages in the store's scratch space (`tmp/`), which it empties when done.
fn assert_no_staging(store: &Path) {
    let staging: Vec<_> = std::fs::read_dir(store.join("tmp"))
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(staging.is_empty(), "staging left: {staging:?}");
}

#[test]
#[ignore = "needs root: runs a registry and pulls into a store"]
fn registry_pulls_over_plain_http_by_tag_and_by_digest() {
    common::require_root();
    let tmp = TempDir::new("reg-plain");
    let reg = Registry::start("reg-plain-srv", &Auth::None, None);
    reg.push(&archive(tmp.path()), &format!("{REPO}:1"), None);
    let store = tmp.path().join("store");
    let name = format!("{}/{REPO}:1", reg.host());
    let p = pull(&store, &name, &[]);
    assert_pulled(&reg, &store, &p, &name);
    // Again: the store has every blob, only the manifest is asked for.
    let p = pull(&store, &name, &[]);
    assert_eq!(p.code, 0, "{}", p.stderr);
    let by_digest = format!("{}/{REPO}@{}", reg.host(), reg.tag_digest(REPO, "1"));
    let p = pull(&store, &by_digest, &[]);
    assert_eq!(p.code, 0, "{}", p.stderr);
    assert_eq!(p.stdout, reg.tag_digest(REPO, "1"));
}

/// On a terminal, `images pull` and the puller of `podinit run` show one style of progress,
/// podman's: `Copying blob <12 hex> <size> / <size>` in binary units, then `… done`; never a
/// size of nothing. `script` gives them a terminal.
#[test]
#[ignore = "needs root: runs a registry and pulls into a store"]
fn registry_pull_progress_on_a_terminal_as_podman_shows_it() {
    common::require_root();
    let tmp = TempDir::new("reg-progress");
    let reg = Registry::start("reg-progress-srv", &Auth::None, None);
    reg.push(&archive(tmp.path()), &format!("{REPO}:1"), None);
    let name = format!("{}/{REPO}:1", reg.host());
    let on_a_terminal = |line: &str| {
        let mut c = Command::new("script");
        c.args(["-qec", line, "/dev/null"])
            .env("DOCKER_CONFIG", tmp.path().join("no-docker-config"));
        let o = run_bounded(c, LIMIT);
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(o.status.success(), "{line}: {out}");
        out
    };
    let bin = common::bin();
    let store = tmp.path().join("store");
    let pulled = on_a_terminal(&format!(
        "{} images pull --images {} {name}",
        bin.display(),
        store.display()
    ));
    let pod = tmp.path().join("pod.yaml");
    std::fs::write(
        &pod,
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: pit-progress}}\nspec:\n  restartPolicy: Never\n  containers:\n  - {{name: c, image: \"{name}\", command: [\"true\"]}}\n"
        ),
    )
    .unwrap();
    let ran = on_a_terminal(&format!(
        "{} run {} --images {} --state-dir {}",
        bin.display(),
        pod.display(),
        tmp.path().join("store2").display(),
        tmp.path().join("state").display()
    ));
    for (what, out) in [("images pull", &pulled), ("run", &ran)] {
        assert!(
            out.contains(&format!("Trying to pull {name}...")),
            "{what}: {out}"
        );
        let done = out
            .split(['\r', '\n'])
            .filter(|l| l.contains("Copying blob ") && l.ends_with(" done"))
            .count();
        assert!(done >= 1, "{what}: no blob done: {out:?}");
        assert!(
            !out.contains(" MB") && !out.contains("0.0 of 0.0"),
            "{what}: decimal or empty sizes: {out:?}"
        );
    }
}

#[test]
#[ignore = "needs root: runs a registry and pulls into a store"]
fn registry_missing_tag_is_a_clear_error_and_stores_nothing() {
    common::require_root();
    let tmp = TempDir::new("reg-missing");
    let reg = Registry::start("reg-missing-srv", &Auth::None, None);
    reg.push(&archive(tmp.path()), &format!("{REPO}:1"), None);
    let store = tmp.path().join("store");
    let p = pull(&store, &format!("{}/{REPO}:2", reg.host()), &[]);
    assert_eq!(p.code, 1, "{}", p.stderr);
    assert!(
        p.stderr.contains("manifest 2: not found") && p.stderr.contains("MANIFEST_UNKNOWN"),
        "{}",
        p.stderr
    );
    assert_nothing_stored(&store);
}

#[test]
#[ignore = "needs root: runs a registry and pulls into a store"]
fn registry_blob_altered_on_disk_fails_the_digest_check_and_stores_nothing() {
    common::require_root();
    let tmp = TempDir::new("reg-digest");
    let reg = Registry::start("reg-digest-srv", &Auth::None, None);
    reg.push(&archive(tmp.path()), &format!("{REPO}:1"), None);
    let manifest: serde_json::Value =
        serde_json::from_slice(&reg.blob(&reg.tag_digest(REPO, "1"))).unwrap();
    let layer = manifest["layers"][0]["digest"].as_str().unwrap();
    // Same size, one byte changed: only the digest can tell.
    let path = reg.blob_path(layer);
    let mut bytes = std::fs::read(&path).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&path, bytes).unwrap();
    let store = tmp.path().join("store");
    let p = pull(&store, &format!("{}/{REPO}:1", reg.host()), &[]);
    assert_eq!(p.code, 1, "{}", p.stderr);
    assert!(
        p.stderr.contains(&format!("blob {layer}")) && p.stderr.contains("digest mismatch"),
        "{}",
        p.stderr
    );
    assert_nothing_stored(&store);
}

/// A decompression bomb on a registry: 256 MiB of zeros in a few hundred KiB of gzip,
/// whose blob verifies (only its uncompressed size is hostile), is stopped at its cap as
/// it is unpacked, naming the layer, and the pull leaves nothing.
#[test]
#[ignore = "needs root: runs a registry and pulls into a store"]
fn registry_decompression_bomb_stops_at_its_cap_and_stores_nothing() {
    common::require_root();
    let tmp = TempDir::new("reg-bomb");
    let b = bomb::layout(
        &tmp.path().join("layout"),
        "podinit.test/bomb:1",
        256 << 20,
        bomb::Codec::Gzip,
        bomb::Lie::DiffId,
    );
    let archive = tmp.path().join("bomb.tar");
    bomb::archive(&b, &archive);
    let reg = Registry::start("reg-bomb-srv", &Auth::None, None);
    reg.push(&archive, &format!("{REPO}:bomb"), None);
    let manifest: serde_json::Value =
        serde_json::from_slice(&reg.blob(&reg.tag_digest(REPO, "bomb"))).unwrap();
    assert_eq!(
        manifest["layers"][0]["digest"].as_str(),
        Some(b.layer.as_str()),
        "the registry keeps the bomb's blob as it was made"
    );
    let store = tmp.path().join("store");
    let p = pull_env(
        &store,
        &format!("{}/{REPO}:bomb", reg.host()),
        &[],
        &[("PODINIT_MAX_LAYER_SIZE", Path::new("32Mi"))],
    );
    assert_eq!(p.code, 1, "{}", p.stderr);
    assert_eq!(p.stderr.lines().count(), 1, "{}", p.stderr);
    assert!(
        p.stderr.contains(&format!(
            "layer {}: it unpacks to more than 33554432 bytes, the most a layer may \
             (PODINIT_MAX_LAYER_SIZE)",
            b.layer
        )),
        "{}",
        p.stderr
    );
    assert_nothing_stored(&store);
    let layers: Vec<_> = std::fs::read_dir(store.join("layers"))
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(layers.is_empty(), "layers left: {layers:?}");
}

#[test]
#[ignore = "needs root: runs a registry and pulls into a store"]
fn registry_basic_auth_takes_the_right_login_only() {
    common::require_root();
    let tmp = TempDir::new("reg-basic");
    let auth = Auth::Basic {
        user: "podinit".into(),
        password: "s3cret".into(),
    };
    let reg = Registry::start("reg-basic-srv", &auth, None);
    reg.push(
        &archive(tmp.path()),
        &format!("{REPO}:1"),
        Some("podinit:s3cret"),
    );
    let store = tmp.path().join("store");
    let name = format!("{}/{REPO}:1", reg.host());
    let p = pull(&store, &name, &[]);
    assert_eq!(p.code, 1, "{}", p.stderr);
    assert!(
        p.stderr.contains("401 Unauthorized") && p.stderr.contains("none is given"),
        "{}",
        p.stderr
    );
    let p = pull(&store, &name, &["--creds", "podinit:wrong"]);
    assert_eq!(p.code, 1, "{}", p.stderr);
    assert!(
        p.stderr.contains("401 Unauthorized")
            && p.stderr.contains("refused the login of \"podinit\""),
        "{}",
        p.stderr
    );
    assert_nothing_stored(&store);
    // The login from a docker config, as ~/.docker/config.json or a pull secret gives it.
    let cfg = tmp.path().join("docker");
    std::fs::create_dir_all(&cfg).unwrap();
    let auth = registry::b64(b"podinit:s3cret");
    std::fs::write(
        cfg.join("config.json"),
        format!(
            r#"{{"auths":{{"http://{}/":{{"auth":"{auth}"}}}}}}"#,
            reg.host()
        ),
    )
    .unwrap();
    let p = pull_env(&store, &name, &[], &[("DOCKER_CONFIG", &cfg)]);
    assert_pulled(&reg, &store, &p, &name);
    let store2 = tmp.path().join("store2");
    let p = pull(&store2, &name, &["--creds", "podinit:s3cret"]);
    assert_pulled(&reg, &store2, &p, &name);
}

#[test]
#[ignore = "needs root: runs a registry and pulls into a store"]
fn registry_token_auth_gets_a_bearer_token() {
    common::require_root();
    let tmp = TempDir::new("reg-token");
    let tokens = TokenServer::start(tmp.path(), "podinit", "t0ken");
    let reg = Registry::start("reg-token-srv", &tokens.auth(), None);
    reg.push(
        &archive(tmp.path()),
        &format!("{REPO}:1"),
        Some("podinit:t0ken"),
    );
    let store = tmp.path().join("store");
    let name = format!("{}/{REPO}:1", reg.host());
    let p = pull(&store, &name, &["--creds", "podinit:wrong"]);
    assert_eq!(p.code, 1, "{}", p.stderr);
    assert!(
        p.stderr.contains("token server") && p.stderr.contains("refused the login of \"podinit\""),
        "{}",
        p.stderr
    );
    assert_nothing_stored(&store);
    let p = pull(&store, &name, &["--creds", "podinit:t0ken"]);
    assert_pulled(&reg, &store, &p, &name);
}

#[test]
#[ignore = "needs root: runs a registry and pulls into a store"]
fn registry_tls_needs_its_ca() {
    common::require_root();
    let tmp = TempDir::new("reg-tls");
    let certs = make_certs(tmp.path());
    let reg = Registry::start("reg-tls-srv", &Auth::None, Some(&certs));
    reg.push(&archive(tmp.path()), &format!("{REPO}:1"), None);
    let store = tmp.path().join("store");
    let name = format!("{}/{REPO}:1", reg.host());
    let p = pull(&store, &name, &[]);
    assert_eq!(p.code, 1, "{}", p.stderr);
    assert!(
        p.stderr.contains("TLS handshake") && p.stderr.contains("certificate"),
        "{}",
        p.stderr
    );
    assert_nothing_stored(&store);
    let ca = certs.ca.to_str().unwrap();
    let p = pull(&store, &name, &["--registry-ca", ca]);
    assert_pulled(&reg, &store, &p, &name);
}

#[test]
#[ignore = "needs root: pulls into a store"]
fn registry_that_never_answers_times_out() {
    common::require_root();
    let tmp = TempDir::new("reg-hang");
    // Accepts (the kernel's backlog does) and never says a word.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let store = tmp.path().join("store");
    let name = format!("{}/{REPO}:1", l.local_addr().unwrap());
    let start = Instant::now();
    let p = pull(&store, &name, &["--timeout", "2"]);
    assert_eq!(p.code, 1, "{}", p.stderr);
    assert!(
        p.stderr.contains("no answer for 2s (the registry hangs)"),
        "{}",
        p.stderr
    );
    assert!(start.elapsed() < LIMIT);
    assert_nothing_stored(&store);
    drop(l);
}

/// This machine's OCI architecture and another.
fn arches() -> (&'static str, &'static str) {
    match std::env::consts::ARCH {
        "x86_64" => ("amd64", "arm64"),
        "aarch64" => ("arm64", "amd64"),
        other => panic!("no OCI architecture known for {other}"),
    }
}

/// Turns the single-platform archive into one whose index has two platforms: this
/// machine's manifest and another's (same layer, its own config).
fn two_platform_archive(dir: &Path) -> PathBuf {
    use podinit::image::digest::Digest;
    let src = archive(dir);
    let layout = dir.join("layout");
    std::fs::create_dir_all(&layout).unwrap();
    let mut c = Command::new("tar");
    c.arg("-xf").arg(&src).arg("-C").arg(&layout);
    assert!(run_bounded(c, LIMIT).status.success());
    let blob = |d: &str| {
        layout
            .join("blobs/sha256")
            .join(d.trim_start_matches("sha256:"))
    };
    let put = |v: &serde_json::Value| -> (String, usize) {
        let b = serde_json::to_vec(v).unwrap();
        let d = Digest::of(&b).to_string();
        std::fs::write(blob(&d), &b).unwrap();
        (d, b.len())
    };
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(layout.join("index.json")).unwrap()).unwrap();
    let m_desc = &index["manifests"][0];
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(blob(m_desc["digest"].as_str().unwrap())).unwrap())
            .unwrap();
    let config: serde_json::Value = serde_json::from_slice(
        &std::fs::read(blob(manifest["config"]["digest"].as_str().unwrap())).unwrap(),
    )
    .unwrap();
    let (this, other) = arches();
    let mut out = vec![];
    for arch in [this, other] {
        let mut cfg = config.clone();
        cfg["architecture"] = arch.into();
        let (cd, cl) = put(&cfg);
        let mut m = manifest.clone();
        m["config"]["digest"] = cd.clone().into();
        m["config"]["size"] = cl.into();
        let (md, ml) = put(&m);
        out.push(serde_json::json!({
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": md, "size": ml,
            "platform": {"os": "linux", "architecture": arch},
        }));
    }
    let (id, il) = put(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": out,
    }));
    let top = serde_json::json!({"schemaVersion": 2, "manifests": [{
        "mediaType": "application/vnd.oci.image.index.v1+json", "digest": id, "size": il,
        "annotations": {"org.opencontainers.image.ref.name": "1"},
    }]});
    std::fs::write(layout.join("index.json"), top.to_string()).unwrap();
    let archive = dir.join("two.tar");
    let mut c = Command::new("tar");
    c.arg("-cf").arg(&archive).arg("-C").arg(&layout).arg(".");
    assert!(run_bounded(c, LIMIT).status.success());
    archive
}

#[test]
#[ignore = "needs root: runs a registry and pulls into a store"]
fn registry_index_pulls_this_platform_only() {
    common::require_root();
    let tmp = TempDir::new("reg-index");
    let reg = Registry::start("reg-index-srv", &Auth::None, None);
    let archive = two_platform_archive(tmp.path());
    let mut c = Command::new("skopeo");
    c.args(["copy", "-q", "--all", "--dest-tls-verify=false"])
        .arg(format!("oci-archive:{}", archive.display()))
        .arg(format!("docker://{}/{REPO}:1", reg.host()));
    let o = run_bounded(c, LIMIT);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let index = reg.tag_digest(REPO, "1");
    // skopeo compresses the layer on the way, so the digests are the registry's.
    let manifests: serde_json::Value = serde_json::from_slice(&reg.blob(&index)).unwrap();
    let of = |arch: &str| -> String {
        let m = manifests["manifests"].as_array().unwrap();
        let m = m
            .iter()
            .find(|m| m["platform"]["architecture"] == arch)
            .unwrap();
        m["digest"].as_str().unwrap().to_string()
    };
    let this_manifest = of(arches().0);
    let other: serde_json::Value = serde_json::from_slice(&reg.blob(&of(arches().1))).unwrap();
    let other_config = other["config"]["digest"].as_str().unwrap().to_string();
    let store = tmp.path().join("store");
    let name = format!("{}/{REPO}:1", reg.host());
    let p = pull(&store, &name, &[]);
    assert_eq!(p.code, 0, "{}", p.stderr);
    assert_eq!(p.stdout, index, "the name points at the index");
    let s = Store::open(&store).unwrap();
    let img = s.get(&name).unwrap().expect("pulled image");
    assert_eq!(img.digest.to_string(), index);
    let has = |d: &str| s.has_blob(&podinit::image::digest::Digest::parse(d).unwrap());
    assert!(has(&index) && has(&this_manifest));
    assert!(
        !has(&other_config),
        "the other platform's config was not fetched"
    );
    assert_eq!(
        img.config.architecture().to_string(),
        arches().0,
        "this machine's config"
    );
}

/// A registry stand-in that lies about sizes: tag `short` has a layer whose descriptor
/// says more bytes than the registry serves (and announces), tag `cut` a layer whose
/// connection closes half way through the announced length.
fn lying_registry() -> (
    String,
    std::thread::JoinHandle<()>,
    std::sync::Arc<std::sync::atomic::AtomicBool>,
) {
    use podinit::image::digest::Digest;
    use std::io::{BufRead, BufReader, Write};
    use std::sync::atomic::{AtomicBool, Ordering};
    let layer = vec![7u8; 100_000];
    let config =
        br#"{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}"#;
    let manifest = |size: usize| {
        serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                       "digest": Digest::of(config).to_string(), "size": config.len()},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                        "digest": Digest::of(&layer).to_string(), "size": size}],
        }))
        .unwrap()
    };
    let (short, cut) = (manifest(layer.len() + 10), manifest(layer.len()));
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let host = l.local_addr().unwrap().to_string();
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let t = std::thread::spawn(move || {
        // Which manifest the last request asked for decides how the layer is served.
        let mut cut_next = false;
        for c in l.incoming() {
            if st.load(Ordering::SeqCst) {
                break;
            }
            let Ok(mut c) = c else { continue };
            let mut first = String::new();
            let mut r = BufReader::new(c.try_clone().unwrap());
            if r.read_line(&mut first).is_err() {
                continue;
            }
            loop {
                let mut line = String::new();
                if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
            }
            let target = first.split(' ').nth(1).unwrap_or("").to_string();
            let head = |len: usize, t: &str| {
                format!("HTTP/1.1 200 OK\r\nContent-Type: {t}\r\nContent-Length: {len}\r\n\r\n")
            };
            let oci = "application/vnd.oci.image.manifest.v1+json";
            let out: Vec<u8> = if target.ends_with("/manifests/short") {
                cut_next = false;
                [head(short.len(), oci).as_bytes(), &short].concat()
            } else if target.ends_with("/manifests/cut") {
                cut_next = true;
                [head(cut.len(), oci).as_bytes(), &cut].concat()
            } else if target.contains(&Digest::of(config).hex) {
                [
                    head(config.len(), "application/octet-stream").as_bytes(),
                    config,
                ]
                .concat()
            } else if cut_next {
                [
                    head(layer.len(), "application/octet-stream").as_bytes(),
                    &layer[..layer.len() / 2],
                ]
                .concat()
            } else {
                [
                    head(layer.len(), "application/octet-stream").as_bytes(),
                    &layer,
                ]
                .concat()
            };
            let _ = c.write_all(&out);
        }
    });
    (host, t, stop)
}

#[test]
#[ignore = "needs root: pulls into a store"]
fn registry_lying_about_sizes_is_a_clear_error_and_stores_nothing() {
    common::require_root();
    let tmp = TempDir::new("reg-lies");
    let (host, t, stop) = lying_registry();
    let store = tmp.path().join("store");
    let p = pull(&store, &format!("{host}/{REPO}:short"), &[]);
    assert_eq!(p.code, 1, "{}", p.stderr);
    assert!(
        p.stderr.contains(&format!("pull {host}/{REPO}:short"))
            && p.stderr
                .contains("the registry announces 100000 bytes, its descriptor says 100010"),
        "{}",
        p.stderr
    );
    assert_nothing_stored(&store);
    let p = pull(&store, &format!("{host}/{REPO}:cut"), &[]);
    assert_eq!(p.code, 1, "{}", p.stderr);
    assert!(
        p.stderr
            .contains("connection closed after 50000 of the 100000 bytes announced"),
        "{}",
        p.stderr
    );
    assert_nothing_stored(&store);
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let _ = std::net::TcpStream::connect(&host);
    t.join().unwrap();
}
