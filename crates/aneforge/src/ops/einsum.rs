//! Einstein summation: the native MIL `einsum` (the two layouts coremltools accepts, a matmul over
//! axes −1 and −3 with the other axes as broadcast batch), and the general two-operand
//! [`einsum`] lowered to transpose → reshape → one (batched) matmul → reshape → transpose.

use super::io::{expect_fp16, expect_inputs};
use super::{Buf, Family, Op, TensorType};
use crate::error::{Error, Result};
use crate::mil::{Literal, MilArgs, MilInputs, MilOp};
use crate::shape;

/// The MIL op name of [`Einsum`].
pub const MIL_NAME: &str = "einsum";

/// MIL ops this family prints.
pub const MIL_OPS: &[&str] = &[MIL_NAME];

/// The native equations by rank, as printed (any consistent relettering parses).
const NATIVE: [(usize, &str); 2] = [(4, "nchw,nwhu->nchu"), (3, "chw,whu->chu")];

/// MIL `einsum(values = (x, y), equation)`: rank 4 `nchw,nwhu->nchu` (x `[B, C, H, W]`,
/// y `[B, W, H, U]` → `[B, C, H, U]`, B and H broadcast when one side is 1) or rank 3
/// `chw,whu->chu` (H broadcast).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Einsum {
    /// 3 or 4.
    pub rank: usize,
}

/// Letters of each operand and of the explicit output (`None`: implicit).
pub type Letters = (Vec<Vec<char>>, Option<Vec<char>>);

/// Split `a,b->out` (or implicit `a,b`) into operand letter lists and the explicit output, if any.
pub fn split_equation(op: &str, eq: &str) -> Result<Letters> {
    let eq: String = eq.chars().filter(|c| !c.is_whitespace()).collect();
    if eq.contains("...") {
        return Err(Error::NotImplemented(format!(
            "{op}: ellipsis ('...') in '{eq}' is not supported; name every axis"
        )));
    }
    if let Some(c) = eq
        .chars()
        .find(|&c| !(c.is_ascii_alphabetic() || c == ',' || c == '-' || c == '>'))
    {
        return Err(Error::value(
            op,
            format!("equation '{eq}' has the character '{c}'; use letters, ',' and '->'"),
        ));
    }
    let (lhs, out) = match eq.split_once("->") {
        Some((l, r)) => (l, Some(r.chars().collect::<Vec<_>>())),
        None => (eq.as_str(), None),
    };
    if lhs.contains(['-', '>'])
        || out
            .as_ref()
            .is_some_and(|o| o.contains(&'-') || o.contains(&'>') || o.contains(&','))
    {
        return Err(Error::value(
            op,
            format!("equation '{eq}' is malformed (expected 'ab,bc->ac')"),
        ));
    }
    Ok((lhs.split(',').map(|s| s.chars().collect()).collect(), out))
}

impl Einsum {
    /// The native op for equation `eq` (any relettering of the two native forms).
    pub fn parse(eq: &str) -> Result<Einsum> {
        let got = letter_pattern(eq)?;
        for (rank, native) in NATIVE {
            if got == letter_pattern(native)? {
                return Ok(Einsum { rank });
            }
        }
        Err(Error::NotImplemented(format!("einsum: native MIL einsum supports only '{}' and '{}' (or a relettering), got '{eq}'; use the general einsum", NATIVE[0].1, NATIVE[1].1)))
    }

    /// The printed equation.
    pub fn equation(&self) -> &'static str {
        NATIVE
            .iter()
            .find(|(r, _)| *r == self.rank)
            .map_or("", |(_, e)| e)
    }
}

