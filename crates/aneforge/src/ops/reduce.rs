//! Reductions over axes (mean, sum, max, min, l1/l2 norm, log-sum, sum of squares,
//! log-sum-exp) and softmax along one axis.

use super::io::{expect_fp16, expect_inputs};
use super::kernel::{broadcast_strides, exp_in_place, for_chunks, for_each_broadcast};
use super::layout::{check_axes, index_param, ints};
use super::table::mil_kinds;
use super::{reduce_lanes, Buf, Family, Op, TensorType};
use crate::error::{Error, Result};
use crate::mil::{Literal, MilArgs, MilOp};
use crate::shape;

mil_kinds! {
    /// Which reduction (MIL `reduce_<kind>`).
    pub enum ReduceKind {
        /// mean(x).
        Mean = "reduce_mean",
        /// sum(x).
        Sum = "reduce_sum",
        /// max(x).
        Max = "reduce_max",
        /// min(x).
        Min = "reduce_min",
        /// sqrt(sum(x²)); used by l2_norm and rms_norm.
        L2Norm = "reduce_l2_norm",
        /// sum(|x|).
        L1Norm = "reduce_l1_norm",
        /// ln(sum(x)).
        LogSum = "reduce_log_sum",
        /// sum(x²).
        SumSquare = "reduce_sum_square",
        /// ln(sum(e^x)), computed as m + ln(sum(e^(x − m))) with m the max (no overflow).
        LogSumExp = "reduce_log_sum_exp",
    }
}

/// The MIL name of [`Softmax`].
pub const SOFTMAX: &str = "softmax";

/// MIL `reduce_*(x, axes, keep_dims)`; `axes` are normalised (non-negative, sorted, unique).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reduce {
    pub kind: ReduceKind,
    pub axes: Vec<usize>,
    pub keep_dims: bool,
}

/// MIL `softmax(x, axis)`; `axis` normalised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Softmax {
    pub axis: usize,
}

impl Reduce {
    /// `shape` with the reduced axes set to 1.
    pub fn kept_shape(&self, shape: &[usize]) -> Vec<usize> {
        shape
            .iter()
            .enumerate()
            .map(|(i, &d)| if self.axes.contains(&i) { 1 } else { d })
            .collect()
    }

    /// Turn per-output maxima `y` into ln(sum(e^x)) = max + ln(sum(e^(x − max))).
    fn log_sum_exp_from_max(&self, x: &Buf, y: &mut [f32]) {
        let st = broadcast_strides(&self.kept_shape(&x.shape), &x.shape);
        let mut sum = vec![0f32; y.len()];
        for_each_broadcast(&x.shape, [&st], |i, [o]| sum[o] += (x.data[i] - y[o]).exp());
        y.iter_mut().zip(&sum).for_each(|(m, s)| *m += s.ln());
    }

    /// Fold every input element into its output accumulator (f32, starting at `init`); `sum`
    /// says f is `a + v` (whose reduced tails may run on `reduce_lanes`, the same additions).
    fn fold(
        &self,
        x: &Buf,
        y: &mut [f32],
        init: f32,
        f: impl Fn(f32, f32) -> f32 + Sync,
        sum: bool,
    ) {
        y.fill(init);
        let (first, last) = (self.axes[0], self.axes[self.axes.len() - 1]);
        if last - first + 1 == self.axes.len() {
            // Contiguous reduced axes: x is [outer, red, inner] and y is [outer, inner].
            // Reduced tail (inner 1): LANES outputs per chunk, their rows folded interleaved.
            let inner = shape::numel(&x.shape[last + 1..]);
            let block = shape::numel(&x.shape[first..=last]) * inner;
            let body = |acc: &mut [f32], xs: &[f32]| {
                if inner == 1 {
                    let lanes = <&mut [f32; LANES]>::try_from(&mut *acc).ok();
                    if !lanes.is_some_and(|a| sum && reduce_lanes::sum8(a, xs)) {
                        fold_each_row(acc, xs, &f);
                    }
                } else {
                    for row in xs.chunks_exact(inner) {
                        acc.iter_mut().zip(row).for_each(|(a, &v)| *a = f(*a, v));
                    }
                }
            };
            let (outs, ins) = if inner == 1 {
                (LANES, LANES * block)
            } else {
                (inner, block)
            };
            for_chunks(y, outs, &x.data, ins, body);
        } else {
            self.fold_rows(x, y, f);
        }
    }

