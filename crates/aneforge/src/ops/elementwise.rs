//! Elementwise multi-input ops: binary arithmetic with NumPy broadcasting (tensor or scalar
//! operand), comparisons (bool results) and `select`. Unary ops live in `unary.rs`.

use rayon::prelude::*;

use super::io::{expect_fp16, expect_inputs};

use super::kernel::{broadcast_strides, for_chunks, for_each_broadcast, PAR_MIN_ELEMS};
use super::simd_fp16::round_in_place;
use super::table::mil_kinds;
use super::{Buf, Family, Op, TensorType};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::mil::literal::round_f16;
use crate::mil::{MilArgs, MilOp};
use crate::shape;

mil_kinds! {
    /// Two-input elementwise ops with NumPy broadcasting.
    pub enum Binary {
        Add = "add",
        Sub = "sub",
        Mul = "mul",
        RealDiv = "real_div",
        Maximum = "maximum",
        Minimum = "minimum",
        Pow = "pow",
    }
}

mil_kinds! {
    /// Comparisons: fp16 inputs, bool output, NumPy broadcasting.
    pub enum Compare {
        Greater = "greater",
        Less = "less",
        Equal = "equal",
        NotEqual = "not_equal",
        LessEqual = "less_equal",
        GreaterEqual = "greater_equal",
    }
}

/// The MIL name of [`Select`].
pub const SELECT: &str = "select";

/// `select(cond, a, b)`: a where cond else b, all three broadcast together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Select;

impl Binary {
    /// [`Family::eval`] followed by rounding every output to fp16, in one pass over the output
    /// (bit-identical to eval and then the executor's rounding pass).
    pub fn eval_rounded(&self, ins: &[&Buf], out: &mut [Buf]) {
        self.eval_maybe_rounded(ins, out, true)
    }

    /// The kernel, monomorphic per op (the match is outside the element loops).
    fn eval_maybe_rounded(&self, ins: &[&Buf], out: &mut [Buf], round: bool) {
        let (a, b, o) = (ins[0], ins[1], &mut out[0]);
        macro_rules! each {
            ($($k:ident),*) => {
                match *self {
                    $(Binary::$k => {
                        eval_broadcast2(a, b, o, round, |x, y| Binary::$k.apply(x, y))
                    })*
                }
            };
        }
        each!(Add, Sub, Mul, RealDiv, Maximum, Minimum, Pow);
    }

    /// The op on one pair of f32 values (before any fp16 rounding).
    #[inline(always)]
    pub(crate) fn apply(self, a: f32, b: f32) -> f32 {
        match self {
            Binary::Add => a + b,
            Binary::Sub => a - b,
            Binary::Mul => a * b,
            Binary::RealDiv => a / b,
            Binary::Maximum => a.max(b),
            Binary::Minimum => a.min(b),
            Binary::Pow => a.powf(b),
        }
    }
}

/// Elements per task of the equal-shape and scalar paths (small enough to round in L1).
const CHUNK: usize = 4096;

/// Evaluate a broadcasting two-operand kernel with fast paths for equal shapes and scalars;
/// with `round`, each output is rounded to fp16 in the same pass (chunk by chunk, in cache).
fn eval_broadcast2(
    a: &Buf,
    b: &Buf,
    out: &mut Buf,
    round: bool,
    f: impl Fn(f32, f32) -> f32 + Sync,
) {
    let (ad, bd, od) = (&a.data, &b.data, &mut out.data);
    let fin = |o: &mut [f32]| {
        if round {
            round_in_place(o)
        }
    };
    if ad.len() == od.len() && bd.len() == od.len() {
        let task = |(o, (x, y)): (&mut [f32], (&[f32], &[f32]))| {
            o.iter_mut()
                .zip(x.iter().zip(y))
                .for_each(|(o, (&x, &y))| *o = f(x, y));
            fin(o);
        };
        if od.len() >= PAR_MIN_ELEMS {
            od.par_chunks_mut(CHUNK)
                .zip(ad.par_chunks(CHUNK).zip(bd.par_chunks(CHUNK)))
                .for_each(task);
        } else {
            od.chunks_mut(CHUNK)
                .zip(ad.chunks(CHUNK).zip(bd.chunks(CHUNK)))
                .for_each(task);
        }
    } else if bd.len() == 1 && ad.len() == od.len() {
        let y = bd[0];
        for_chunks(od, CHUNK, ad, CHUNK, |o, x| {
            o.iter_mut().zip(x).for_each(|(o, &x)| *o = f(x, y));
            fin(o);
        });
    } else if ad.len() == 1 && bd.len() == od.len() {
        let x = ad[0];
        for_chunks(od, CHUNK, bd, CHUNK, |o, ys| {
            o.iter_mut().zip(ys).for_each(|(o, &y)| *o = f(x, y));
            fin(o);
        });
    } else if let Some(kind) = against(ad, &b.shape, od, &out.shape) {
        eval_against_broadcast(kind, ad, bd, od, fin, &f);
    } else if let Some(kind) = against(bd, &a.shape, od, &out.shape) {
        eval_against_broadcast(kind, bd, ad, od, fin, |y, x| f(x, y));
    } else {
        let sa = broadcast_strides(&a.shape, &out.shape);
        let sb = broadcast_strides(&b.shape, &out.shape);
        for_each_broadcast(&out.shape, [&sa, &sb], |o, [i, j]| od[o] = f(ad[i], bd[j]));
        fin(od);
    }
}