/// The equality structure of an explicit equation: per operand and the output, each letter's
/// first position in the concatenation (so relettered equations compare equal).
fn letter_pattern(eq: &str) -> Result<(Vec<Vec<usize>>, Vec<usize>)> {
    let (ins, out) = split_equation(MIL_NAME, eq)?;
    let all: Vec<char> = ins
        .concat()
        .into_iter()
        .chain(out.clone().unwrap_or_default())
        .collect();
    let index = |v: &[char]| -> Vec<usize> {
        v.iter()
            .map(|c| all.iter().position(|a| a == c).unwrap_or(0))
            .collect()
    };
    Ok((
        ins.iter().map(|v| index(v)).collect(),
        out.as_deref().map_or(Vec::new(), index),
    ))
}

/// Broadcast two extents where one may be 1; `None` if they differ otherwise.
fn bcast(a: usize, b: usize) -> Option<usize> {
    (a == b || a == 1 || b == 1).then_some(a.max(b))
}

impl Family for Einsum {
    fn name(&self) -> &'static str {
        MIL_NAME
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_inputs(MIL_NAME, inputs, 2)?;
        expect_fp16(MIL_NAME, inputs)?;
        let (x, y) = (&inputs[0].shape, &inputs[1].shape);
        let r = self.rank;
        let bad = || {
            Error::shape(MIL_NAME, format!("'{}' needs x [.., C, H, W] and y [.., W, H, U] of rank {r} (batch and H equal or 1), got {x:?} and {y:?}", self.equation()))
        };
        if x.len() != r || y.len() != r || x[r - 1] != y[r - 3] {
            return Err(bad());
        }
        let h = bcast(x[r - 2], y[r - 2]).ok_or_else(bad)?;
        let mut out = vec![x[r - 3], h, y[r - 1]];
        if r == 4 {
            out.insert(0, bcast(x[0], y[0]).ok_or_else(bad)?);
        }
        shape::check(MIL_NAME, &out)?;
        Ok(vec![TensorType::fp16(out)])
    }
    fn mil(&self) -> MilOp {
        MilOp {
            op: MIL_NAME,
            params: vec![("equation", Literal::Str(self.equation().into()))],
            inputs: MilInputs::Tuple("values"),
            blobs: Vec::new(),
        }
    }
    fn eval(&self, ins: &[&Buf], out: &mut [Buf]) -> Result<()> {
        let (x, y, o) = (ins[0], ins[1], &mut out[0]);
        // View rank 3 as rank 4 with batch 1.
        let four = |s: &[usize]| {
            if s.len() == 3 {
                [1, s[0], s[1], s[2]]
            } else {
                [s[0], s[1], s[2], s[3]]
            }
        };
        let ([xb, c, xh, w], [yb, _, yh, u], [b, _, h, _]) =
            (four(&x.shape), four(&y.shape), four(&o.shape));
        let pick = |i: usize, n: usize| if n == 1 { 0 } else { i };
        let mut k = 0;
        for bi in 0..b {
            for ci in 0..c {
                for hi in 0..h {
                    let xrow = ((pick(bi, xb) * c + ci) * xh + pick(hi, xh)) * w;
                    for ui in 0..u {
                        let mut acc = 0f32;
                        for wi in 0..w {
                            acc += x.data[xrow + wi]
                                * y.data[((pick(bi, yb) * w + wi) * yh + pick(hi, yh)) * u + ui];
                        }
                        o.data[k] = acc;
                        k += 1;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Parse `einsum` (its equation must be one of the native forms).
pub fn from_mil(op: &str, args: &mut MilArgs) -> Option<Result<Op>> {
    match op {
        MIL_NAME => Some(
            (|| {
                let eq = args.string("equation")?;
                Einsum::parse(&eq).map_err(|e| args.error(e.to_string()))
            })()
            .map(Op::Einsum),
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::{compile, CompileOptions, Device};
    use crate::exec::PortData;
    use crate::graph::build::einsum::*;
    use crate::input;
    use crate::ops::layout::tests::{buf, data, mil_args, round_trip, run};

    /// Naive f64 einsum of two operands given as (letters, shape, data); output letters `out`.
    fn naive(a: (&str, &[usize], &[f32]), b: (&str, &[usize], &[f32]), out: &str) -> Vec<f64> {
        let mut ext = std::collections::BTreeMap::new();
        for (l, s, _) in [a, b] {
            for (c, &d) in l.chars().zip(s) {
                ext.insert(c, d);
            }
        }
        let letters: Vec<char> = ext.keys().copied().collect();
        let out: Vec<char> = out.chars().collect();
        let n_out: usize = out.iter().map(|c| ext[c]).product();
        let mut res = vec![0f64; n_out];
        let total: usize = letters.iter().map(|c| ext[c]).product();
        for mut k in 0..total {
            let mut val = std::collections::BTreeMap::new();
            for c in letters.iter().rev() {
                val.insert(*c, k % ext[c]);
                k /= ext[c];
            }
            let flat =
                |l: &str, s: &[usize]| l.chars().zip(s).fold(0, |acc, (c, &d)| acc * d + val[&c]);
            let o = out.iter().fold(0, |acc, c| acc * ext[c] + val[c]);
            res[o] += a.2[flat(a.0, a.1)] as f64 * b.2[flat(b.0, b.1)] as f64;
        }
        res
    }

    /// Compile `einsum(eq)` on the reference executor in fp32 and compare with the naive sum.
    fn check(eq: &str, sa: &[usize], sb: &[usize], out: &str) {
        let (da, db) = (data(sa.iter().product(), 3), data(sb.iter().product(), 4));
        let (a, b) = (input(sa).unwrap(), input(sb).unwrap());
        let y = einsum(eq, &a, &b).unwrap();
        let opts = CompileOptions {
            device: Device::Reference,
            precision: crate::exec::Precision::Fp32,
            ..Default::default()
        };
        let dir = std::env::temp_dir().join(format!(
            "aneforge-einsum-{}-{}",
            std::process::id(),
            eq.replace([',', '-', '>'], "_")
        ));
        let mut c = compile(
            &[(None, y)],
            &CompileOptions {
                build_dir: Some(dir.clone()),
                ..opts
            },
        )
        .unwrap();
        let got = c
            .run(&[PortData::F32(&da), PortData::F32(&db)])
            .unwrap()
            .remove(0);
        std::fs::remove_dir_all(dir).unwrap();
        let (ia, ib) = eq.split("->").next().unwrap().split_once(',').unwrap();
        let want = naive((ia, sa, &da), (ib, sb, &db), out);
        assert_eq!(got.len(), want.len(), "{eq}");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (*g as f64 - w).abs() < 1e-4 * (1.0 + w.abs()),
                "{eq} element {i}: {g} vs {w}"
            );
        }
    }

    #[test]
    fn general_einsum_matches_naive_sums() {
        check("ij,jk->ik", &[3, 4], &[4, 5], "ik");
        check("ij,jk", &[3, 4], &[4, 5], "ik");
        check("bij,bjk->bik", &[2, 3, 4], &[2, 4, 5], "bik");
        check("bij,bkj->bki", &[2, 3, 4], &[2, 5, 4], "bki");
        check("ik,jk->ijk", &[3, 4], &[5, 4], "ijk");
        check("i,j->ij", &[3], &[5], "ij");
        check("ijk,kl->li", &[2, 3, 4], &[4, 5], "li");
        check("abcd,cdbe->aeb", &[2, 3, 4, 2], &[4, 2, 3, 3], "aeb");
        check("nchw,nwhu->nchu", &[2, 3, 4, 5], &[2, 5, 4, 6], "nchu");
        check("ij,kl->ik", &[3, 4], &[4, 5], "ik");
        check("ij,kl->lk", &[3, 4], &[2, 2], "lk");
    }

    #[test]
    fn general_einsum_errors() {
        let (a, b) = (input(&[3, 4]).unwrap(), input(&[4, 5]).unwrap());
        let not_impl = ["ii,ij->ij", "...i,ij->...j", "ij,jk,kl->il"];
        for eq in not_impl {
            assert!(
                matches!(einsum(eq, &a, &b), Err(Error::NotImplemented(_))),
                "{eq}"
            );
        }
        for eq in [
            "ij,jk->ikk",
            "ij,jk->iz",
            "ij,jk->",
            "ijk,jk->ik",
            "i j,j1->i",
            "ij,jk->i,k",
        ] {
            let e = einsum(eq, &a, &b).unwrap_err();
            assert!(
                matches!(e, Error::Value { .. } | Error::Shape { .. }),
                "{eq}: {e}"
            );
        }
    }

    #[test]
    fn native_einsum_kernel_and_mil() {
        let (x, y) = (buf(&[2, 3, 4, 5], 1), buf(&[1, 5, 4, 6], 2));
        let o = run(&Op::Einsum(Einsum { rank: 4 }), &[&x, &y]).remove(0);
        assert_eq!(o.shape, [2, 3, 4, 6]);
        let yb: Vec<f32> = y.data.iter().chain(&y.data).copied().collect(); // broadcast y's batch
        let want = naive(
            ("nchw", &x.shape, &x.data),
            ("nwhu", &[2, 5, 4, 6], &yb),
            "nchu",
        );
        for (g, w) in o.data.iter().zip(&want) {
            assert!((*g as f64 - w).abs() < 1e-4 * (1.0 + w.abs()));
        }
        let (x3, y3) = (buf(&[3, 1, 5], 3), buf(&[5, 4, 2], 4));
        let o = run(&Op::Einsum(Einsum { rank: 3 }), &[&x3, &y3]).remove(0);
        assert_eq!(o.shape, [3, 4, 2]);
        let xb: Vec<f32> = (0..3)
            .flat_map(|c| (0..4).flat_map(move |_| (0..5).map(move |w| (c, w))))
            .map(|(c, w)| x3.data[c * 5 + w])
            .collect();
        let want = naive(
            ("chw", &[3, 4, 5], &xb),
            ("whu", &y3.shape, &y3.data),
            "chu",
        );
        for (g, w) in o.data.iter().zip(&want) {
            assert!((*g as f64 - w).abs() < 1e-4 * (1.0 + w.abs()));
        }
        assert_eq!(
            Einsum::parse("abcd,adce->abce").unwrap(),
            Einsum { rank: 4 }
        );
        assert_eq!(
            Einsum::parse("xyz, zyw -> xyw").unwrap(),
            Einsum { rank: 3 }
        );
        for eq in [
            "nchw,nwhu->nhcu",
            "nchw,nwhu",
            "nchw,nwhn->nchn",
            "ij,jk->ik",
        ] {
            assert!(
                matches!(Einsum::parse(eq), Err(Error::NotImplemented(_))),
                "{eq}"
            );
        }
        let (a, b) = (input(&[1, 3, 4, 5]).unwrap(), input(&[2, 5, 1, 6]).unwrap());
        assert_eq!(
            einsum_native("nchw,nwhu->nchu", &a, &b).unwrap().shape(),
            [2, 3, 4, 6]
        );
        assert!(
            einsum_native("nchw,nwhu->nchu", &a, &input(&[2, 4, 1, 6]).unwrap()).is_err(),
            "W mismatch"
        );
        assert!(
            einsum_native("nchw,nwhu->nchu", &a, &input(&[2, 5, 3, 6]).unwrap()).is_err(),
            "H mismatch"
        );
        round_trip(&Op::Einsum(Einsum { rank: 4 }), from_mil);
        round_trip(&Op::Einsum(Einsum { rank: 3 }), from_mil);
        assert!(from_mil(
            "einsum",
            &mut mil_args(vec![("equation", Literal::Str("ij,jk->ik".into()))])
        )
        .unwrap()
        .is_err());
    }
}