    /// [`Reduce::fold`] for reduced axes that are not contiguous, in row-major order of x (the
    /// order every output accumulates in, so the bits are those of an element-by-element
    /// pass): x as rows of its trailing axes that are all reduced or all kept. A reduced tail
    /// folds each row into one output, eight rows with distinct outputs at a time (independent
    /// chains, each still in its own order); a kept tail folds rows into output rows.
    fn fold_rows(&self, x: &Buf, y: &mut [f32], f: impl Fn(f32, f32) -> f32) {
        let rank = x.shape.len();
        let tail_reduced = self.axes.contains(&(rank - 1));
        let split = (0..rank)
            .rev()
            .take_while(|a| self.axes.contains(a) == tail_reduced)
            .last()
            .unwrap_or(rank);
        let r = shape::numel(&x.shape[split..]);
        let kept = self.kept_shape(&x.shape);
        let st = broadcast_strides(&kept[..split], &x.shape[..split]);
        let mut outs = Vec::with_capacity(shape::numel(&x.shape[..split]));
        for_each_broadcast(&x.shape[..split], [&st], |_, [o]| outs.push(o));
        if !tail_reduced {
            for (row, &o) in x.data.chunks_exact(r).zip(&outs) {
                (y[o * r..(o + 1) * r].iter_mut().zip(row)).for_each(|(a, &v)| *a = f(*a, v));
            }
            return;
        }
        let mut i = 0;
        while i < outs.len() {
            let group = &outs[i..(i + LANES).min(outs.len())];
            let distinct = (1..group.len()).all(|k| !group[..k].contains(&group[k]));
            if group.len() == LANES && distinct {
                let mut acc: [f32; LANES] = std::array::from_fn(|k| y[group[k]]);
                fold_lanes(&mut acc, &x.data[i * r..(i + LANES) * r], &f);
                group.iter().zip(acc).for_each(|(&o, a)| y[o] = a);
                i += LANES;
            } else {
                let row = &x.data[i * r..(i + 1) * r];
                y[outs[i]] = row.iter().fold(y[outs[i]], |a, &v| f(a, v));
                i += 1;
            }
        }
    }
}

impl Family for Reduce {
    fn name(&self) -> &'static str {
        self.kind.mil_name()
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_inputs(self.name(), inputs, 1)?;
        expect_fp16(self.name(), inputs)?;
        let s = &inputs[0].shape;
        check_axes(self.name(), &self.axes, s.len(), s)?;
        let out: Vec<usize> = if self.keep_dims {
            self.kept_shape(s)
        } else {
            s.iter()
                .enumerate()
                .filter(|(i, _)| !self.axes.contains(i))
                .map(|(_, &d)| d)
                .collect()
        };
        if out.is_empty() {
            return Err(Error::shape(
                self.name(),
                format!(
                    "reducing every axis of {s:?} without keep_dims would give a rank-0 result (programs hold rank 1..=5 tensors): keep the dims, a [1, ..] result"
                ),
            ));
        }
        Ok(vec![TensorType::fp16(out)])
    }
    fn mil(&self) -> MilOp {
        MilOp::new(self.name(), &["x"])
            .param("axes", ints(&self.axes))
            .param("keep_dims", Literal::Bool(self.keep_dims))
    }
    /// Accumulates in f32; the ANE sums in fp16, so its large sums (above 2048) lose integer exactness and differ.
    fn eval(&self, ins: &[&Buf], out: &mut [Buf]) -> Result<()> {
        let (x, y) = (ins[0], &mut out[0].data);
        match self.kind {
            ReduceKind::Mean | ReduceKind::Sum | ReduceKind::LogSum => {
                self.fold(x, y, 0.0, |a, v| a + v, true)
            }
            ReduceKind::L2Norm | ReduceKind::SumSquare => {
                self.fold(x, y, 0.0, |a, v| a + v * v, false)
            }
            ReduceKind::L1Norm => self.fold(x, y, 0.0, |a, v| a + v.abs(), false),
            ReduceKind::Max | ReduceKind::LogSumExp => {
                self.fold(x, y, f32::NEG_INFINITY, f32::max, false)
            }
            ReduceKind::Min => self.fold(x, y, f32::INFINITY, f32::min, false),
        }
        let n = (x.data.len() / y.len()) as f32;
        match self.kind {
            ReduceKind::Mean => y.iter_mut().for_each(|v| *v /= n),
            ReduceKind::L2Norm => y.iter_mut().for_each(|v| *v = v.sqrt()),
            ReduceKind::LogSum => y.iter_mut().for_each(|v| *v = v.ln()),
            ReduceKind::LogSumExp => self.log_sum_exp_from_max(x, y),
            _ => {}
        }
        Ok(())
    }
}

