//! Pods on real images: images made from busybox-static
//! (tests/fixtures/images_pod/make-images, scripts/make-oci-image), imported into a store
//! of the test's own with `podinit images import`, run by `podinit run --images`. What the
//! containers see is checked from inside them; status, events and what is left from
//! outside.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

const BASE: &str = "podinit.test/imgpod/base:1";
const LAYERED: &str = "podinit.test/imgpod/layered:v1";
const CONFIG: &str = "podinit.test/imgpod/config:v1";

/// A private image store holding the test images; removed on drop, even on failure.
struct Images {
    dir: PathBuf,
    store: PathBuf,
    /// Reference → digest of its manifest.
    digests: serde_json::Value,
}

impl Images {
    fn new(tag: &str) -> Images {
        let dir =
            std::env::temp_dir().join(format!("podinit-it-images-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let archives = dir.join("archives");
        std::fs::create_dir_all(&archives).unwrap();
        let mut images = Images {
            store: dir.join("store"),
            dir,
            digests: serde_json::Value::Null,
        };
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let made = Command::new(root.join("tests/fixtures/images_pod/make-images"))
            .arg(&archives)
            .output_within(CLIENT_LIMIT);
        assert!(made.status.success(), "make-images: {made:?}");
        let base = archives.join("base.tar");
        let made = Command::new(root.join("scripts/make-oci-image"))
            .arg(&base)
            .arg(BASE)
            .output_within(CLIENT_LIMIT);
        assert!(made.status.success(), "make-oci-image: {made:?}");
        for a in ["base.tar", "layered.tar", "config.tar"] {
            let out = Command::new(bin())
                .args(["images", "import"])
                .arg(archives.join(a))
                .arg("--images")
                .arg(&images.store)
                .output_within(CLIENT_LIMIT);
            assert!(
                out.status.success(),
                "podinit images import {a}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let digests = std::fs::read(archives.join("digests.json")).unwrap();
        images.digests = serde_json::from_slice(&digests).unwrap();
        images
    }

    fn command(&self, p: &TestPod) -> Command {
        let mut c = p.command();
        c.arg("--images").arg(&self.store);
        c
    }

    fn start(&self, p: &mut TestPod) {
        let c = self.command(p);
        p.start_with(c);
    }
}

impl Drop for Images {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The lower layers of the container's root overlay, from the root mount's line of its
/// mountinfo as a container prints it (`awk '$5 == "/"' /proc/self/mountinfo`).
fn lowerdirs(log: &str) -> Vec<String> {
    let line = log
        .lines()
        .find(|l| l.contains(" - overlay "))
        .unwrap_or_else(|| panic!("no overlay root in {log}"));
    let opts = line.rsplit(' ').next().unwrap();
    let lower = opts
        .split(',')
        .find_map(|o| o.strip_prefix("lowerdir="))
        .unwrap_or_else(|| panic!("no lowerdir in {line}"));
    lower.split(':').map(str::to_string).collect()
}

fn stop(p: &mut TestPod) -> Outcome {
    p.signal(libc::SIGTERM);
    p.wait(LIMIT)
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn a_pod_of_three_images_runs_with_what_each_image_configures() {
    require_root();
    let images = Images::new("three");
    let mut p = TestPod::new(
        "img3",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: NAME}}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 20
  initContainers:
  - name: init
    image: {BASE}
    command: [sh, -c, "echo init-ran"]
  containers:
  - name: layered
    image: {LAYERED}
    args:
    - |
      trap 'exit 0' TERM
      test -e /etc/removed || echo removed-is-gone
      echo data=$(ls /data)
      echo layer=$(cat /layer)
      awk '$5 == "/"' /proc/self/mountinfo
      echo done
      sleep 3600 & wait
  - name: config
    image: {CONFIG}
    env: [{{name: OVERRIDE, value: pod}}]
"#
        ),
    );
    images.start(&mut p);
    p.wait_status(LIMIT, |s| {
        s["status"]["containerStatuses"]
            .as_array()
            .is_some_and(|a| a.iter().all(|c| c["ready"] == true))
    });
    assert!(p.log("init", 0).contains("init-ran"));
    // The layers applied in order: a whiteout removed a file of a lower layer, an opaque
    // directory hid what was below it, a file of the top layer replaced the one beneath.
    let layered = p.wait_log("layered", 0, LIMIT, "done");
    assert!(layered.contains("removed-is-gone"), "{layered}");
    assert!(layered.contains("data=new\n"), "{layered}");
    assert!(layered.contains("layer=top"), "{layered}");
    let lowers = lowerdirs(&layered);
    assert_eq!(lowers.len(), 3, "{lowers:?}");
    let store = images.store.canonicalize().unwrap();
    for l in &lowers {
        assert!(
            Path::new(l).starts_with(&store),
            "{l} outside {}",
            store.display()
        );
    }
    // Entrypoint and Cmd, Env merged under the container's, WorkingDir, User by name.
    let config = p.wait_log("config", 0, LIMIT, "ready");
    assert!(config.contains("cwd=/srv/app"), "{config}");
    assert!(
        config.contains("id=uid=1000(app) gid=50(staff)"),
        "{config}"
    );
    assert!(config.contains("FROM_IMAGE=yes OVERRIDE=pod"), "{config}");

    let status = p.wait_status(LIMIT, |_| true);
    for (name, image) in [("init", BASE), ("layered", LAYERED), ("config", CONFIG)] {
        let c = container_status(&status, name);
        assert_eq!(c["image"], image, "{c}");
        let repo = image.rsplit_once(':').unwrap().0;
        let id = c["imageID"].as_str().unwrap();
        assert!(id.starts_with(&format!("{repo}@sha256:")), "{c}");
        if let Some(d) = images.digests[image].as_str() {
            assert_eq!(id, format!("{repo}@{d}"));
        }
        assert!(
            has_event(
                &p,
                "Pulled",
                &format!("Container image \"{image}\" already present on machine and can be accessed by the pod")
            ),
            "{:#?}",
            events(&p)
        );
    }
    // The image's StopSignal (SIGUSR1) is what stops the config container.
    let out = stop(&mut p);
    assert!(
        p.log("config", 0).contains("got-usr1"),
        "{}",
        p.log("config", 0)
    );
    let c = container_status(&out.status, "config");
    assert_eq!(c["state"]["terminated"]["exitCode"], 0, "{c}");
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn image_volumes_mount_a_bundle_and_a_stored_image_read_only() {
    require_root();
    let images = Images::new("imgvol");
    let mut p = TestPod::new(
        "imgvol",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: NAME}}
spec:
  restartPolicy: Never
  containers:
  - name: c
    image: {BASE}
    command:
    - sh
    - -c
    - |
      test -e /iv/etc/removed || echo removed-is-gone
      echo data=$(ls /iv/data) layer=$(cat /iv/layer) sub=$(ls /sub)
      touch /iv/x 2>/dev/null && echo iv=writable || echo iv=readonly
      touch /bv/x 2>/dev/null && echo bv=writable || echo bv=readonly
      /iv/bin/busybox true && echo exec-ok
      test -x /bv/bin/busybox && echo bundle-has-busybox
      awk '$5 == "/iv"' /proc/self/mountinfo
    volumeMounts:
    - {{name: iv, mountPath: /iv, readOnly: true}}
    - {{name: iv, mountPath: /sub, subPath: data}}
    - {{name: bv, mountPath: /bv}}
  volumes:
  - {{name: iv, image: {{reference: "{LAYERED}"}}}}
  - {{name: bv, image: {{reference: busybox, pullPolicy: IfNotPresent}}}}
"#
        ),
    );
    images.start(&mut p);
    let out = p.wait(LIMIT);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let log = p.log("c", 0);
    // The stored image's layers as one read-only tree, whiteouts and opaque directories
    // applied; the bundle's rootfs read-only though the mount does not ask for it.
    for want in [
        "removed-is-gone",
        "data=new layer=top sub=new",
        "iv=readonly",
        "bv=readonly",
        "exec-ok",
        "bundle-has-busybox",
    ] {
        assert!(log.lines().any(|l| l == want), "{want:?} not in {log}");
    }
    // The store's unpacked layers themselves: every pod of the image shares them.
    let lowers = lowerdirs(&log);
    assert_eq!(lowers.len(), 3, "{lowers:?}");
    let store = images.store.canonicalize().unwrap();
    for l in &lowers {
        assert!(
            Path::new(l).starts_with(&store),
            "{l} outside {}",
            store.display()
        );
    }
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn an_image_volume_the_store_lacks_under_never_waits_in_err_image_never_pull() {
    require_root();
    let images = Images::new("imgvolnever");
    let image = "podinit.test/imgpod/absent:v1";
    let mut p = TestPod::new(
        "imgvolnever",
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: NAME}}\nspec:\n  containers:\n  - name: c\n    image: {BASE}\n    command: [sleep, '3600']\n    volumeMounts: [{{name: v, mountPath: /v}}]\n  volumes: [{{name: v, image: {{reference: '{image}', pullPolicy: Never}}}}]\n"
        ),
    );
    images.start(&mut p);
    let s = p.wait_status(LIMIT, |s| {
        s["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "ErrImageNeverPull"
    });
    assert_eq!(
        container_status(&s, "c")["state"]["waiting"]["message"],
        format!("Container image \"{image}\" is not present with pull policy of Never")
    );
    stop(&mut p);
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn never_with_an_image_the_store_lacks_waits_in_err_image_never_pull() {
    require_root();
    let images = Images::new("never");
    let image = "podinit.test/imgpod/absent:v1";
    let mut p = TestPod::new(
        "imgnever",
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: NAME}}\nspec:\n  imagePullSecrets: [{{name: regcred}}]\n  containers:\n  - name: c\n    image: {image}\n    imagePullPolicy: Never\n"
        ),
    );
    images.start(&mut p);
    let s = p.wait_status(LIMIT, |s| {
        s["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "ErrImageNeverPull"
    });
    let c = container_status(&s, "c");
    assert_eq!(
        c["state"]["waiting"]["message"],
        format!("Container image \"{image}\" is not present with pull policy of Never")
    );
    assert_eq!(c["imageID"], "", "never pulled, no ID");
    assert_eq!(s["status"]["phase"], "Pending");
    wait_event(
        &p,
        "ErrImageNeverPull",
        "is not present with pull policy of Never",
    );
    wait_event(&p, "Failed", "Error: ErrImageNeverPull");
    assert!(!has_event(&p, "Pulling", ""), "{:#?}", events(&p));
    // The manifest has no Secret `regcred`: kubelet's warning, and the pod goes on.
    wait_event(
        &p,
        "FailedToRetrieveImagePullSecret",
        "Unable to retrieve some image pull secrets (regcred); attempting to pull the image may not succeed.",
    );
    stop(&mut p);
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn a_registry_nobody_answers_is_err_image_pull_then_image_pull_back_off() {
    require_root();
    let images = Images::new("backoff");
    // Port 1 on loopback: plain HTTP (loopback), and nobody listens.
    let image = "127.0.0.1:1/imgpod/none:v1";
    let mut p = TestPod::new(
        "imgpull",
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: NAME}}\nspec:\n  containers:\n  - name: c\n    image: {image}\n"
        ),
    );
    images.start(&mut p);
    let waiting = |reason: &'static str| {
        move |s: &serde_json::Value| {
            s["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == reason
        }
    };
    let s = p.wait_status(LIMIT, waiting("ErrImagePull"));
    let msg = container_status(&s, "c")["state"]["waiting"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(!msg.is_empty(), "{s}");
    wait_event(&p, "Pulling", &format!("Pulling image \"{image}\""));
    wait_event(&p, "Failed", &format!("Failed to pull image \"{image}\": "));
    wait_event(&p, "Failed", "Error: ErrImagePull");
    // The second failure's back-off outlasts kubelet's next sync.
    let s = p.wait_status(LIMIT, waiting("ImagePullBackOff"));
    // kubelet's message: the back-off, then why the last pull failed.
    let waiting = container_status(&s, "c")["state"]["waiting"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        waiting.starts_with(&format!(
            "Back-off pulling image \"{image}\": ErrImagePull: "
        )),
        "{waiting}"
    );
    wait_event(
        &p,
        "BackOff",
        &format!("Back-off pulling image \"{image}\""),
    );
    wait_event(&p, "Failed", "Error: ImagePullBackOff");
    let backoff = events(&p)
        .into_iter()
        .find(|e| e["reason"] == "BackOff")
        .unwrap();
    assert_eq!(
        backoff["type"], "Normal",
        "kubelet's BackOff of a pull is Normal"
    );
    assert_eq!(backoff["involvedObject"]["fieldPath"], "spec.containers{c}");
    assert_eq!(container_status(&s, "c")["restartCount"], 0);
    let out = stop(&mut p);
    assert_ne!(out.code, 3, "{}", out.stderr);
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn two_pods_on_one_image_share_its_unpacked_layers() {
    require_root();
    let images = Images::new("share");
    let yaml = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: NAME}}
