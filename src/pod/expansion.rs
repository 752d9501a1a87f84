//! Kubernetes' `$(VAR)` expansion, as kubelet does it for `env` values, `command` and
//! `args` (`third_party/forked/golang/expansion`: `Expand` with `MappingFuncFor`): `$$` is
//! a literal `$`, `$(NAME)` is the variable's value, a reference to an unknown variable
//! stays as written, and a `$` that starts no reference is kept.

use std::collections::BTreeMap;

/// `input` with every `$(NAME)` of `vars` replaced.
pub fn expand(input: &str, vars: &BTreeMap<String, String>) -> String {
    expand_with(input, |name| vars.get(name).cloned())
}

/// `input` with every `$(NAME)` replaced by what `lookup` gives for it; a name it gives
/// nothing for stays as written (kubelet's `Expand` with its own mapping function).
pub fn expand_with(input: &str, mut lookup: impl FnMut(&str) -> Option<String>) -> String {
    let b = input.as_bytes();
    let mut out = String::with_capacity(input.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'$' && i + 1 < b.len() {
            if b[i + 1] == b'$' {
                out.push('$');
                i += 2;
                continue;
            }
            if b[i + 1] == b'(' {
                if let Some(end) = input[i + 2..].find(')') {
                    let name = &input[i + 2..i + 2 + end];
                    match lookup(name) {
                        Some(v) => out.push_str(&v),
                        None => out.push_str(&input[i..i + 3 + end]),
                    }
                    i += 3 + end;
                    continue;
                }
            }
        }
        let ch = input[i..].chars().next().unwrap_or_default();
        out.push(ch);
        i += ch.len_utf8().max(1);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> BTreeMap<String, String> {
        [("A", "1"), ("EMPTY", "")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// Cases of kubelet's expansion tests (`TestMapReference`, `TestExpand`).
    #[test]
    fn expansion_as_kubelet_expands() {
        let v = vars();
        for (input, want) in [
            ("$(A)$(B)$$(A)$", "1$(B)$(A)$"),
            ("é$(A", "é$(A"),
            ("$(EMPTY)x", "x"),
            ("$$$$", "$$"),
            ("$A", "$A"),
            ("$()", "$()"),
            ("($(A))", "(1)"),
            ("", ""),
            ("$", "$"),
        ] {
            assert_eq!(expand(input, &v), want, "{input:?}");
        }
    }
}