/// How a smaller operand repeats over `out`: as a block of trailing axes (a bias row, `Row`) or
/// one value per leading-axes index held over the trailing axes (a per-row statistic, `Held`).
#[derive(Clone, Copy)]
enum Broadcast {
    Row,
    Held,
}

/// The [`Broadcast`] pattern of `shape` against `out`, if it is one of the two.
fn broadcast_kind(shape: &[usize], out: &[usize]) -> Option<Broadcast> {
    let padded: Vec<usize> = std::iter::repeat_n(1, out.len() - shape.len())
        .chain(shape.iter().copied())
        .collect();
    // Row: ones then out's own trailing extents. Held: out's leading extents then ones.
    let first_full = padded.iter().zip(out).position(|(s, o)| s == o || *s != 1);
    let row = match first_full {
        Some(k) => padded[k..] == out[k..] && padded[..k].iter().all(|&s| s == 1),
        None => true,
    };
    if row {
        return Some(Broadcast::Row);
    }
    let last_full = padded.iter().zip(out).rposition(|(s, o)| s == o || *s != 1);
    let held = match last_full {
        Some(k) => padded[..=k] == out[..=k] && padded[k + 1..].iter().all(|&s| s == 1),
        None => true,
    };
    held.then_some(Broadcast::Held)
}

/// The pattern of the `small` operand's shape when `full` covers all of `od`.
fn against(full: &[f32], small: &[usize], od: &[f32], out: &[usize]) -> Option<Broadcast> {
    (full.len() == od.len() && !od.is_empty())
        .then(|| broadcast_kind(small, out))
        .flatten()
}

/// od[i] = f(full[i], small at i's broadcast position) for a `small` operand of pattern `kind`,
/// then `fin` on each task's outputs; split over the rayon pool in whole repeats when `od` has
/// at least [`PAR_MIN_ELEMS`] elements.
fn eval_against_broadcast(
    kind: Broadcast,
    full: &[f32],
    small: &[f32],
    od: &mut [f32],
    fin: impl Fn(&mut [f32]) + Sync,
    f: impl Fn(f32, f32) -> f32 + Sync,
) {
    if small.is_empty() {
        return;
    }
    // One repeat: a whole `small` row (Row) or one small value's run of `inner` elements (Held).
    let inner = od.len() / small.len();
    let unit = match kind {
        Broadcast::Row => small.len(),
        Broadcast::Held => inner,
    };
    let units = (PAR_MIN_ELEMS / 4).div_ceil(unit).max(1);
    let task = |(t, (o, x)): (usize, (&mut [f32], &[f32]))| {
        match kind {
            Broadcast::Row => {
                for (o, x) in o.chunks_mut(unit).zip(x.chunks(unit)) {
                    o.iter_mut()
                        .zip(x.iter().zip(small))
                        .for_each(|(o, (&x, &y))| *o = f(x, y));
                }
            }
            Broadcast::Held => {
                let ys = &small[t * units..];
                for ((o, x), &y) in o.chunks_mut(unit).zip(x.chunks(unit)).zip(ys) {
                    o.iter_mut().zip(x).for_each(|(o, &x)| *o = f(x, y));
                }
            }
        }
        fin(o);
    };
    let len = unit * units;
    if od.len() >= PAR_MIN_ELEMS {
        od.par_chunks_mut(len)
            .zip(full.par_chunks(len))
            .enumerate()
            .for_each(task);
    } else {
        od.chunks_mut(len)
            .zip(full.chunks(len))
            .enumerate()
            .for_each(task);
    }
}