spec:
  containers:
  - name: c
    image: {LAYERED}
    args: ["trap 'exit 0' TERM; awk '$5 == \"/\"' /proc/self/mountinfo; echo written > /layer; echo done; sleep 3600 & wait"]
"#
    );
    let mut a = TestPod::new("imgsharea", &yaml);
    let mut b = TestPod::new("imgshareb", &yaml);
    images.start(&mut a);
    images.start(&mut b);
    let (la, lb) = (
        a.wait_log("c", 0, LIMIT, "done"),
        b.wait_log("c", 0, LIMIT, "done"),
    );
    let (da, db) = (lowerdirs(&la), lowerdirs(&lb));
    assert_eq!(da, db, "both pods run on the same layer directories");
    // A container's writes go to its own upper layer, never to the shared layers.
    for l in &da {
        let top = Path::new(l).join("layer");
        if let Ok(t) = std::fs::read_to_string(&top) {
            assert_ne!(t, "written\n", "{} was written through", top.display());
        }
    }
    for p in [&mut a, &mut b] {
        stop(p);
        p.assert_nothing_left();
    }
    // The layers outlive the pods, in the store.
    assert!(da.iter().all(|l| Path::new(l).is_dir()), "{da:?}");
}

/// `images rm` of the name a running pod uses is refused in one line, as containerd and
/// podman refuse an image in use; another name is not in use and goes; `--force` removes
/// the name and leaves the layers the pod runs on until it ends.
#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn images_rm_refuses_a_name_in_use_unless_forced() {
    require_root();
    let images = Images::new("rmuse");
    let yaml = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: NAME}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: {LAYERED}
    args: ["trap 'exit 0' TERM; awk '$5 == \"/\"' /proc/self/mountinfo; echo done; sleep 3600 & wait"]
