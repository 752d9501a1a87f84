//! The manifest loader on any text: YAML or JSON, one or more documents, then strict
//! checking, defaults, PodPresets and validation. It must answer with an error naming a
//! field, never panic. A manifest it admits goes on as `podinit run` takes it: the pod
//! plan, its effective YAML, each container's environment (ConfigMaps, Secrets, the
//! downward API) and its OCI spec laid over the busybox bundle's config.json; none of
//! these may panic either.

#![no_main]

use libfuzzer_sys::fuzz_target;
use podinit::bundle::{Bundle, HostVolume};
use podinit::spec::PodContext;
use std::collections::BTreeMap;
use std::path::PathBuf;

const CONFIG: &str = include_str!("../../oci-bundles/busybox/config.json");

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let admitted = match podinit::manifest::load_str(text) {
        Ok(a) => a,
        Err(e) => {
            // Every error prints as one line (docs/interface.md §2).
            assert!(!e.to_string().contains('\n'), "{e}");
            return;
        }
    };
    let pod = &admitted.pod;
    let _ = podinit::pod::PodPlan::from_pod(pod, 300_000);
    let _ = podinit::manifest::effective_yaml(pod);
    let spec = pod.spec.clone().unwrap_or_default();
    let ips = vec!["10.0.0.2".to_string()];
    let sources = podinit::manifest::env::Sources {
        pod,
        config_maps: &admitted.config_maps,
        secrets: &admitted.secrets,
        pod_ips: &ips,
        host_ips: &ips,
        node_cpu_milli: 2000,
        node_memory: 1 << 30,
        env_file: &podinit::manifest::env::no_env_files,
    };
    let bundle = Bundle::of_dir(
        PathBuf::from("/nonexistent/bundle"),
        PathBuf::from("/nonexistent/bundle/rootfs"),
        serde_json::from_str(CONFIG).unwrap(),
    );
    let volumes: BTreeMap<String, HostVolume> = spec
        .volumes
        .iter()
        .flatten()
        .map(|v| {
            let host_path = PathBuf::from("/nonexistent/volumes").join(&v.name);
            (
                v.name.clone(),
                HostVolume {
                    host_path,
                    read_only: false,
                    made_at: None,
                },
            )
        })
        .collect();
    let containers = spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers);
    for c in containers {
        // A container whose environment does not resolve is never started (kubelet's
        // CreateContainerConfigError): there is no spec to build.
        let Ok(env) = podinit::manifest::env::resolve(c, &sources).map(|r| r.env) else {
            continue;
        };
        let cx = PodContext {
            volumes: &volumes,
            termination_log: None,
            share_process_namespace: spec.share_process_namespace == Some(true),
            hostname: "pod",
            env: &env,
            pod_files: &[],
            oom_score_adj: Some(1000),
            // Nowhere: Localhost profiles fail to load, as on a node without them.
            seccomp_root: std::path::Path::new("/nonexistent"),
            recursive_read_only: &[],
            sub_paths: &[],
        };
        let _ = podinit::spec::for_container(&bundle, &spec, c, &cx);
    }
});
