//! `process.env`: the base's, then the container's (kubelet's resolved environment).

use oci_spec::runtime::Spec;

use super::{Ctx, Result};

/// The `PATH` a container gets when its base has none.
pub(crate) const DEFAULT_PATH: (&str, &str) = (
    "PATH",
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
);

/// The base's variables, then the container's in order, each replacing one of the same
/// name; `HOSTNAME` is the pod's unless the container sets it; `PATH` defaults.
pub fn with_env(spec: &mut Spec, ctx: &Ctx) -> Result<()> {
    let process = super::process_mut(spec)?;
    let mut env: Vec<(String, String)> = process
        .env()
        .iter()
        .flatten()
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => (kv.clone(), String::new()),
        })
        .collect();
    for (k, v) in ctx.cx.env {
        set(&mut env, k, v);
    }
    if !ctx.vars.contains_key("HOSTNAME") {
        set(&mut env, "HOSTNAME", ctx.cx.hostname);
    }
    if !env.iter().any(|(k, _)| k == DEFAULT_PATH.0) {
        env.insert(0, (DEFAULT_PATH.0.into(), DEFAULT_PATH.1.into()));
    }
    process.set_env(Some(env.iter().map(|(k, v)| format!("{k}={v}")).collect()));
    Ok(())
}

fn set(env: &mut Vec<(String, String)>, k: &str, v: &str) {
    match env.iter_mut().find(|(n, _)| n == k) {
        Some(e) => e.1 = v.to_string(),
        None => env.push((k.to_string(), v.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;

    #[test]
    fn the_containers_env_replaces_the_bases_in_order() {
        let c = container("name: c\nenv: [{name: A, value: two}, {name: B, value: '$(A)-x'}]");
        let s = apply(with_env, &c);
        let env = s.process().as_ref().unwrap().env().clone().unwrap();
        assert_eq!(env, ["PATH=/bin", "A=two", "B=two-x", "HOSTNAME=mypod"]);
    }

    #[test]
    fn hostname_is_the_containers_own_when_it_sets_one_and_path_defaults() {
        let c = container("name: c\nenv: [{name: HOSTNAME, value: mine}]");
        let mut base = bundle();
        base.spec
            .process_mut()
            .as_mut()
            .unwrap()
            .set_env(Some(vec!["X".into()]));
        let s = apply_on(with_env, &base, &c);
        let env = s.process().as_ref().unwrap().env().clone().unwrap();
        assert_eq!(
            env,
            [
                format!("{}={}", DEFAULT_PATH.0, DEFAULT_PATH.1),
                "X=".into(),
                "HOSTNAME=mine".into()
            ]
        );
    }
}
