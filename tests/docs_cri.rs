//! docs/cri.md §1 as a user follows it: its own config and CNI network, taken from the
//! page, run a private containerd (1.6, and 2 when the shared test tools hold it) with the
//! shim on its PATH, and a pod runs on the podinit handler and on runc's. The shim's state
//! and socket are under that containerd's state directory, nowhere shared.
//!
//! What the test changes in the snippets is its own isolation, not the recipe: the
//! directory (the page's `/var/lib/podinit-cri` becomes a temp dir), the pause and busybox
//! images imported under the page's names where the page pulls them (no registry is
//! reachable here), as the page says for a machine without CAP_SYS_RESOURCE,
//! `restrict_oom_score_adj`, and crictl's timeout, longer on a loaded machine.
//! The page's crictl commands run as written, with the crictl of the shared test tools.

mod common;
#[path = "common/cri.rs"]
mod cri;
#[path = "common/cri_client.rs"]
mod cri_client;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::OutputWithin;
use cri::Containerd;
use cri_client::{api, Client};

const PAGE_DIR: &str = "/var/lib/podinit-cri";

/// crictl from the shared test tools (`shared/cri-tools/bin` above the crate), else `PATH`'s.
fn crictl() -> Option<PathBuf> {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .map(|d| d.join("shared/cri-tools/bin/crictl"))
        .find(|p| p.is_file())
        .or_else(|| {
            std::env::split_paths(&std::env::var_os("PATH")?)
                .map(|d| d.join("crictl"))
                .find(|p| p.is_file())
        })
}

/// The one json block of the page's §1 that holds `key`.
fn json_block(key: &str) -> String {
    let blocks: Vec<String> = snippets("json")
        .into_iter()
        .filter(|b| b.contains(key))
        .collect();
    let [b] = &blocks[..] else {
        panic!("docs/cri.md §1 has not one json block with {key}")
    };
    b.clone()
}

/// The fenced blocks of `lang` in the page's §1.
fn snippets(lang: &str) -> Vec<String> {
    let page =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/cri.md")).unwrap();
    let s1 = &page[page.find("## §1").unwrap()..page.find("## §2").unwrap()];
    let fence = format!("```{lang}\n");
    s1.match_indices(&fence)
        .map(|(i, _)| {
            let body = &s1[i + fence.len()..];
            body[..body.find("```").unwrap()].to_string()
        })
        .collect()
}

/// Everything the run made, removed on drop, failed or not.
struct Run {
    dir: PathBuf,
    containerd: Option<Child>,
    bridge: String,
}

