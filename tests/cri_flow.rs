//! The CRI flow of issue 25 on a private containerd.

mod common;
#[path = "common/cri.rs"]
mod cri;
#[path = "common/cri_client.rs"]
mod cri_client;

#[test]
#[ignore = "needs root: a private containerd with CNI"]
fn cri_lab_smoke() {
    common::require_root();
    let lab = cri::Lab::new("smoke");
    eprintln!("{:?}", lab.cri().version());
}