impl Family for Binary {
    fn name(&self) -> &'static str {
        self.mil_name()
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_inputs(self.name(), inputs, 2)?;
        expect_fp16(self.name(), inputs)?;
        Ok(vec![TensorType::fp16(shape::broadcast(
            self.name(),
            &inputs[0].shape,
            &inputs[1].shape,
        )?)])
    }
    fn mil(&self) -> MilOp {
        MilOp::new(self.mil_name(), &["x", "y"])
    }
    fn eval(&self, ins: &[&Buf], out: &mut [Buf]) -> Result<()> {
        self.eval_maybe_rounded(ins, out, false);
        Ok(())
    }
}

impl Compare {
    /// The comparison on one pair of values.
    pub(crate) fn apply(self, a: f32, b: f32) -> bool {
        match self {
            Compare::Greater => a > b,
            Compare::Less => a < b,
            Compare::Equal => a == b,
            Compare::NotEqual => a != b,
            Compare::LessEqual => a <= b,
            Compare::GreaterEqual => a >= b,
        }
    }
}

impl Family for Compare {
    fn name(&self) -> &'static str {
        self.mil_name()
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_inputs(self.name(), inputs, 2)?;
        expect_fp16(self.name(), inputs)?;
        Ok(vec![TensorType {
            dtype: DType::Bool,
            shape: shape::broadcast(self.name(), &inputs[0].shape, &inputs[1].shape)?,
        }])
    }
    fn mil(&self) -> MilOp {
        MilOp::new(self.mil_name(), &["x", "y"])
    }
    fn eval(&self, ins: &[&Buf], out: &mut [Buf]) -> Result<()> {
        let f = *self;
        eval_broadcast2(ins[0], ins[1], &mut out[0], false, move |a, b| {
            f.apply(a, b) as u8 as f32
        });
        Ok(())
    }
}

impl Family for Select {
    fn name(&self) -> &'static str {
        SELECT
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_inputs(SELECT, inputs, 3)?;
        if inputs[0].dtype != DType::Bool {
            return Err(Error::dtype(
                SELECT,
                format!(
                    "cond must be bool (a comparison result), got {} {:?}",
                    inputs[0].dtype, inputs[0].shape
                ),
            ));
        }
        expect_fp16(SELECT, &inputs[1..])?;
        let ab = shape::broadcast(SELECT, &inputs[1].shape, &inputs[2].shape)?;
        Ok(vec![TensorType::fp16(shape::broadcast(
            SELECT,
            &inputs[0].shape,
            &ab,
        )?)])
    }
    fn mil(&self) -> MilOp {
        MilOp::new(SELECT, &["cond", "a", "b"])
    }
    fn eval(&self, ins: &[&Buf], out: &mut [Buf]) -> Result<()> {
        let o = &mut out[0];
        let s: Vec<Vec<usize>> = ins
            .iter()
            .map(|b| broadcast_strides(&b.shape, &o.shape))
            .collect();
        let (c, a, b) = (&ins[0].data, &ins[1].data, &ins[2].data);
        let od = &mut o.data;
        for_each_broadcast(&o.shape, [&s[0], &s[1], &s[2]], |k, [i, j, l]| {
            od[k] = if c[i] != 0.0 { a[j] } else { b[l] }
        });
        Ok(())
    }
}

/// Parse elementwise MIL statements.
pub fn from_mil(op: &str, _args: &mut MilArgs) -> Option<Result<Op>> {
    let op = Binary::from_mil_name(op)
        .map(Op::Binary)
        .or_else(|| Compare::from_mil_name(op).map(Op::Compare))
        .or_else(|| (op == SELECT).then_some(Op::Select(Select)))?;
    Some(Ok(op))
}

/// A finite fp16 parameter (rounded as MIL will print it); errors name `op`.
pub fn fp16_param(op: &str, what: &str, v: f32) -> Result<f32> {
    let r = round_f16(v);
    if !v.is_finite() || !r.is_finite() {
        return Err(Error::value(
            op,
            format!("{what} = {v} is not a finite fp16 value"),
        ));
    }
    Ok(r)
}

#[cfg(test)]
mod tests {

    use super::eval_broadcast2;
    use crate::ops::elementwise::Compare;
    use crate::ops::Buf;
    use crate::{compile, input, scalar, select, CompileOptions, Device, PortData, Program};