"#
    );
    let mut p = TestPod::new("imgrmuse", &yaml);
    images.start(&mut p);
    let layers = lowerdirs(&p.wait_log("c", 0, LIMIT, "done"));
    let images_cmd = |args: &[&str]| {
        Command::new(bin())
            .arg("images")
            .arg("--images")
            .arg(&images.store)
            .args(args)
            .output_within(CLIENT_LIMIT)
    };
    let names = || String::from_utf8_lossy(&images_cmd(&["ls", "-q"]).stdout).into_owned();
    let o = images_cmd(&["rm", LAYERED]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert_eq!(err.lines().count(), 1, "one line: {err:?}");
    assert!(
        err.contains(&format!("image docker.io/{LAYERED}"))
            || err.contains(&format!("image {LAYERED}")),
        "{err}"
    );
    assert!(err.contains("is in use by a running container"), "{err}");
    assert!(names().contains(LAYERED), "refused, yet gone: {}", names());
    // A name no container runs by goes, whatever layers it shares.
    let o = images_cmd(&["rm", BASE]);
    assert!(o.status.success(), "{o:?}");
    assert!(!names().contains(BASE));
    // --force: the name goes, the layers the pod runs on stay while it runs.
    let o = images_cmd(&["rm", "--force", LAYERED]);
    assert!(o.status.success(), "{o:?}");
    assert!(!names().contains(LAYERED), "{}", names());
    assert!(layers.iter().all(|l| Path::new(l).is_dir()), "{layers:?}");
    let v = p.wait_status(LIMIT, |_| true);
    assert!(container_status(&v, "c")["state"]["running"].is_object());
    stop(&mut p);
    p.assert_nothing_left();
}