/// Rows folded side by side: [`fold_lanes`] runs this many independent chains.
const LANES: usize = 8;

/// Fold `LANES` equal rows of `rows` into `acc`, row k into `acc[k]`, interleaved:
/// independent chains, each in its row's order (the bits of one row at a time).
fn fold_lanes(acc: &mut [f32; LANES], rows: &[f32], f: &impl Fn(f32, f32) -> f32) {
    let r = rows.len() / LANES;
    for p in 0..r {
        for (k, a) in acc.iter_mut().enumerate() {
            *a = f(*a, rows[k * r + p]);
        }
    }
}

/// Fold the `acc.len()` equal rows of `rows` into `acc`, row k into `acc[k]`, each in its
/// own order ([`fold_lanes`] when there are `LANES` of them).
fn fold_each_row(acc: &mut [f32], rows: &[f32], f: &impl Fn(f32, f32) -> f32) {
    if let Ok(lanes) = <&mut [f32; LANES]>::try_from(&mut *acc) {
        return fold_lanes(lanes, rows, f);
    }
    let r = rows.len() / acc.len().max(1);
    for (a, row) in acc.iter_mut().zip(rows.chunks_exact(r.max(1))) {
        *a = row.iter().fold(*a, |a, &v| f(a, v));
    }
}

/// Softmax of one `[n, inner]` block along its first axis, subtracting each column's max (f32).
fn softmax_block(x: &[f32], y: &mut [f32], inner: usize) {
    let mut max = vec![f32::NEG_INFINITY; inner];
    for row in x.chunks_exact(inner) {
        max.iter_mut().zip(row).for_each(|(m, &v)| *m = m.max(v));
    }
    let mut sum = vec![0f32; inner];
    for (yr, xr) in y.chunks_exact_mut(inner).zip(x.chunks_exact(inner)) {
        yr.iter_mut()
            .zip(xr)
            .zip(&max)
            .for_each(|((o, &v), &m)| *o = v - m);
        exp_in_place(yr);
        sum.iter_mut().zip(yr.iter()).for_each(|(s, &o)| *s += o);
    }
    for yr in y.chunks_exact_mut(inner) {
        yr.iter_mut().zip(&sum).for_each(|(o, &s)| *o /= s);
    }
}

/// Softmax of each contiguous row of `n` elements of x (the last-axis case; at most `LANES`
/// rows): subtract the row's max, exp, then multiply by 1 / the row's sum (f32, row order);
/// 8 rows at once in AVX2 lanes where `simd_softmax` applies (same bits).
pub(super) fn softmax_rows(x: &[f32], y: &mut [f32], n: usize) {
    if super::simd_softmax::try_softmax_rows(x, y, n) {
        return;
    }
    let rows = x.len() / n;
    let (mut max, mut sum) = ([f32::NEG_INFINITY; LANES], [0f32; LANES]);
    fold_each_row(&mut max[..rows], x, &f32::max);
    for ((yr, xr), &m) in y.chunks_exact_mut(n).zip(x.chunks_exact(n)).zip(&max) {
        yr.iter_mut().zip(xr).for_each(|(o, &v)| *o = v - m);
    }
    exp_in_place(y);
    fold_each_row(&mut sum[..rows], y, &|s, o| s + o);
    for (yr, &s) in y.chunks_exact_mut(n).zip(&sum) {
        let inv = 1.0 / s;
        yr.iter_mut().for_each(|o| *o *= inv);
    }
}

