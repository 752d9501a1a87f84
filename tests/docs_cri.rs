//! docs/cri.md §1 as a user follows it: its own config and CNI network, taken from the
//! page, run a private containerd (1.6, and 2 when the shared test tools hold it) with the
//! shim on its PATH, and a pod runs on the podinit handler and on runc's. The shim's state
//! and socket are under that containerd's state directory, nowhere shared.
//!
//! What the test changes in the snippets is its own isolation, not the recipe: the
//! directory (the page's `/var/lib/podinit-cri` becomes a temp dir), the pause image
//! imported under the page's name where the page pulls it (no registry is reachable here),
//! and, as the page says for a machine without CAP_SYS_RESOURCE, `restrict_oom_score_adj`.

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
    let [net] = &snippets("json")[..] else {
        panic!("docs/cri.md §1 has not one json block")
    };
    let net: serde_json::Value = serde_json::from_str(net).expect("the page's CNI network");
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
    // The pods' parent, as the kubelet would remove it, in every hierarchy.
    let mut hierarchies = vec![PathBuf::from("/sys/fs/cgroup")];
    if let Ok(rd) = std::fs::read_dir("/sys/fs/cgroup") {
        hierarchies.extend(rd.flatten().map(|e| e.path()));
    }
    for h in hierarchies {
        let _ = std::fs::remove_dir(h.join(format!("podinit-docs-cri/{n}")));
        let _ = std::fs::remove_dir(h.join("podinit-docs-cri"));
    }
    drop(run);
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