/// A private `docker-registry` on 127.0.0.1 with htpasswd auth (Debian's package,
/// installed when missing); killed and removed on drop.
struct Registry {
    child: std::process::Child,
    dir: PathBuf,
    addr: String,
}

const REG_USER: &str = "puller";
const REG_PASSWORD: &str = "s3cret";

impl Registry {
    fn start(tag: &str) -> Registry {
        for (bin, pkg) in [("docker-registry", "docker-registry"), ("skopeo", "skopeo")] {
            let found = Command::new("sh")
                .args(["-c", &format!("command -v {bin}")])
                .output_within(CLIENT_LIMIT)
                .status
                .success();
            if !found {
                let ok = Command::new("apt-get")
                    .args(["install", "-y", "--no-install-recommends", pkg])
                    .env("DEBIAN_FRONTEND", "noninteractive")
                    .output_within(Duration::from_secs(300))
                    .status
                    .success();
                assert!(ok, "installing {pkg}");
            }
        }
        let dir =
            std::env::temp_dir().join(format!("podinit-it-registry-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("data")).unwrap();
        let hash = Command::new("python3")
            .args([
                "-c",
                "import crypt,sys; print(crypt.crypt(sys.argv[1], crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=16)))",
                REG_PASSWORD,
            ])
            .output_within(CLIENT_LIMIT);
        assert!(hash.status.success(), "{hash:?}");
        let hash = String::from_utf8(hash.stdout).unwrap();
        std::fs::write(dir.join("htpasswd"), format!("{REG_USER}:{}", hash.trim())).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = format!("127.0.0.1:{port}");
        std::fs::write(
            dir.join("config.yml"),
            format!(
                "version: 0.1\nlog: {{level: error}}\nhttp: {{addr: {addr}}}\nstorage: {{filesystem: {{rootdirectory: {}}}}}\nauth: {{htpasswd: {{realm: podinit-test, path: {}}}}}\n",
                dir.join("data").display(),
                dir.join("htpasswd").display()
            ),
        )
        .unwrap();
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(dir.join("config.yml"))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("starting docker-registry");
        let reg = Registry { child, dir, addr };
        let deadline = std::time::Instant::now() + LIMIT;
        while std::net::TcpStream::connect(&reg.addr).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "the registry never listened"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        reg
    }

    /// A docker config (`.dockerconfigjson`) with the registry's login.
    fn docker_config(&self) -> String {
        // base64 of user:password, as `docker login` writes it.
        let out = Command::new("sh")
            .args([
                "-c",
                &format!("printf %s '{REG_USER}:{REG_PASSWORD}' | base64 -w0"),
            ])
            .output_within(CLIENT_LIMIT);
        let auth = String::from_utf8(out.stdout).unwrap();
        format!(r#"{{"auths":{{"{}":{{"auth":"{auth}"}}}}}}"#, self.addr)
    }

    /// Push an OCI archive as `repo:tag` with skopeo.
    fn push(&self, archive: &Path, repo_tag: &str) {
        let out = Command::new("skopeo")
            .arg("copy")
            .arg(format!("oci-archive:{}", archive.display()))
            .arg(format!("docker://{}/{repo_tag}", self.addr))
            .args(["--dest-tls-verify=false", "--dest-creds"])
            .arg(format!("{REG_USER}:{REG_PASSWORD}"))
            .output_within(CLIENT_LIMIT);
        assert!(out.status.success(), "skopeo copy: {out:?}");
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn an_image_is_pulled_with_the_pods_pull_secret_and_runs() {
    require_root();
    let images = Images::new("pull");
    let reg = Registry::start("pull");
    reg.push(
        &images.dir.join("archives/layered.tar"),
        "imgpod/layered:v1",
    );
    let image = format!("{}/imgpod/layered:v1", reg.addr);
    let config = reg.docker_config();
    let pod = |secrets: bool| {
        format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: NAME}}
spec:
  {}
  containers:
  - name: c
    image: {image}
    imagePullPolicy: Always
    args: ["trap 'exit 0' TERM; echo layer=$(cat /layer); echo done; sleep 3600 & wait"]
---
apiVersion: v1
kind: Secret
metadata: {{name: regcred}}
type: kubernetes.io/dockerconfigjson
stringData:
  .dockerconfigjson: '{config}'
"#,
            if secrets {
                "imagePullSecrets: [{name: regcred}]"
            } else {
                "restartPolicy: Always"
            }
        )
    };
    // Without the Secret, the registry refuses the pull.
    let mut denied = TestPod::new("imgdenied", &pod(false));
    images.start(&mut denied);
    denied.wait_status(LIMIT, |s| {
        s["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "ErrImagePull"
    });
    stop(&mut denied);
    denied.assert_nothing_left();

    let mut p = TestPod::new("imgpulled", &pod(true));
    images.start(&mut p);
    let log = p.wait_log("c", 0, LIMIT, "done");
    assert!(log.contains("layer=top"), "{log}");
    wait_event(&p, "Pulling", &format!("Pulling image \"{image}\""));
    wait_event(
        &p,
        "Pulled",
        &format!("Successfully pulled image \"{image}\" in "),
    );
    let s = p.wait_status(LIMIT, |_| true);
    let c = container_status(&s, "c");
    assert_eq!(c["image"], image.as_str());
    let repo = format!("{}/imgpod/layered@sha256:", reg.addr);
    assert!(c["imageID"].as_str().unwrap().starts_with(&repo), "{c}");
    stop(&mut p);
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn an_image_volume_is_pulled_with_the_pods_pull_secret_and_a_failed_pull_waits_as_kubelet() {
    require_root();
    let images = Images::new("volpull");
    let reg = Registry::start("volpull");
    reg.push(
        &images.dir.join("archives/layered.tar"),
        "imgpod/layered:v1",
    );
    let image = format!("{}/imgpod/layered:v1", reg.addr);
    let config = reg.docker_config();
    let pod = |secrets: bool| {
        format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: NAME}}
spec:
  {}
  containers:
  - name: c
    image: {BASE}
    command: [sh, -c, "trap 'exit 0' TERM; echo layer=$(cat /iv/layer); echo done; sleep 3600 & wait"]
    volumeMounts: [{{name: iv, mountPath: /iv}}]
  volumes: [{{name: iv, image: {{reference: "{image}"}}}}]
---
apiVersion: v1
kind: Secret
metadata: {{name: regcred}}
type: kubernetes.io/dockerconfigjson
stringData:
  .dockerconfigjson: '{config}'
"#,
            if secrets {
                "imagePullSecrets: [{name: regcred}]"
            } else {
                "restartPolicy: Always"
            }
        )
    };
    let waiting = |reason: &'static str| {
        move |s: &serde_json::Value| {
            s["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == reason
        }
    };
    // Without the Secret the registry refuses the volume's pull: the container that
    // mounts it waits as for its own image, first ErrImagePull, then the back-off.
    let mut denied = TestPod::new("volpulldenied", &pod(false));
    images.start(&mut denied);
    denied.wait_status(LIMIT, waiting("ErrImagePull"));
    wait_event(&denied, "Pulling", &format!("Pulling image \"{image}\""));
    wait_event(
        &denied,
        "Failed",
        &format!("Failed to pull image \"{image}\": "),
    );
    wait_event(&denied, "Failed", "Error: ErrImagePull");
    let s = denied.wait_status(LIMIT, waiting("ImagePullBackOff"));
    let msg = container_status(&s, "c")["state"]["waiting"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        msg.starts_with(&format!(
            "Back-off pulling image \"{image}\": ErrImagePull: "
        )),
        "{msg}"
    );
    // The image manager's events name the pod, as for kubelet's `getImageVolumes`; the
    // container's own `Error:` event names it.
    let evs = events(&denied);
    let pulling = evs.iter().find(|e| e["reason"] == "Pulling").unwrap();
    assert_eq!(pulling["involvedObject"]["kind"], "Pod", "{pulling}");
    assert!(
        pulling["involvedObject"]["fieldPath"].is_null(),
        "{pulling}"
    );
    let error = evs
        .iter()
        .find(|e| e["message"] == "Error: ErrImagePull")
        .unwrap();
    assert_eq!(error["involvedObject"]["fieldPath"], "spec.containers{c}");
    assert_eq!(container_status(&s, "c")["restartCount"], 0);
    stop(&mut denied);
    denied.assert_nothing_left();

    // With it, the volume is pulled into the store and mounted.
    let mut p = TestPod::new("volpulled", &pod(true));
    images.start(&mut p);
    let log = p.wait_log("c", 0, LIMIT, "done");
    assert!(log.lines().any(|l| l == "layer=top"), "{log}");
    wait_event(&p, "Pulling", &format!("Pulling image \"{image}\""));
    wait_event(
        &p,
        "Pulled",
        &format!("Successfully pulled image \"{image}\" in "),
    );
    let listed = Command::new(bin())
        .args(["images", "ls", "--images"])
        .arg(&images.store)
        .output_within(CLIENT_LIMIT);
    let listed = String::from_utf8_lossy(&listed.stdout).to_string();
    assert!(
        listed.contains(&format!("{}/imgpod/layered", reg.addr)),
        "{listed}"
    );
    stop(&mut p);
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn an_image_pulled_with_a_secret_is_not_handed_to_a_pod_without_it() {
    require_root();
    let images = Images::new("ensure");
    let reg = Registry::start("ensure");
    reg.push(
        &images.dir.join("archives/layered.tar"),
        "imgpod/layered:v1",
    );
    let image = format!("{}/imgpod/layered:v1", reg.addr);
    let config = reg.docker_config();
    let pod = |secrets: bool, policy: &str| {
        format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: NAME}}
spec:
  {}
  containers:
  - name: c
    image: {image}
    imagePullPolicy: {policy}
    args: ["trap 'exit 0' TERM; echo layer=$(cat /layer); echo done; sleep 3600 & wait"]
---
apiVersion: v1
kind: Secret
metadata: {{name: regcred}}
type: kubernetes.io/dockerconfigjson
stringData:
  .dockerconfigjson: '{config}'
"#,
            if secrets {
                "imagePullSecrets: [{name: regcred}]"
            } else {
                "restartPolicy: Always"
            }
        )
    };
    let waiting = |reason: &'static str| {
        move |s: &serde_json::Value| {
            s["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == reason
        }
    };
    let pulled_dir = images.store.join("pull-records/pulled");
    let records = || -> Vec<String> {
        std::fs::read_dir(&pulled_dir)
            .map(|d| {
                d.map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
                    .collect()
            })
            .unwrap_or_default()
    };

    // Pod A pulls the image with its Secret: the store records which Secret pulled it.
    let mut a = TestPod::new("ensurea", &pod(true, "IfNotPresent"));
    images.start(&mut a);
    a.wait_log("c", 0, LIMIT, "done");
    wait_event(
        &a,
        "Pulled",
        &format!("Successfully pulled image \"{image}\" in "),
    );
    stop(&mut a);
    a.assert_nothing_left();
    let recs = records();
    assert_eq!(recs.len(), 1, "{recs:?}");
    let rec: serde_json::Value = serde_json::from_str(&recs[0]).unwrap();
    let repo = format!("{}/imgpod/layered", reg.addr);
    let secret = &rec["credentialMapping"][&repo]["kubernetesSecrets"][0];
    assert_eq!(rec["kind"], "ImagePulledRecord", "{rec}");
    assert_eq!(secret["name"], "regcred", "{rec}");
    assert_eq!(secret["namespace"], "default", "{rec}");
    assert_eq!(
        secret["credentialHash"].as_str().unwrap().len(),
        64,
        "{rec}"
    );
    assert!(!recs[0].contains(REG_PASSWORD), "the record keeps no login");

    // Pod B, without the Secret, does not get the image: kubelet pulls to verify, and
    // the registry refuses the anonymous pull.
    let mut b = TestPod::new("ensureb", &pod(false, "IfNotPresent"));
    images.start(&mut b);
    b.wait_status(LIMIT, waiting("ErrImagePull"));
    wait_event(&b, "Pulling", &format!("Pulling image \"{image}\""));
    wait_event(&b, "Failed", &format!("Failed to pull image \"{image}\": "));
    b.wait_status(LIMIT, waiting("ImagePullBackOff"));
    assert!(
        !events(&b).iter().any(|e| e["reason"] == "Pulled"),
        "{:#?}",
        events(&b)
    );
    stop(&mut b);
    b.assert_nothing_left();

    // Under `Never` it is refused outright, with kubelet's words for an absent image.
    let mut n = TestPod::new("ensuren", &pod(false, "Never"));
    images.start(&mut n);
    let s = n.wait_status(LIMIT, waiting("ErrImageNeverPull"));
    assert_eq!(
        container_status(&s, "c")["state"]["waiting"]["message"],
        format!("Container image \"{image}\" is not present with pull policy of Never").as_str()
    );
    stop(&mut n);
    n.assert_nothing_left();

    // Pod C presents the same Secret: the image is handed over without a pull.
    let mut c = TestPod::new("ensurec", &pod(true, "IfNotPresent"));
    images.start(&mut c);
    let log = c.wait_log("c", 0, LIMIT, "done");
    assert!(log.contains("layer=top"), "{log}");
    wait_event(
        &c,
        "Pulled",
        &format!(
            "Container image \"{image}\" already present on machine and can be accessed by the pod"
        ),
    );
    assert!(
        !events(&c).iter().any(|e| e["reason"] == "Pulling"),
        "{:#?}",
        events(&c)
    );
    stop(&mut c);
    c.assert_nothing_left();

    // The record goes with the image, once no name points at it (the imported copy of
    // the same image may share its digest).
    for name in [image.as_str(), LAYERED] {
        let out = Command::new(bin())
            .args(["images", "rm", name, "--images"])
            .arg(&images.store)
            .output_within(CLIENT_LIMIT);
        assert!(out.status.success(), "{out:?}");
    }
    assert!(records().is_empty(), "{:?}", records());
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn an_image_volume_under_always_asks_the_registry_again_at_each_pods_start() {
    require_root();
    let images = Images::new("volalways");
    let reg = Registry::start("volalways");
    let image = format!("{}/imgpod/data:v1", reg.addr);
    let config = reg.docker_config();
    let manifest = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: NAME}}
