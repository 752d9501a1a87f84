//! The code generator of a seccomp filter: rules per syscall number become a binary
//! search over number intervals, each leaf the rules' argument checks, in classic BPF with
//! symbolic labels resolved at the end.

use std::collections::BTreeMap;

use super::*;

/// What a range of syscall numbers does.
#[derive(Clone, Debug)]
pub(super) enum Leaf<'a> {
    Ret(u32),
    Rules(&'a [Rule]),
}

/// The whole number space as `(start, leaf)` intervals: each ruled syscall its own, `fills`
/// (`from..=to` → a return value) elsewhere, the default action in the gaps; neighbours
/// that return the same value are merged.
pub(super) fn intervals<'a>(
    rules: &'a BTreeMap<u32, Vec<Rule>>,
    fills: &[(u32, u32, u32)],
    default: u32,
) -> Vec<(u32, Leaf<'a>)> {
    let mut bounds = vec![0u32];
    for &nr in rules.keys() {
        bounds.push(nr);
        bounds.extend(nr.checked_add(1));
    }
    for &(from, to, _) in fills {
        bounds.push(from);
        bounds.extend(to.checked_add(1));
    }
    bounds.sort_unstable();
    bounds.dedup();
    let mut out: Vec<(u32, Leaf)> = Vec::new();
    for b in bounds {
        let leaf = match rules.get(&b) {
            Some(list) => match list.iter().find(|r| r.conds.is_empty()) {
                Some(r) => Leaf::Ret(r.ret),
                None => Leaf::Rules(list),
            },
            None => Leaf::Ret(
                fills
                    .iter()
                    .find(|(from, to, _)| (*from..=*to).contains(&b))
                    .map_or(default, |f| f.2),
            ),
        };
        match (out.last(), &leaf) {
            (Some((_, Leaf::Ret(prev))), Leaf::Ret(cur)) if prev == cur => {}
            _ => out.push((b, leaf)),
        }
    }
    out
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Tgt {
    Next,
    To(usize),
}

#[derive(Clone, Copy, Debug)]
pub(super) enum Ins {
    Stmt { code: u16, k: u32 },
    Jump { code: u16, k: u32, jt: Tgt, jf: Tgt },
    Ja(usize),
    Label(usize),
}

/// Code with symbolic forward labels; [`Gen::assemble`] resolves them, adding `ja`
/// trampolines where a conditional jump is longer than its 8-bit offset.
#[derive(Default)]
pub(super) struct Gen {
    code: Vec<Ins>,
    labels: usize,
}

impl Gen {
    pub(super) fn label(&mut self) -> usize {
        self.labels += 1;
        self.labels - 1
    }
    pub(super) fn place(&mut self, l: usize) {
        self.code.push(Ins::Label(l));
    }
    pub(super) fn stmt(&mut self, code: u16, k: u32) {
        self.code.push(Ins::Stmt { code, k });
    }
    pub(super) fn ret(&mut self, k: u32) {
        self.stmt(RET_K, k);
    }
    pub(super) fn jump(&mut self, code: u16, k: u32, jt: Tgt, jf: Tgt) {
        self.code.push(Ins::Jump { code, k, jt, jf });
    }

    /// Binary search over `iv` on the syscall number in A.
    pub(super) fn dispatch(&mut self, iv: &[(u32, Leaf)], wide: bool, default: u32) {
        if let [(_, leaf)] = iv {
            match leaf {
                Leaf::Ret(k) => self.ret(*k),
                Leaf::Rules(rules) => self.rules(rules, wide, default),
            }
            return;
        }
        let mid = iv.len() / 2;
        let right = self.label();
        self.jump(JGE_K, iv[mid].0, Tgt::To(right), Tgt::Next);
        self.dispatch(&iv[..mid], wide, default);
        self.place(right);
        self.dispatch(&iv[mid..], wide, default);
    }

    /// Conditional rules of one syscall: the first that holds returns its action.
    pub(super) fn rules(&mut self, rules: &[Rule], wide: bool, default: u32) {
        for r in rules {
            let fail = self.label();
            for c in &r.conds {
                self.cond(c, wide, fail);
            }
            self.ret(r.ret);
            self.place(fail);
        }
        self.ret(default);
    }

    /// Fall through when `c` holds, else jump to `fail`. `wide`: 64-bit arguments.
    pub(super) fn cond(&mut self, c: &Cond, wide: bool, fail: usize) {
        let (lo, lo2) = (c.value as u32, c.value_two as u32);
        let (hi, hi2) = ((c.value >> 32) as u32, (c.value_two >> 32) as u32);
        let f = Tgt::To(fail);
        let n = Tgt::Next;
        let pass = self.label();
        let p = Tgt::To(pass);
        if wide {
            // The high words decide unless they are equal.
            self.stmt(LD_W_ABS, off_arg(c.index, true));
            match c.op {
                CmpOp::ScmpCmpEq => self.jump(JEQ_K, hi, n, f),
                CmpOp::ScmpCmpNe => self.jump(JEQ_K, hi, n, p),
                CmpOp::ScmpCmpMaskedEq => {
                    self.stmt(ALU_AND_K, hi);
                    self.jump(JEQ_K, hi2, n, f);
                }
                CmpOp::ScmpCmpGt | CmpOp::ScmpCmpGe => {
                    self.jump(JGT_K, hi, p, n);
                    self.jump(JEQ_K, hi, n, f);
                }
                CmpOp::ScmpCmpLt | CmpOp::ScmpCmpLe => {
                    self.jump(JGT_K, hi, f, n);
                    self.jump(JEQ_K, hi, n, p);
                }
            }
        }
        self.stmt(LD_W_ABS, off_arg(c.index, false));
        match c.op {
            CmpOp::ScmpCmpEq => self.jump(JEQ_K, lo, n, f),
            CmpOp::ScmpCmpNe => self.jump(JEQ_K, lo, f, n),
            CmpOp::ScmpCmpMaskedEq => {
                self.stmt(ALU_AND_K, lo);
                self.jump(JEQ_K, lo2, n, f);
            }
            CmpOp::ScmpCmpGt => self.jump(JGT_K, lo, n, f),
            CmpOp::ScmpCmpGe => self.jump(JGE_K, lo, n, f),
            CmpOp::ScmpCmpLt => self.jump(JGE_K, lo, f, n),
            CmpOp::ScmpCmpLe => self.jump(JGT_K, lo, f, n),
        }
        self.place(pass);
    }

    pub(super) fn assemble(mut self) -> Vec<libc::sock_filter> {
        loop {
            let pos = self.positions();
            let far = |p: usize, t: Tgt| match t {
                Tgt::To(l) => pos.labels[l] - (p + 1) > 255,
                Tgt::Next => false,
            };
            let found = self
                .code
                .iter()
                .enumerate()
                .find_map(|(i, ins)| match *ins {
                    Ins::Jump { code, k, jt, jf } if far(pos.at[i], jt) || far(pos.at[i], jf) => {
                        Some((i, code, k, jt, jf, far(pos.at[i], jt), far(pos.at[i], jf)))
                    }
                    _ => None,
                });
            let Some((i, code, k, jt, jf, far_t, far_f)) = found else {
                return self.emit(&pos);
            };
            // jump → short hops to `ja` trampolines placed right after it.
            let after = self.label();
            let mut extra = Vec::new();
            let mut hop = |t: Tgt, is_far: bool, g: &mut Gen| match t {
                Tgt::To(l) if is_far => {
                    let tr = g.label();
                    extra.push(Ins::Label(tr));
                    extra.push(Ins::Ja(l));
                    Tgt::To(tr)
                }
                Tgt::Next => Tgt::To(after),
                t => t,
            };
            let jt = hop(jt, far_t, &mut self);
            let jf = hop(jf, far_f, &mut self);
            extra.push(Ins::Label(after));
            self.code[i] = Ins::Jump { code, k, jt, jf };
            self.code.splice(i + 1..i + 1, extra);
        }
    }

    pub(super) fn positions(&self) -> Positions {
        let mut at = Vec::with_capacity(self.code.len());
        let mut labels = vec![usize::MAX; self.labels];
        let mut p = 0;
        for ins in &self.code {
            at.push(p);
            match ins {
                Ins::Label(l) => labels[*l] = p,
                _ => p += 1,
            }
        }
        Positions { at, labels }
    }

    pub(super) fn emit(&self, pos: &Positions) -> Vec<libc::sock_filter> {
        let off = |p: usize, t: Tgt| match t {
            Tgt::Next => 0,
            Tgt::To(l) => pos.labels[l] - (p + 1),
        };
        let mut out = Vec::new();
        for (i, ins) in self.code.iter().enumerate() {
            let p = pos.at[i];
            let (code, jt, jf, k) = match *ins {
                Ins::Label(_) => continue,
                Ins::Stmt { code, k } => (code, 0, 0, k),
                Ins::Jump { code, k, jt, jf } => (code, off(p, jt) as u8, off(p, jf) as u8, k),
                Ins::Ja(l) => (JA, 0, 0, off(p, Tgt::To(l)) as u32),
            };
            out.push(libc::sock_filter { code, jt, jf, k });
        }
        out
    }
}

pub(super) struct Positions {
    /// Program position of each `Ins` (a label: of the instruction after it).
    at: Vec<usize>,
    labels: Vec<usize>,
}
