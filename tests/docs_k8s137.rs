//! The Kubernetes docs' examples of pod fields podinit took on with the 1.37 API
//! (`tests/fixtures/docs/k8s137/`), run as kubelet runs them: `subPathExpr`.

mod common;
use common::*;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(40);

fn fixture(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/docs/k8s137")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// `podinit validate` of `yaml` with the test bundles: its exit code and stderr.
fn validate(p: &TestPod) -> (Option<i32>, String) {
    let out = std::process::Command::new(bin())
        .arg("validate")
        .arg(&p.manifest)
        .arg("--bundles")
        .arg(bundles())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn subpath_expr_mounts_the_directory_named_by_the_pod_s_name() {
    require_root();
    let host = std::env::temp_dir().join(format!("podinit-it-subpathexpr-{}", std::process::id()));
    std::fs::create_dir_all(&host).unwrap();
    let yaml = fixture("subpath-expr.yaml").replace("HOSTDIR", &host.display().to_string());
    let mut p = TestPod::new("subpathexpr", &yaml);
    p.start();
    p.wait_status(LIMIT, |v| {
        container_status(v, "container1")["state"]["running"].is_object()
    });
    // As the docs' page says: the log lands in <hostPath>/<pod name>/hello.txt.
    let file = host.join(&p.name).join("hello.txt");
    let deadline = Instant::now() + LIMIT;
    while !std::fs::read_to_string(&file).is_ok_and(|s| s.contains("Hello")) {
        assert!(
            Instant::now() < deadline,
            "{} never had Hello",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    p.signal(libc::SIGTERM);
    p.wait(LIMIT);
    p.assert_nothing_left();
    std::fs::remove_dir_all(&host).unwrap();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn subpath_expr_naming_a_missing_variable_is_a_config_error() {
    require_root();
    let mut p = TestPod::new(
        "subpathexpr-missing",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  restartPolicy: Never
  containers:
  - name: c
    image: busybox
    command: [sleep, "60"]
    env: [{name: EMPTY, value: ""}]
    volumeMounts: [{name: work, mountPath: /work, subPathExpr: "$(EMPTY)/$(NOPE)"}]
  volumes: [{name: work, emptyDir: {}}]
"#,
    );
    p.start();
    let v = p.wait_status(LIMIT, |v| {
        container_status(v, "c")["state"]["waiting"]["reason"] == "CreateContainerConfigError"
    });
    assert_eq!(
        container_status(&v, "c")["state"]["waiting"]["message"],
        "missing value for EMPTY, NOPE"
    );
    p.signal(libc::SIGTERM);
    p.wait(LIMIT);
    p.assert_nothing_left();
}

#[test]
fn subpath_expr_is_validated_as_the_api_server_validates_it() {
    for (mount, want) in [
        (
            r#"{name: work, mountPath: /work, subPath: a, subPathExpr: "$(X)"}"#,
            r#"spec.containers[0].volumeMounts[0].subPathExpr: Invalid value: "$(X)": subPathExpr and subPath are mutually exclusive"#,
        ),
        (
            r#"{name: work, mountPath: /work, subPathExpr: "/$(X)"}"#,
            r#"spec.containers[0].volumeMounts.subPathExpr: Invalid value: "/$(X)": must be a relative path"#,
        ),
        (
            r#"{name: work, mountPath: /work, subPathExpr: "$(X)/../y"}"#,
            r#"spec.containers[0].volumeMounts.subPathExpr: Invalid value: "$(X)/../y": must not contain '..'"#,
        ),
    ] {
        let p = TestPod::new(
            "subpathexpr-bad",
            &format!(
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: NAME}}\nspec:\n  containers:\n  - name: c\n    image: busybox\n    env: [{{name: X, value: x}}]\n    volumeMounts: [{mount}]\n  volumes: [{{name: work, emptyDir: {{}}}}]\n"
            ),
        );
        let (code, err) = validate(&p);
        assert_eq!(code, Some(2), "{mount}: {err}");
        assert!(err.contains(want), "{mount}: {err}");
    }
}