impl Drop for Run {
    fn drop(&mut self) {
        if let Some(c) = self.containerd.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let mut mounts: Vec<String> = std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap()
            .lines()
            .filter_map(|l| l.split(' ').nth(4).map(str::to_string))
            .filter(|m| m.starts_with(&self.dir.display().to_string()))
            .collect();
        mounts.sort_by_key(|m| std::cmp::Reverse(m.len()));
        for m in mounts {
            let _ = Command::new("umount").args(["-l", &m]).status();
        }
        let _ = Command::new("ip")
            .args(["link", "del", &self.bridge])
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn follow_recipe(daemon: &Containerd) {
    let n = cri::unique("d");
    let dir = PathBuf::from(format!("/tmp/p{n}"));
    let d = dir.display().to_string();
    let mut run = Run {
        dir: dir.clone(),
        containerd: None,
        bridge: "podinit-cri0".into(),
    };
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    std::fs::create_dir_all(dir.join("cni")).unwrap();
    let shim = PathBuf::from(env!("CARGO_BIN_EXE_containerd-shim-podinit-v1"));
    std::os::unix::fs::symlink(&shim, dir.join("bin/containerd-shim-podinit-v1")).unwrap();
    let [config] = &snippets("toml")[..] else {
        panic!("docs/cri.md §1 has not one toml block")
    };
    assert!(config.contains(PAGE_DIR), "{config}");
    let cri = "[plugins.\"io.containerd.grpc.v1.cri\"]\n";
    let config = config.replace(PAGE_DIR, &d).replacen(
        cri,
        &format!("{cri}  restrict_oom_score_adj = true\n  stream_server_port = \"0\"\n"),
        1,
    );
    std::fs::write(dir.join("config.toml"), &config).unwrap();
    let net: serde_json::Value =
        serde_json::from_str(&json_block("cniVersion")).expect("the page's CNI network");
    run.bridge = net["plugins"][0]["bridge"].as_str().unwrap().to_string();
    std::fs::write(dir.join("cni/10-podinit.conflist"), net.to_string()).unwrap();

    // The page's commands: containerd with the shim's directory first on its PATH.
    let mut path = format!("{d}/bin:");
    if let Containerd::V2(bin) = daemon {
        path.push_str(&format!("{}:", bin.display()));
    }
    path.push_str(&std::env::var("PATH").unwrap_or_default());
    let log = std::fs::File::create(dir.join("containerd.log")).unwrap();
    run.containerd = Some(
        Command::new(daemon.program("containerd"))
            .arg("--config")
            .arg(dir.join("config.toml"))
            .env("PATH", &path)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    let sock = dir.join("containerd.sock");
    let log_tail = || std::fs::read_to_string(dir.join("containerd.log")).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(30);
    let client = loop {
        if let Ok(c) = Client::connect(&sock, Duration::from_secs(5)) {
            if c.ready().is_ok_and(|r| r == (true, true)) {
                break c;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{}: the recipe's containerd is not ready (its CRI refused?): {}",
            daemon.label(),
            log_tail()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    // The page pulls the pause image; here a stand-in is imported under its name.
    let images = dir.join("images");
    let out = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/make-cri-images"))
        .arg(&images)
        .output_within(common::CLIENT_LIMIT);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pause = config
        .lines()
        .find_map(|l| l.trim().strip_prefix("sandbox_image = "))
        .expect("the page names the pause image")
        .trim_matches('"')
        .to_string();
    let ctr = |args: &[&str]| {
        let out = Command::new(daemon.program("ctr"))
            .arg("-a")
            .arg(&sock)
            .args(["-n", "k8s.io"])
            .args(args)
            .output_within(common::CLIENT_LIMIT);
        assert!(
            out.status.success(),
            "ctr {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    ctr(&[
        "images",
        "import",
        images.join("pause.tar").to_str().unwrap(),
    ]);
    ctr(&["images", "tag", cri::PAUSE_IMAGE, &pause]);
    // The pod's image, under the name the page's container.json gives it.
    let container_json = json_block("log_path");
    let cc: serde_json::Value =
        serde_json::from_str(&container_json).expect("the page's container.json");
    let image = cc["image"]["image"]
        .as_str()
        .expect("container.json's image");
    ctr(&[
        "images",
        "import",
        images.join("busybox.tar").to_str().unwrap(),
    ]);
    ctr(&["images", "tag", cri::BUSYBOX, image]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !client.images().iter().any(|i| i.ends_with(&pause)) {
        assert!(Instant::now() < deadline, "the CRI never listed {pause}");
        std::thread::sleep(Duration::from_millis(50));
    }

    for handler in ["runc", "podinit"] {
        let uid = cri::unique("uid");
        let pc = api::PodSandboxConfig {
            metadata: Some(api::PodSandboxMetadata {
                name: cri::unique("docs"),
                uid,
                namespace: "default".into(),
                attempt: 0,
            }),
            linux: Some(api::LinuxPodSandboxConfig {
                cgroup_parent: format!("/podinit-docs-cri/{n}"),
                ..Default::default()
            }),
            ..Default::default()
        };
        let pod = client.run_pod(&pc, handler).unwrap_or_else(|e| {
            panic!("{}: runp on {handler}: {e}\n{}", daemon.label(), log_tail())
        });
        let st = client.pod_status(&pod);
        assert_eq!(
            st.status.as_ref().unwrap().state,
            api::PodSandboxState::SandboxReady as i32,
            "{handler}"
        );
        if handler == "podinit" {
            let state = dir.join("state");
            assert!(
                state.join("podinit/k8s.io").is_dir(),
                "the shim's runc root under the state dir"
            );
            let sockets: Vec<_> = std::fs::read_dir(state.join("s"))
                .map(|rd| rd.flatten().map(|e| e.path()).collect())
                .unwrap_or_default();
            assert!(
                !sockets.is_empty(),
                "no shim socket under {}",
                state.display()
            );
        }
        client.stop_pod(&pod).unwrap();
        client.remove_pod(&pod).unwrap();
    }
    crictl_steps(daemon, &dir, &container_json, &log_tail);
    // The pods' parent, as the kubelet would remove it, in every hierarchy.
    let mut hierarchies = vec![PathBuf::from("/sys/fs/cgroup")];
    if let Ok(rd) = std::fs::read_dir("/sys/fs/cgroup") {
        hierarchies.extend(rd.flatten().map(|e| e.path()));
    }
    for h in hierarchies {
        let _ = std::fs::remove_dir(h.join(format!("podinit-docs-cri/{n}")));
        let _ = std::fs::remove_dir(h.join("podinit-docs-cri"));
        let _ = std::fs::remove_dir(h.join(PAGE_CGROUP_PARENT));
    }
    drop(run);
}

/// The cgroup parent of the page's pod.json (the pods' cgroups, removed after).
const PAGE_CGROUP_PARENT: &str = "podinit-cri";

/// The page's pod.json and container.json, and its crictl commands as written, from the
/// `export` of the endpoints on: the pod runs on the podinit handler and says hello.
fn crictl_steps(
    daemon: &Containerd,
    dir: &Path,
    container_json: &str,
    log_tail: &dyn Fn() -> String,
) {
    let crictl = crictl().unwrap_or_else(|| {
        panic!("docs_cri: crictl not found: no shared/cri-tools/bin/crictl above the crate and none on PATH")
    });
    let d = dir.display().to_string();
    let pod_json = json_block("log_directory");
    assert!(
        pod_json.contains(&format!("\"/{PAGE_CGROUP_PARENT}\"")),
        "{pod_json}"
    );
    std::fs::write(dir.join("pod.json"), pod_json.replace(PAGE_DIR, &d)).unwrap();
    std::fs::write(dir.join("container.json"), container_json).unwrap();
    let sh = snippets("sh")
        .into_iter()
        .find(|b| b.contains("crictl runp --runtime podinit"))
        .expect("docs/cri.md §1 runs a pod with crictl");
    let steps = &sh[sh
        .find("export ")
        .expect("the page exports crictl's endpoints")..];
    // A user reads the log a while after the start; here the log is waited for first.
    let steps = steps.replacen(
        "crictl logs ",
        "for i in $(seq 600); do crictl logs $c 2>/dev/null | grep -qx hello && break; \
         sleep 0.1; done\ncrictl logs ",
        1,
    );
    // crictl's own 2 s per call is short for a stop on a loaded machine.
    std::fs::write(dir.join("crictl.yaml"), "timeout: 60\n").unwrap();
    let path = format!(
        "{}:{}",
        crictl.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", &steps])
        .current_dir(dir)
        .env("D", &d)
        .env("PATH", path)
        .env("CRI_CONFIG_FILE", dir.join("crictl.yaml"))
        .stdin(Stdio::null())
        .output_within(Duration::from_secs(300));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.lines().any(|l| l == "hello"),
        "{}: the page's crictl steps ({:?}): {stdout}\n{}\n{}",
        daemon.label(),
        out.status,
        String::from_utf8_lossy(&out.stderr),
        log_tail()
    );
}

#[test]
#[ignore = "needs root: a private containerd and pods"]
fn docs_cri_recipe_runs_pods_on_containerd_1_6_and_2() {
    common::require_root();
    follow_recipe(&Containerd::V1_6);
    match Containerd::v2() {
        Some(d) => follow_recipe(&d),
        None => eprintln!("docs_cri: containerd 2 did not run: no shared/containerd-2 tools"),
    }
}