    #[test]
    fn select_with_scalar_branches_tiles_a_branch_to_the_condition_shape() {
        let x = input(&[2, 3]).unwrap();
        let y = select(
            &x.compare_scalar(Compare::Greater, 0.0).unwrap(),
            &scalar("t", 2.5).unwrap(),
            &scalar("t", -1.0).unwrap(),
        )
        .unwrap();
        assert_eq!(y.shape(), [2, 3]);
        let g = crate::Graph::from_outputs(&[(None, y.clone())]).unwrap();
        let mil = Program::lower(g).unwrap().mil;
        let line = mil.lines().find(|l| l.contains("= select(")).unwrap();
        assert!(
            line.trim_start().starts_with("tensor<fp16, [2, 3]>"),
            "{line}"
        );
        let a = mil
            .lines()
            .find(|l| l.contains("= tile("))
            .expect("the true branch is tiled");
        assert!(a.trim_start().starts_with("tensor<fp16, [2, 3]>"), "{a}");
        let opts = CompileOptions {
            device: Device::Reference,
            ..CompileOptions::default()
        };
        let xs = [0.5, -2.0, 0.0, 3.0, -0.25, 1e-3];
        let out = compile(&[(None, y)], &opts)
            .unwrap()
            .run(&[PortData::F32(&xs)])
            .unwrap();
        let want: Vec<f32> = xs
            .iter()
            .map(|&v| if v > 0.0 { 2.5 } else { -1.0 })
            .collect();
        assert_eq!(out[0], want);
    }

    /// Every broadcast pattern (row, held, both orders, general) against row-major index arithmetic.
    #[test]
    fn broadcast_fast_paths_match_index_arithmetic() {
        // The last two are large enough to split over the rayon pool.
        let cases: [(&[usize], &[usize]); 11] = [
            (&[2, 3, 4], &[4]),
            (&[2, 3, 4], &[3, 4]),
            (&[2, 3, 4], &[2, 3, 1]),
            (&[2, 3, 4], &[2, 1, 1]),
            (&[3, 4], &[2, 3, 4]),
            (&[2, 1, 4], &[2, 3, 4]),
            (&[1, 3, 1], &[2, 3, 4]),
            (&[2, 300, 128], &[128]),
            (&[2, 300, 1], &[2, 300, 128]),
            (&[2, 300, 128], &[1]),
            (&[1], &[2, 3, 4]),
        ];
        for (sa, sb) in cases {
            let out: Vec<usize> = (0..3)
                .map(|k| {
                    let at = |s: &[usize]| s.get((k + s.len()).wrapping_sub(3)).copied();
                    at(sa).unwrap_or(1).max(at(sb).unwrap_or(1))
                })
                .collect();
            let a = Buf {
                shape: sa.to_vec(),
                data: (0..sa.iter().product::<usize>())
                    .map(|v| v as f32)
                    .collect(),
            };
            let b = Buf {
                shape: sb.to_vec(),
                data: (0..sb.iter().product::<usize>())
                    .map(|v| 100.0 * v as f32)
                    .collect(),
            };
            let mut o = Buf::zeros(&out);
            eval_broadcast2(&a, &b, &mut o, false, |x, y| x - 0.5 * y);
            // The fused rounding gives the bits of rounding afterwards (values off the fp16 grid).
            let mut fused = Buf::zeros(&out);
            eval_broadcast2(&a, &b, &mut fused, true, |x, y| x - 0.5 * y + 1e-3);
            for (f, v) in fused.data.iter().zip(&o.data) {
                let want = half::f16::from_f32(v + 1e-3).to_f32();
                assert_eq!(f.to_bits(), want.to_bits(), "{sa:?} {sb:?} rounded");
            }
            let flat = |s: &[usize], [i, j, k]: [usize; 3]| {
                let pad = 3 - s.len();
                let idx = [i, j, k];
                (pad..3).fold(0, |acc, d| {
                    acc * s[d - pad] + if s[d - pad] == 1 { 0 } else { idx[d] }
                })
            };
            for i in 0..out[0] {
                for j in 0..out[1] {
                    for k in 0..out[2] {
                        let want = flat(sa, [i, j, k]) as f64 - 50.0 * flat(sb, [i, j, k]) as f64;
                        let got = o.data[(i * out[1] + j) * out[2] + k] as f64;
                        assert_eq!(got, want, "{sa:?} {sb:?} at {:?}", [i, j, k]);
                    }
                }
            }
        }
    }
}
