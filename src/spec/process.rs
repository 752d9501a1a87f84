//! The process's program and how it runs: arguments, working directory, OOM score and
//! terminal.

use oci_spec::runtime::Spec;

use super::{Ctx, Error, Result};
use crate::pod::expansion::expand;

/// `process.args` from `command` and `args` over the base's ENTRYPOINT and CMD (the
/// rules are in the module doc of `spec`), `$(VAR)` expanded.
pub fn with_args(spec: &mut Spec, ctx: &Ctx) -> Result<()> {
    let c = ctx.container;
    let process = super::process_mut(spec)?;
    let base = process.args().clone().unwrap_or_default();
    let argv: Vec<String> = match (&c.command, &c.args) {
        (Some(cmd), Some(a)) => cmd.iter().chain(a).cloned().collect(),
        (Some(cmd), None) => cmd.clone(),
        (None, Some(a)) => base
            .iter()
            .take(ctx.base.entrypoint_len)
            .chain(a)
            .cloned()
            .collect(),
        (None, None) => base,
    };
    if argv.is_empty() {
        return Err(Error::Invalid(
            "Required value: the bundle has no process.args and the container sets no command"
                .into(),
        ));
    }
    process.set_args(Some(argv.iter().map(|a| expand(a, &ctx.vars)).collect()));
    Ok(())
}

/// `workingDir` as `cwd`, kubelet's OOM score, and a terminal when `tty: true` (the CRI's
/// `tty`: the runtime gives the process one).
pub fn with_process(spec: &mut Spec, ctx: &Ctx) -> Result<()> {
    let c = ctx.container;
    let process = super::process_mut(spec)?;
    if let Some(wd) = &c.working_dir {
        process.set_cwd(wd.into());
    }
    if let Some(adj) = ctx.cx.oom_score_adj {
        process.set_oom_score_adj(Some(adj));
    }
    process.set_terminal(Some(c.tty == Some(true)));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use std::path::PathBuf;

    fn args(c: &str) -> Result<Vec<String>> {
        try_apply(with_args, &Default::default(), &container(c))
            .map(|s| s.process().as_ref().unwrap().args().clone().unwrap())
    }

    #[test]
    fn command_and_args_rules() {
        assert_eq!(args("name: c").unwrap(), ["/bin/entry", "default-cmd"]);
        assert_eq!(args("name: c\ncommand: [sh, -c]").unwrap(), ["sh", "-c"]);
        assert_eq!(
            args("name: c\nargs: [x, y]").unwrap(),
            ["/bin/entry", "x", "y"]
        );
        assert_eq!(
            args("name: c\ncommand: [echo]\nargs: [$(A), $$(A), $(NOPE)]\nenv: [{name: A, value: hi}]")
                .unwrap(),
            ["echo", "hi", "$(A)", "$(NOPE)"]
        );
    }

    #[test]
    fn no_program_at_all_is_an_error() {
        let mut base = bundle();
        base.spec
            .process_mut()
            .as_mut()
            .unwrap()
            .set_args(Some(vec![]));
        let c = container("name: c");
        let e = try_apply_in(with_args, &base, &Default::default(), &c, &Pod::new(&c))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("Required value"), "{e}");
    }

    #[test]
    fn working_dir_terminal_and_oom_score() {
        let s = apply(
            with_process,
            &container("name: c\nworkingDir: /w\ntty: true"),
        );
        let p = s.process().as_ref().unwrap();
        assert_eq!(p.cwd(), &PathBuf::from("/w"));
        assert_eq!(p.terminal(), Some(true));
        assert_eq!(p.oom_score_adj(), None);
        let s = apply(with_process, &container("name: c"));
        let p = s.process().as_ref().unwrap();
        assert_eq!((p.cwd(), p.terminal()), (&PathBuf::from("/"), Some(false)));
    }
}