spec:
  imagePullSecrets: [{{name: regcred}}]
  containers:
  - name: c
    image: {BASE}
    command: [sh, -c, "trap 'exit 0' TERM; echo layer=$(cat /iv/layer 2>/dev/null || echo none); echo done; sleep 3600 & wait"]
    volumeMounts: [{{name: iv, mountPath: /iv}}]
  volumes: [{{name: iv, image: {{reference: "{image}", pullPolicy: Always}}}}]
---
apiVersion: v1
kind: Secret
metadata: {{name: regcred}}
type: kubernetes.io/dockerconfigjson
stringData:
  .dockerconfigjson: '{config}'
"#
    );
    let pulled = |p: &TestPod| {
        wait_event(p, "Pulling", &format!("Pulling image \"{image}\""));
        wait_event(
            p,
            "Pulled",
            &format!("Successfully pulled image \"{image}\" in "),
        );
    };

    // The tag names the layered image: the first pod mounts its /layer.
    reg.push(&images.dir.join("archives/layered.tar"), "imgpod/data:v1");
    let mut first = TestPod::new("volalways1", &manifest);
    images.start(&mut first);
    let log = first.wait_log("c", 0, LIMIT, "done");
    assert!(log.lines().any(|l| l == "layer=top"), "{log}");
    pulled(&first);
    stop(&mut first);
    first.assert_nothing_left();

    // The tag moves to the base image, which has no /layer: under `Always` the next pod
    // asks the registry again and mounts what the tag names now, not the store's copy.
    reg.push(&images.dir.join("archives/base.tar"), "imgpod/data:v1");
    let mut second = TestPod::new("volalways2", &manifest);
    images.start(&mut second);
    let log = second.wait_log("c", 0, LIMIT, "done");
    assert!(log.lines().any(|l| l == "layer=none"), "{log}");
    pulled(&second);
    let stale = format!("Container image \"{image}\" already present");
    assert!(
        !events(&second)
            .iter()
            .any(|e| e["message"].as_str().unwrap_or("").starts_with(&stale)),
        "{:#?}",
        events(&second)
    );
    stop(&mut second);
    second.assert_nothing_left();
}
