//! The busybox OCI image of `scripts/make-oci-image`, which the ctr and podman tests load:
//! the same input gives the same bytes, skopeo reads its config, and umoci unpacks it to a
//! bundle that runc and the runtime under test (`RUNC_UNDER_TEST`) both run.

mod common;
use common::runc::*;
use common::*;
use std::path::Path;
use std::process::Command;

fn make(out: &Path, reference: &str) -> Vec<u8> {
    make_oci_image(out, reference);
    std::fs::read(out).unwrap()
}

#[test]
#[ignore = "needs root: umoci unpacks owners, runtimes need namespaces"]
fn runc_image_is_deterministic_and_unpacks_to_a_runnable_bundle() {
    require_root();
    ensure_tool("skopeo", "skopeo");
    ensure_tool("umoci", "umoci");
    let lab = Lab::new("image");
    let a = make(&lab.dir.join("a.tar"), "podinit.test/busybox:1");
    let b = make(&lab.dir.join("b.tar"), "podinit.test/busybox:1");
    assert!(a == b, "two images of the same busybox differ");
    let other = make(&lab.dir.join("c.tar"), "podinit.test/other:2");
    assert!(a != other, "the reference is in the index");

    let archive = format!("oci-archive:{}", lab.dir.join("a.tar").display());
    let cfg = output_of({
        let mut c = Command::new("skopeo");
        c.args(["inspect", "--config", &archive]);
        c
    })
    .expect_ok()
    .json();
    assert_eq!(cfg["config"]["Cmd"], serde_json::json!(["sh"]), "{cfg}");
    assert_eq!(
        cfg["config"]["Env"],
        serde_json::json!(["PATH=/usr/sbin:/usr/bin:/sbin:/bin"]),
        "{cfg}"
    );

    let layout = lab.dir.join("layout");
    std::fs::create_dir_all(&layout).unwrap();
    let ok = Command::new("tar")
        .arg("-C")
        .arg(&layout)
        .arg("-xf")
        .arg(lab.dir.join("a.tar"))
        .status()
        .unwrap()
        .success();
    assert!(ok, "untarring the image");
    for r in lab.both() {
        let dir = lab
            .dir
            .join(format!("unpacked-{}", r.label.replace(' ', "-")));
        output_of({
            let mut c = Command::new("umoci");
            c.args(["unpack", "--image"])
                .arg(format!("{}:podinit.test/busybox:1", layout.display()))
                .arg(&dir);
            c
        })
        .expect_ok();
        let bundle = lab.bundle_from(dir, &["sh", "-c", "echo from the image; ls /bin/sh"]);
        let id = lab.id("image");
        let o = r.run_fg(&bundle, &id).expect_ok();
        assert_eq!(o.stdout, "from the image\n/bin/sh\n", "{}: {o:?}", r.label);
        lab.assert_nothing_left(r, &bundle, &id, false);
    }
}