impl Family for Softmax {
    fn name(&self) -> &'static str {
        SOFTMAX
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_inputs(SOFTMAX, inputs, 1)?;
        expect_fp16(SOFTMAX, inputs)?;
        if self.axis >= inputs[0].shape.len() {
            return Err(Error::shape(
                SOFTMAX,
                format!(
                    "axis {} is out of range for {:?}",
                    self.axis, inputs[0].shape
                ),
            ));
        }
        Ok(vec![inputs[0].clone()])
    }
    fn mil(&self) -> MilOp {
        MilOp::new(SOFTMAX, &["x"]).param("axis", Literal::Int32(self.axis as i32))
    }
    fn eval(&self, ins: &[&Buf], out: &mut [Buf]) -> Result<()> {
        let (x, y) = (ins[0], &mut out[0].data);
        let inner = shape::numel(&x.shape[self.axis + 1..]);
        let block = x.shape[self.axis] * inner;
        if inner == 1 {
            let rows = LANES * block;
            for_chunks(y, rows, &x.data, rows, |ys, xs| softmax_rows(xs, ys, block));
        } else {
            for_chunks(y, block, &x.data, block, |ys, xs| {
                softmax_block(xs, ys, inner)
            });
        }
        Ok(())
    }
}

/// Parse reductions and softmax.
pub fn from_mil(op: &str, args: &mut MilArgs) -> Option<Result<Op>> {
    if op == SOFTMAX {
        return Some(index_param(args, "axis").map(|axis| Op::Softmax(Softmax { axis })));
    }
    let kind = ReduceKind::from_mil_name(op)?;
    Some((|| {
        Ok(Op::Reduce(Reduce {
            kind,
            axes: args.sizes("axes")?,
            keep_dims: args.bool("keep_dims")?,
        }))
    })())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::ops::layout::tests::{buf, mil_args, ravel, round_trip, run, unravel};
    use crate::{input, input_port, DType};

    /// f64 reduction of `x` over `axes`, in keep_dims layout.
    fn naive(kind: ReduceKind, x: &Buf, axes: &[usize]) -> Vec<f64> {
        let kept: Vec<usize> = x
            .shape
            .iter()
            .enumerate()
            .map(|(i, &d)| if axes.contains(&i) { 1 } else { d })
            .collect();
        let mut groups = vec![Vec::new(); shape::numel(&kept)];
        for (i, &v) in x.data.iter().enumerate() {
            let mut idx = unravel(i, &x.shape);
            axes.iter().for_each(|&a| idx[a] = 0);
            groups[ravel(&idx, &kept)].push(v as f64);
        }
        let sum = |g: &Vec<f64>| g.iter().sum::<f64>();
        groups
            .iter()
            .map(|g| match kind {
                ReduceKind::Sum => sum(g),
                ReduceKind::Mean => sum(g) / g.len() as f64,
                ReduceKind::Max => g.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                ReduceKind::Min => g.iter().copied().fold(f64::INFINITY, f64::min),
                ReduceKind::L2Norm => g.iter().map(|v| v * v).sum::<f64>().sqrt(),
                ReduceKind::L1Norm => g.iter().map(|v| v.abs()).sum(),
                ReduceKind::LogSum => sum(g).ln(),
                ReduceKind::SumSquare => g.iter().map(|v| v * v).sum(),
                ReduceKind::LogSumExp => g.iter().map(|v| v.exp()).sum::<f64>().ln(),
            })
            .collect()
    }

    fn assert_close(got: &[f32], want: &[f64], what: &str) {
        assert_eq!(got.len(), want.len(), "{what}");
        for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
            assert!(
                (g as f64 - w).abs() <= 1e-4 * (1.0 + w.abs()),
                "{what}: element {i}: got {g}, want {w}"
            );
        }
    }

    /// Reduced axes (the row paths of `fold_rows`, eight-row groups with and without repeated
    /// outputs, kept and reduced tails; contiguous reduced tails folded eight rows at a time
    /// with a partial last group) give the bits of an f32 fold of each output's elements in
    /// x's row-major order, written out here.
    #[test]
    fn reductions_fold_in_row_major_order_bit_for_bit() {
        let cases: [(&[usize], &[usize]); 8] = [
            (&[5, 16, 7, 9], &[0, 2, 3]),
            (&[3, 5, 4, 2], &[1, 3]),
            (&[2, 3, 4, 5, 6], &[1, 3]),
            (&[2, 3, 4, 5, 6], &[0, 2, 4]),
            (&[9, 1, 11], &[0, 2]),
            (&[13, 40], &[1]),
            (&[2, 9, 3, 17], &[2, 3]),
            (&[41, 1000], &[1]),
        ];
        type Case = (ReduceKind, f32, fn(f32, f32) -> f32);
        let kinds: [Case; 4] = [
            (ReduceKind::Sum, 0.0, |a, v| a + v),
            (ReduceKind::SumSquare, 0.0, |a, v| a + v * v),
            (ReduceKind::Max, f32::NEG_INFINITY, f32::max),
            (ReduceKind::Min, f32::INFINITY, f32::min),
        ];
        for (shape, axes) in cases {
            let x = buf(shape, 11);
            let kept: Vec<usize> = (shape.iter().enumerate())
                .map(|(i, &d)| if axes.contains(&i) { 1 } else { d })
                .collect();
            for (kind, init, f) in kinds {
                let mut want = vec![init; shape::numel(&kept)];
                for (i, &v) in x.data.iter().enumerate() {
                    let mut idx = unravel(i, shape);
                    axes.iter().for_each(|&a| idx[a] = 0);
                    let o = ravel(&idx, &kept);
                    want[o] = f(want[o], v);
                }
                let op = Op::Reduce(Reduce {
                    kind,
                    axes: axes.to_vec(),
                    keep_dims: true,
                });
                let got = run(&op, &[&x]).remove(0).data;
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&want), "{kind:?} {shape:?} over {axes:?}");
            }
        }
    }

    #[test]
    fn reductions_match_naive_on_awkward_shapes() {
        let cases: [(&[usize], &[usize]); 10] = [
            (&[783], &[0]),
            (&[7, 783], &[1]),
            (&[7, 783], &[0]),
            (&[7, 783], &[0, 1]),
            (&[3, 1, 7, 5], &[0, 2]),
            (&[2, 3, 4, 5, 6], &[1, 3]),
            (&[2, 3, 4, 5, 6], &[1, 2, 3]),
            (&[2, 3, 4, 5, 6], &[0, 4]),
            (&[40, 2, 1000], &[1]),
            (&[70, 1000], &[1]),
        ];
        for (shape, axes) in cases {
            let x = buf(shape, 7);
            let positive = Buf {
                shape: x.shape.clone(),
                data: x.data.iter().map(|v| v.abs() + 0.01).collect(),
            };
            for &kind in ReduceKind::ALL {
                let x = if kind == ReduceKind::LogSum {
                    &positive
                } else {
                    &x
                };
                for keep_dims in [true, false] {
                    let op = Op::Reduce(Reduce {
                        kind,
                        axes: axes.to_vec(),
                        keep_dims,
                    });
                    if axes.len() == shape.len() && !keep_dims {
                        assert!(op
                            .family()
                            .infer(&[TensorType::fp16(shape.to_vec())])
                            .is_err());
                        continue;
                    }
                    let y = run(&op, &[x]).remove(0);
                    assert_close(
                        &y.data,
                        &naive(kind, x, axes),
                        &format!("{kind:?} {shape:?} over {axes:?}"),
                    );
                }
            }
        }
    }

    #[test]
    fn softmax_matches_naive_and_is_stable() {
        for (shape, axis) in [
            (vec![783], 0),
            (vec![3, 7, 5], 1),
            (vec![3, 7, 5], 2),
            (vec![2, 1, 3, 4, 5], 1),
            (vec![2, 1, 3, 4, 5], 0),
            (vec![300, 4, 60], 1),
        ] {
            let x = buf(&shape, 3);
            let y = run(&Op::Softmax(Softmax { axis }), &[&x]).remove(0);
            let want: Vec<f64> = (0..x.data.len())
                .map(|i| {
                    let idx = unravel(i, &shape);
                    let row = (0..shape[axis]).map(|j| {
                        let mut k = idx.clone();
                        k[axis] = j;
                        x.data[ravel(&k, &shape)] as f64
                    });
                    let m = row.clone().fold(f64::NEG_INFINITY, f64::max);
                    (x.data[i] as f64 - m).exp() / row.map(|v| (v - m).exp()).sum::<f64>()
                })
                .collect();
            assert_close(&y.data, &want, &format!("softmax {shape:?} axis {axis}"));
        }
        let big = Buf {
            shape: vec![2, 3],
            data: vec![60000.0, 59990.0, -60000.0, -65504.0, 65504.0, 0.0],
        };
        let y = run(&Op::Softmax(Softmax { axis: 1 }), &[&big]).remove(0);
        assert!(y.data.iter().all(|v| v.is_finite()));
        assert_close(
            &y.data[..2],
            &[
                1.0 / (1.0 + (-10f64).exp()),
                (-10f64).exp() / (1.0 + (-10f64).exp()),
            ],
            "big",
        );
    }

    /// Last-axis softmax (rows eight at a time, a partial last group, the parallel split, a
    /// NaN and a −inf; the AVX2 lanes' widths, n a multiple of 8, with an all −inf row, a row
    /// of ±0 whose max is a zero, and a row whose x − max falls past e^x's range) gives the
    /// bits of one row at a time in f32, written out here: max fold, x − max, exp, sum in row
    /// order, times 1 / sum.
    #[test]
    fn last_axis_softmax_is_the_row_by_row_f32_bits() {
        let shapes = [
            vec![13, 40],
            vec![2, 3, 7],
            vec![50, 700],
            vec![3, 16, 128],
            vec![21, 8],
            vec![600, 64],
        ];
        for shape in shapes {
            let mut x = buf(&shape, 5);
            x.data[3] = f32::NAN;
            x.data[5] = f32::NEG_INFINITY;
            let n = shape[shape.len() - 1];
            if x.data.len() >= 21 * n {
                x.data[9 * n..10 * n].fill(f32::NEG_INFINITY);
                x.data[17 * n..18 * n]
                    .iter_mut()
                    .enumerate()
                    .for_each(|(i, v)| *v = if i % 3 == 0 { 0.0 } else { -0.0 });
                x.data[20 * n..21 * n]
                    .iter_mut()
                    .enumerate()
                    .for_each(|(i, v)| *v = if i % 2 == 0 { 60000.0 } else { -60000.0 });
            }
            let mut want = Vec::new();
            for row in x.data.chunks_exact(n) {
                let m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let e: Vec<f32> = row.iter().map(|&v| (v - m).exp()).collect();
                let inv = 1.0 / e.iter().fold(0f32, |s, &v| s + v);
                want.extend(e.iter().map(|&v| v * inv));
            }
            let axis = shape.len() - 1;
            let got = run(&Op::Softmax(Softmax { axis }), &[&x]).remove(0).data;
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "softmax {shape:?}");
        }
    }

    /// log_sum_exp of values near fp16's limits stays finite (the max is subtracted first).
    #[test]
    fn log_sum_exp_is_stable() {
        let big = Buf {
            shape: vec![2, 3],
            data: vec![60000.0, 59990.0, -60000.0, -65504.0, -65500.0, -65504.0],
        };
        let op = Op::Reduce(Reduce {
            kind: ReduceKind::LogSumExp,
            axes: vec![1],
            keep_dims: true,
        });
        let y = run(&op, &[&big]).remove(0);
        let lse = |v: &[f64]| {
            let m = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            m + v.iter().map(|x| (x - m).exp()).sum::<f64>().ln()
        };
        assert_close(
            &y.data,
            &[
                lse(&[60000.0, 59990.0, -60000.0]),
                lse(&[-65504.0, -65500.0, -65504.0]),
            ],
            "big",
        );
    }

    #[test]
    fn builders_and_errors() {
        let x = input(&[2, 3, 4]).unwrap();
        assert_eq!(x.mean(&[-1], true).unwrap().shape(), [2, 3, 1]);
        assert_eq!(x.sum(&[0, 2], false).unwrap().shape(), [3]);
        assert_eq!(x.amax(&[2, -3], false).unwrap().shape(), [3]);
        assert_eq!(x.amin(&[1], false).unwrap().shape(), [2, 4]);
        assert_eq!(
            x.reduce_l2_norm(&[0, 1, 2], true).unwrap().shape(),
            [1, 1, 1]
        );
        assert_eq!(x.l1_norm(&[1], true).unwrap().shape(), [2, 1, 4]);
        assert_eq!(x.log_sum(&[-1], false).unwrap().shape(), [2, 3]);
        assert_eq!(x.sum_square(&[0], false).unwrap().shape(), [3, 4]);
        assert_eq!(x.log_sum_exp(&[0, 2], true).unwrap().shape(), [1, 3, 1]);
        assert_eq!(
            x.softmax(-2).unwrap().op(),
            &Op::Softmax(Softmax { axis: 1 })
        );
        let u = input_port(&[2, 3], DType::Uint8, None).unwrap();
        let errs = [
            x.mean(&[3], true),
            x.sum(&[-4], true),
            x.amax(&[0, -3], true),
            x.amin(&[], true),
            x.sum(&[0, 1, 2], false),
            input(&[783]).unwrap().mean(&[0], false),
            u.sum(&[0], true),
            x.l1_norm(&[3], true),
            x.log_sum(&[0, 0], true),
            u.sum_square(&[0], true),
            x.log_sum_exp(&[0, 1, 2], false),
            x.softmax(3),
            u.softmax(0),
        ];
        for (i, e) in errs.iter().enumerate() {
            assert!(e.is_err(), "case {i} should fail");
        }
        let msg = x.sum(&[0, 1, 2], false).unwrap_err().to_string();
        assert!(
            msg.contains("reduce_sum") && msg.contains("[2, 3, 4]"),
            "{msg}"
        );
        let unsorted = Reduce {
            kind: ReduceKind::Sum,
            axes: vec![1, 0],
            keep_dims: true,
        };
        assert!(unsorted.infer(&[TensorType::fp16(vec![2, 3])]).is_err());
    }

    #[test]
    fn mil_round_trip() {
        for &kind in ReduceKind::ALL {
            for keep_dims in [true, false] {
                round_trip(
                    &Op::Reduce(Reduce {
                        kind,
                        axes: vec![0, 2],
                        keep_dims,
                    }),
                    from_mil,
                );
            }
        }
        round_trip(&Op::Softmax(Softmax { axis: 3 }), from_mil);
        let bad = [
            (
                "reduce_sum",
                vec![
                    ("axes", Literal::Ints(vec![0])),
                    ("keep_dims", Literal::Int32(1)),
                ],
            ),
            (
                "reduce_max",
                vec![
                    ("axes", Literal::Ints(vec![-1])),
                    ("keep_dims", Literal::Bool(true)),
                ],
            ),
            ("reduce_min", vec![("keep_dims", Literal::Bool(true))]),
            ("softmax", vec![("axis", Literal::Int32(-1))]),
            ("softmax", vec![("axis", Literal::Fp16(1.0))]),
        ];
        for (op, params) in bad {
            assert!(
                from_mil(op, &mut mil_args(params)).unwrap().is_err(),
                "{op}"
            );
        }
        assert!(from_mil("reduce_prod", &mut mil_args(vec![])).is_none());
    }
}
