//! Data movement: reshape, transpose, concat, split, slice_by_size, squeeze, expand_dims and
//! nearest-neighbour upsample.

use std::ops::Range;

use super::io::{expect_fp16, expect_inputs};
use super::kernel::{for_chunks, PAR_MIN_ELEMS};
use super::table::mil_kinds;
use super::{Buf, Family, Op, TensorType};
use crate::error::{Error, Result};
use crate::mil::{Literal, MilArgs, MilInputs, MilOp};
use crate::shape::{self, Shape, MAX_RANK};

mil_kinds! {
    Layout =>
    /// The MIL op of each [`Layout`] variant.
    pub enum LayoutOp {
        Reshape = "reshape",
        Transpose = "transpose",
        Concat = "concat",
        Split = "split",
        SliceBySize = "slice_by_size",
        Squeeze = "squeeze",
        ExpandDims = "expand_dims",
        Upsample = "upsample_nearest_neighbor",
    }
}

/// MIL ops this family prints.
pub const MIL_OPS: &[&str] = LayoutOp::MIL_NAMES;

/// Data-movement ops. Axes are stored normalised (non-negative).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Layout {
    /// MIL `reshape(x, shape)`; same element count.
    Reshape { shape: Vec<usize> },
    /// MIL `transpose(x, perm)`.
    Transpose { perm: Vec<usize> },
    /// MIL `concat(values, axis, interleave = false)`; 1+ inputs.
    Concat { axis: usize },
    /// MIL `split(x, split_sizes, axis)`; one output per size.
    Split { axis: usize, sizes: Vec<usize> },
    /// MIL `slice_by_size(x, begin, size)`.
    SliceBySize { begin: Vec<usize>, size: Vec<usize> },
    /// MIL `squeeze(x, axes)`; squeezed axes must have extent 1.
    Squeeze { axes: Vec<usize> },
    /// MIL `expand_dims(x, axes)`; axes index the output.
    ExpandDims { axes: Vec<usize> },
    /// MIL `upsample_nearest_neighbor(x, scale_factor_height, scale_factor_width)` (int32 factors), rank 3+.
    Upsample { scale_h: usize, scale_w: usize },
}

/// Element count without overflow (for shapes already checked to rank ≤ 5, extents ≤ 65536).
pub fn count(shape: &[usize]) -> u128 {
    shape.iter().map(|&d| d as u128).product()
}

/// Check normalised `axes` are non-empty, strictly increasing and below `rank`; errors name `op` and `shape`.
pub(crate) fn check_axes(op: &str, axes: &[usize], rank: usize, shape: &[usize]) -> Result<()> {
    if axes.is_empty() || axes.windows(2).any(|w| w[0] >= w[1]) || axes.iter().any(|&a| a >= rank) {
        return Err(Error::shape(op, format!("axes {axes:?} must be non-empty, sorted, unique and below rank {rank} (input shape {shape:?})")));
    }
    Ok(())
}

/// An int32 tensor literal of sizes or axes (every value in a valid graph is ≤ 65536).
pub(crate) fn ints(v: &[usize]) -> Literal {
    Literal::Ints(v.iter().map(|&x| x as i32).collect())
}

/// Take a non-negative int32 parameter (an axis or a factor).
pub(crate) fn index_param(args: &mut MilArgs, name: &str) -> Result<usize> {
    let v = args.int(name)?;
    usize::try_from(v)
        .map_err(|_| args.error(format!("parameter '{name}' must be non-negative, got {v}")))
}

impl Family for Layout {
    fn name(&self) -> &'static str {
        self.mil_name()
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let op = self.name();
        let one = || expect_inputs(op, inputs, 1).map(|_| inputs[0].shape.clone());
        let err = |msg: String| Err(Error::shape(op, msg));
        let shapes: Vec<Shape> = match self {
            Layout::Reshape { shape } => {
                let s = one()?;
                shape::check(op, shape)?;
                if count(shape) != count(&s) {
                    return err(format!(
                        "cannot reshape {s:?} ({} elements) to {shape:?} ({} elements)",
                        count(&s),
                        count(shape)
                    ));
                }
                vec![shape.clone()]
            }
            Layout::Transpose { perm } => {
                let s = one()?;
                let mut sorted = perm.clone();
                sorted.sort_unstable();
                if !sorted.iter().copied().eq(0..s.len()) {
                    return err(format!(
                        "perm {perm:?} is not a permutation of the axes of {s:?}"
                    ));
                }
                vec![perm.iter().map(|&p| s[p]).collect()]
            }
            Layout::Concat { axis } => {
                let first = inputs
                    .first()
                    .ok_or_else(|| Error::shape(op, "needs at least one input"))?;
                let s0 = &first.shape;
                if *axis >= s0.len() {
                    return err(format!("axis {axis} is out of range for input 0 {s0:?}"));
                }
                let mut out = s0.clone();
                out[*axis] = 0;
                for (k, t) in inputs.iter().enumerate() {
                    if t.dtype != first.dtype {
                        return Err(Error::dtype(
                            op,
                            format!(
                                "input {k} is {} {:?} but input 0 is {} {s0:?}",
                                t.dtype, t.shape, first.dtype
                            ),
                        ));
                    }
                    let fits = t.shape.len() == s0.len()
                        && t.shape
                            .iter()
                            .zip(s0)
                            .enumerate()
                            .all(|(i, (a, b))| i == *axis || a == b);
                    if !fits {
                        return err(format!("input {k} has shape {:?}, which does not match input 0 {s0:?} on every axis but {axis}", t.shape));
                    }
                    out[*axis] = out[*axis].saturating_add(t.shape[*axis]);
                }
                vec![out]
            }
            Layout::Split { axis, sizes } => {
                let s = one()?;
                let Some(&ext) = s.get(*axis) else {
                    return err(format!("axis {axis} is out of range for {s:?}"));
                };
                if sizes.is_empty()
                    || sizes.contains(&0)
                    || sizes.iter().map(|&n| n as u128).sum::<u128>() != ext as u128
                {
                    return err(format!("split sizes {sizes:?} must be >= 1 and sum to extent {ext} (axis {axis} of {s:?})"));
                }
                sizes
                    .iter()
                    .map(|&n| {
                        s.iter()
                            .enumerate()
                            .map(|(i, &d)| if i == *axis { n } else { d })
                            .collect()
                    })
                    .collect()
            }
            Layout::SliceBySize { begin, size } => {
                let s = one()?;
                let inside = |((&b, &n), &d): ((&usize, &usize), &usize)| {
                    n >= 1 && b.checked_add(n).is_some_and(|e| e <= d)
                };
                if begin.len() != s.len()
                    || size.len() != s.len()
                    || !begin.iter().zip(size).zip(&s).all(inside)
                {
                    return err(format!(
                        "begin {begin:?} with size {size:?} is out of bounds for shape {s:?}"
                    ));
                }
                vec![size.clone()]
            }
            Layout::Squeeze { axes } => {
                let s = one()?;
                check_axes(op, axes, s.len(), &s)?;
                if let Some(&a) = axes.iter().find(|&&a| s[a] != 1) {
                    return err(format!(
                        "axis {a} of {s:?} has extent {}; only extent-1 axes can be squeezed",
                        s[a]
                    ));
                }
                if axes.len() == s.len() {
                    return err(format!(
                        "squeezing every axis of {s:?} would leave a rank-0 result (programs hold rank 1..=5 tensors): keep one axis"
                    ));
                }
                vec![s
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| !axes.contains(i))
                    .map(|(_, &d)| d)
                    .collect()]
            }
            Layout::ExpandDims { axes } => {
                let mut s = one()?;
                let rank = s.len() + axes.len();
                if rank > MAX_RANK {
                    return err(format!(
                        "expanding {s:?} by {} axes gives rank {rank} > {MAX_RANK}",
                        axes.len()
                    ));
                }
                check_axes(op, axes, rank, &s)?;
                // Sorted, unique and < rank, so each insertion point is within the growing shape.
                axes.iter().for_each(|&a| s.insert(a, 1));
                vec![s]
            }
            Layout::Upsample { scale_h, scale_w } => {
                let mut s = one()?;
                expect_fp16(op, inputs)?;
                let r = s.len();
                if r < 3 || *scale_h == 0 || *scale_w == 0 {
                    return err(format!("needs rank >= 3 and scales >= 1, got shape {s:?} with scales ({scale_h}, {scale_w})"));
                }
                s[r - 2] = s[r - 2].saturating_mul(*scale_h);
                s[r - 1] = s[r - 1].saturating_mul(*scale_w);
                vec![s]
            }
        };
        Ok(shapes
            .into_iter()
            .map(|shape| TensorType {
                dtype: inputs[0].dtype,
                shape,
            })
            .collect())
    }
    fn mil(&self) -> MilOp {
        let x = MilOp::new(self.name(), &["x"]);
        match self {
            Layout::Reshape { shape } => x.param("shape", ints(shape)),
            Layout::Transpose { perm } => x.param("perm", ints(perm)),
            Layout::Concat { axis } => MilOp {
                op: LayoutOp::Concat.mil_name(),
                params: vec![
                    ("axis", Literal::Int32(*axis as i32)),
                    ("interleave", Literal::Bool(false)),
                ],
                inputs: MilInputs::Tuple("values"),
                blobs: Vec::new(),
            },
            Layout::Split { axis, sizes } => x
                .param("axis", Literal::Int32(*axis as i32))
                .param("split_sizes", ints(sizes)),
            Layout::SliceBySize { begin, size } => {
                x.param("begin", ints(begin)).param("size", ints(size))
            }
            Layout::Squeeze { axes } | Layout::ExpandDims { axes } => x.param("axes", ints(axes)),
            Layout::Upsample { scale_h, scale_w } => x
                .param("scale_factor_height", Literal::Int32(*scale_h as i32))
                .param("scale_factor_width", Literal::Int32(*scale_w as i32)),
        }
    }
    fn eval(&self, ins: &[&Buf], out: &mut [Buf]) -> Result<()> {
        let x = ins[0];
        match self {
            Layout::Reshape { .. } | Layout::Squeeze { .. } | Layout::ExpandDims { .. } => {
                const CHUNK: usize = PAR_MIN_ELEMS / 4;
                for_chunks(&mut out[0].data, CHUNK, &x.data, CHUNK, |o, i| {
                    o.copy_from_slice(i)
                })
            }
            Layout::Transpose { perm } => {
                let st = shape::strides(&x.shape);
                let permuted: Vec<usize> = perm.iter().map(|&p| st[p]).collect();
                gather(&x.data, 0, &permuted, &mut out[0]);
            }
            Layout::SliceBySize { begin, .. } => {
                let st = shape::strides(&x.shape);
                let base = begin.iter().zip(&st).map(|(b, s)| b * s).sum();
                gather(&x.data, base, &st, &mut out[0]);
            }
            Layout::Concat { axis } => {
                let parts: Vec<&[usize]> = ins.iter().map(|b| b.shape.as_slice()).collect();
                let y = &mut out[0];
                for_each_block(*axis, &y.shape, &parts, |k, p, w| {
                    y.data[w].copy_from_slice(&ins[k].data[p])
                });
            }
            Layout::Split { axis, .. } => {
                let shapes: Vec<Shape> = out.iter().map(|b| b.shape.clone()).collect();
                let parts: Vec<&[usize]> = shapes.iter().map(Vec::as_slice).collect();
                for_each_block(*axis, &x.shape, &parts, |k, p, w| {
                    out[k].data[p].copy_from_slice(&x.data[w])
                });
            }
            Layout::Upsample { scale_h, scale_w } => upsample(x, *scale_h, *scale_w, &mut out[0]),
        }
        Ok(())
    }
}

/// Fill `out` in row-major order from `src[base + Σ index·strides]`. Axes that are one run in
/// the source merge first (a transpose that keeps [H, W] together copies H·W-long rows); unit-
/// stride rows are block copies (short ones by 8-float moves), and a last axis read across
/// unit-stride columns (a transpose moving the last axis) copies whole [rows, n] blocks in
/// [`TILE`]-square tiles. Split into tasks of whole rows over the rayon pool from
/// [`PAR_MIN_ELEMS`] output elements; each task divides once and then counts its rows' offsets.
fn gather(src: &[f32], base: usize, strides: &[usize], out: &mut Buf) {
    let (shape, strides) = merge_runs(&out.shape, strides);
    let r = shape.len();
    let (n, s) = (shape[r - 1], strides[r - 1]);
    let tiled = r >= 2 && s != 1 && strides[r - 2] == 1;
    let copy = |d: &mut [f32], o: usize| {
        if tiled {
            transpose_block(src, o, s, n, d);
        } else if s == 1 {
            copy_row(d, &src[o..o + n]);
        } else {
            d.iter_mut()
                .enumerate()
                .for_each(|(j, v)| *v = src[o + j * s]);
        }
    };
    let inner = if tiled { r - 2 } else { r - 1 };
    let block = shape::numel(&shape[inner..]);
    let (outer, outer_st) = (&shape[..inner], &strides[..inner]);
    let dst = &mut out.data;
    if block == 0 || dst.is_empty() {
        return;
    }
    let rows = dst.len() / block;
    let task_rows = match dst.len() >= PAR_MIN_ELEMS {
        true => (PAR_MIN_ELEMS / 4 / block).clamp(1, rows),
        false => rows,
    };
    let task = |t: usize, d: &mut [f32]| {
        let mut at = RowOffsets::new(outer, outer_st, base, t * task_rows);
        for d in d.chunks_exact_mut(block) {
            copy(d, at.next_row());
        }
    };
    if task_rows < rows {
        use rayon::prelude::*;
        dst.par_chunks_mut(task_rows * block)
            .enumerate()
            .for_each(|(t, d)| task(t, d));
    } else {
        task(0, dst);
    }
}

/// `shape` and `strides` without unit axes and with each pair of neighbouring axes that is one
/// run in the source (stride[k] = stride[k + 1]·shape[k + 1]) merged; at least one axis.
fn merge_runs(shape: &[usize], strides: &[usize]) -> (Vec<usize>, Vec<usize>) {
    let (mut sh, mut st): (Vec<usize>, Vec<usize>) = (Vec::new(), Vec::new());
    for (&e, &s) in shape.iter().zip(strides).filter(|(&e, _)| e != 1) {
        match (sh.last_mut(), st.last_mut()) {
            (Some(pe), Some(ps)) if *ps == s * e => (*pe, *ps) = (*pe * e, s),
            _ => {
                sh.push(e);
                st.push(s);
            }
        }
    }
    if sh.is_empty() {
        (sh, st) = (vec![1], vec![1]);
    }
    (sh, st)
}

/// d = s for one row (equal lengths): rows of 8 to 64 floats by 8-float moves, the last one
/// overlapping (no `memcpy` call per short row), other lengths by `copy_from_slice`.
fn copy_row(d: &mut [f32], s: &[f32]) {
    let n = d.len();
    if !(8..=64).contains(&n) {
        d.copy_from_slice(s);
        return;
    }
    for k in (0..n - 8).step_by(8) {
        d[k..k + 8].copy_from_slice(&s[k..k + 8]);
    }
    d[n - 8..].copy_from_slice(&s[n - 8..]);
}

/// The source offsets of consecutive rows (outer indices in row-major order) from a first row:
/// its digits are found by division once, then every step counts.
struct RowOffsets<'a> {
    shape: &'a [usize],
    strides: &'a [usize],
    idx: Vec<usize>,
    off: usize,
}

impl<'a> RowOffsets<'a> {
    /// Offsets from row `first` of an index space `shape` read with `strides` from `base`.
    fn new(shape: &'a [usize], strides: &'a [usize], base: usize, first: usize) -> Self {
        let mut idx = vec![0; shape.len()];
        let (mut rem, mut off) = (first, base);
        for ax in (0..shape.len()).rev() {
            (idx[ax], rem) = (rem % shape[ax], rem / shape[ax]);
            off += idx[ax] * strides[ax];
        }
        RowOffsets {
            shape,
            strides,
            idx,
            off,
        }
    }

    /// The current row's offset; then advances to the next row.
    fn next_row(&mut self) -> usize {
        let at = self.off;
        for ax in (0..self.shape.len()).rev() {
            self.idx[ax] += 1;
            self.off += self.strides[ax];
            if self.idx[ax] < self.shape[ax] {
                break;
            }
            self.off -= self.strides[ax] * self.shape[ax];
            self.idx[ax] = 0;
        }
        at
    }
}

/// Side of the square tiles in which [`transpose_block`] copies.
const TILE: usize = 8;

/// d[i·n + j] = src[o + i + j·s] for the d.len() / n rows i and the n columns j, tile by tile: each
/// tile reads TILE unit-stride runs of the source and writes TILE-long runs of TILE rows.
fn transpose_block(src: &[f32], o: usize, s: usize, n: usize, d: &mut [f32]) {
    let m = d.len() / n;
    for i0 in (0..m).step_by(TILE) {
        let rows = TILE.min(m - i0);
        for j0 in (0..n).step_by(TILE) {
            for j in j0..(j0 + TILE).min(n) {
                let column = &src[o + i0 + j * s..][..rows];
                for (k, &v) in column.iter().enumerate() {
                    d[(i0 + k) * n + j] = v;
                }
            }
        }
    }
}

/// For `parts` laid side by side along `axis` of `whole`, call `f(part, part_range, whole_range)` per contiguous block.
pub(crate) fn for_each_block(
    axis: usize,
    whole: &[usize],
    parts: &[&[usize]],
    mut f: impl FnMut(usize, Range<usize>, Range<usize>),
) {
    let row = shape::numel(&whole[axis..]);
    let mut off = 0;
    for (k, p) in parts.iter().enumerate() {
        let n = shape::numel(&p[axis..]);
        for r in 0..shape::numel(&p[..axis]) {
            f(k, r * n..(r + 1) * n, r * row + off..r * row + off + n);
        }
        off += n;
    }
}

/// Nearest-neighbour upsample of the last two axes: each input row becomes `sh` rows of `sw`-fold repeats.
fn upsample(x: &Buf, sh: usize, sw: usize, out: &mut Buf) {
    let w = x.shape[x.shape.len() - 1];
    let ow = w * sw;
    for (i, row) in x.data.chunks_exact(w).enumerate() {
        let first = i * sh * ow;
        widen(row, sw, 0, &mut out.data[first..first + ow]);
        for k in 1..sh {
            out.data.copy_within(first..first + ow, first + k * ow);
        }
    }
}

/// Elements `start..start + out.len()` (row-major) of the nearest-neighbour upsample by
/// (`sh`, `sw`) of `x`, whose rows are `w` long (the last two axes upsampled). Divides once per
/// call: the output row, its column and its source row advance by counting.
pub(crate) fn upsample_range(x: &[f32], [w, sh, sw]: [usize; 3], start: usize, out: &mut [f32]) {
    let ow = w * sw;
    let (row, mut col) = (start / ow, start % ow);
    let (mut src, mut repeat) = (row / sh * w, row % sh);
    let mut rest = out;
    while !rest.is_empty() {
        let cut = (ow - col).min(rest.len());
        let (seg, tail) = std::mem::take(&mut rest).split_at_mut(cut);
        widen(&x[src..src + w], sw, col, seg);
        (rest, col, repeat) = (tail, 0, repeat + 1);
        if repeat == sh {
            (src, repeat) = (src + w, 0);
        }
    }
}

/// Columns `col..col + dst.len()` of one input row `src` widened `sw`-fold: dst[t] =
/// src[(col + t) / sw] (2-fold repeats have their own instance, dividing by shifts).
fn widen(src: &[f32], sw: usize, col: usize, dst: &mut [f32]) {
    match sw {
        2 => widen_by(src, 2, col, dst),
        _ => widen_by(src, sw, col, dst),
    }
}

/// [`widen`] by `s` (a constant in one instance: its divisions are shifts and its whole
/// groups exact chunks of a constant length, so the loop vectorises).
#[inline(always)]
fn widen_by(src: &[f32], s: usize, col: usize, dst: &mut [f32]) {
    let head = ((s - col % s) % s).min(dst.len());
    let (first, rest) = dst.split_at_mut(head);
    first.fill(src[col / s]);
    let src = &src[(col + head) / s..];
    let groups = rest.len() / s;
    let mut whole = rest.chunks_exact_mut(s);
    (&mut whole).zip(src).for_each(|(d, &v)| d.fill(v));
    if let Some(&v) = src.get(groups) {
        whole.into_remainder().fill(v);
    }
}

/// Parse layout ops.
pub fn from_mil(op: &str, args: &mut MilArgs) -> Option<Result<Op>> {
    let parsed = match LayoutOp::from_mil_name(op)? {
        LayoutOp::Reshape => args.sizes("shape").map(|shape| Layout::Reshape { shape }),
        LayoutOp::Transpose => args.sizes("perm").map(|perm| Layout::Transpose { perm }),
        LayoutOp::Concat => (|| {
            let axis = index_param(args, "axis")?;
            if args.bool("interleave")? {
                return Err(args.error("concat with interleave = true is not supported"));
            }
            Ok(Layout::Concat { axis })
        })(),
        LayoutOp::Split => (|| {
            Ok(Layout::Split {
                axis: index_param(args, "axis")?,
                sizes: args.sizes("split_sizes")?,
            })
        })(),
        LayoutOp::SliceBySize => (|| {
            Ok(Layout::SliceBySize {
                begin: args.sizes("begin")?,
                size: args.sizes("size")?,
            })
        })(),
        LayoutOp::Squeeze => args.sizes("axes").map(|axes| Layout::Squeeze { axes }),
        LayoutOp::ExpandDims => args.sizes("axes").map(|axes| Layout::ExpandDims { axes }),
        LayoutOp::Upsample => (|| {
            Ok(Layout::Upsample {
                scale_h: index_param(args, "scale_factor_height")?,
                scale_w: index_param(args, "scale_factor_width")?,
            })
        })(),
    };
    Some(parsed.map(Op::Layout))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::graph::build::layout::*;
    use crate::mil::literal::round_f16;
    use crate::{input, input_port, DType};

    /// Deterministic fp16-representable values in [-4, 4).
    pub(crate) fn data(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..n)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                round_f16((s >> 40) as f32 / (1u64 << 24) as f32 * 8.0 - 4.0)
            })
            .collect()
    }
    /// A buffer of `shape` filled by [`data`].
    pub(crate) fn buf(shape: &[usize], seed: u64) -> Buf {
        Buf {
            shape: shape.to_vec(),
            data: data(shape::numel(shape), seed),
        }
    }
    /// Row-major multi-index of flat index `i`.
    pub(crate) fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
        let mut idx = vec![0; shape.len()];
        for a in (0..shape.len()).rev() {
            idx[a] = i % shape[a];
            i /= shape[a];
        }
        idx
    }
    /// Flat index of a multi-index.
    pub(crate) fn ravel(idx: &[usize], shape: &[usize]) -> usize {
        idx.iter().zip(shape).fold(0, |acc, (&i, &d)| acc * d + i)
    }
    /// Infer `op` on fp16 inputs of the buffers' shapes and run its kernel.
    pub(crate) fn run(op: &Op, ins: &[&Buf]) -> Vec<Buf> {
        let types: Vec<TensorType> = ins
            .iter()
            .map(|b| TensorType::fp16(b.shape.clone()))
            .collect();
        let mut outs: Vec<Buf> = op
            .family()
            .infer(&types)
            .unwrap()
            .iter()
            .map(|t| Buf::zeros(&t.shape))
            .collect();
        op.family().eval(ins, &mut outs).unwrap();
        outs
    }
    /// Print `op`'s MIL params (checking alphabetical order), parse them back with `parse`, compare.
    pub(crate) fn round_trip(op: &Op, parse: fn(&str, &mut MilArgs) -> Option<Result<Op>>) {
        let m = op.family().mil();
        let names: Vec<&str> = m.params.iter().map(|p| p.0).collect();
        assert!(
            names.windows(2).all(|w| w[0] < w[1]),
            "{} params {names:?} are not alphabetical",
            m.op
        );
        let mut args = mil_args(m.params);
        assert_eq!(&parse(m.op, &mut args).unwrap().unwrap(), op);
        assert!(args.params.is_empty(), "unclaimed {:?}", args.params);
    }
    /// MilArgs holding `params`.
    pub(crate) fn mil_args(params: Vec<(&str, Literal)>) -> MilArgs {
        MilArgs::new(
            "t.mil",
            "s",
            params
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        )
    }

    /// Check every element of every output of `op` equals the input element `src([output, index..])` names (input, flat index).
    fn check_moves(op: &Op, ins: &[&Buf], src: impl Fn(&[usize]) -> (usize, usize)) {
        for (k, y) in run(op, ins).iter().enumerate() {
            for (o, &v) in y.data.iter().enumerate() {
                let mut idx = unravel(o, &y.shape);
                idx.insert(0, k);
                let (i, j) = src(&idx);
                assert_eq!(v, ins[i].data[j], "{op:?} output {k} element {o}");
            }
        }
    }

    #[test]
    fn transpose_rank4_and_rank5_match_naive() {
        for (shape, perm) in [
            (vec![2, 3, 4, 5], vec![0, 2, 3, 1]),
            (vec![2, 3, 4, 5], vec![3, 2, 1, 0]),
            (vec![7, 1, 3, 2, 4], vec![4, 0, 2, 1, 3]),
            (vec![2, 3, 1, 7, 5], vec![1, 0, 3, 2, 4]),
            (vec![783], vec![0]),
            // From PAR_MIN_ELEMS elements rows are split over the pool: contiguous and strided rows.
            (vec![128, 12, 32], vec![1, 0, 2]),
            (vec![64, 24, 33], vec![2, 0, 1]),
            // The last axis moved with a unit-stride axis before it: tiled blocks, partial
            // tiles at both edges, on one thread and split over the pool.
            (vec![5, 9], vec![1, 0]),
            (vec![3, 13, 11], vec![0, 2, 1]),
            (vec![17, 40, 3], vec![1, 2, 0]),
            (vec![128, 12, 32], vec![1, 2, 0]),
            (vec![12, 128, 35], vec![0, 2, 1]),
            // Axes that stay one source run merge (rows of H·W, of W·C, unit axes dropped).
            (vec![64, 16, 28, 28], vec![1, 0, 2, 3]),
            (vec![3, 1, 5, 7], vec![1, 2, 0, 3]),
            (vec![5, 3, 4, 1], vec![1, 0, 2, 3]),
        ] {
            let x = buf(&shape, 1);
            check_moves(
                &Op::Layout(Layout::Transpose { perm: perm.clone() }),
                &[&x],
                |idx| {
                    let mut xi = vec![0; shape.len()];
                    perm.iter()
                        .enumerate()
                        .for_each(|(a, &p)| xi[p] = idx[a + 1]);
                    (0, ravel(&xi, &shape))
                },
            );
        }
        let t = input(&[2, 3, 4, 5])
            .unwrap()
            .transpose(&[-1, 0, -2, 1])
            .unwrap();
        assert_eq!(t.shape(), [5, 2, 4, 3]);
    }

    #[test]
    fn concat_and_split_match_naive_and_invert() {
        let (a, b, c) = (buf(&[2, 3, 4], 1), buf(&[2, 1, 4], 2), buf(&[2, 7, 4], 3));
        let cat = Op::Layout(Layout::Concat { axis: 1 });
        check_moves(&cat, &[&a, &b, &c], |idx| {
            let part = [3, 4, 11].iter().position(|&end| idx[2] < end).unwrap();
            let mut xi = idx[1..].to_vec();
            xi[1] -= [0, 3, 4][part];
            (part, ravel(&xi, &[&a, &b, &c][part].shape))
        });
        let y = run(&cat, &[&a, &b, &c]).remove(0);
        let parts = run(
            &Op::Layout(Layout::Split {
                axis: 1,
                sizes: vec![3, 1, 7],
            }),
            &[&y],
        );
        assert_eq!(parts, vec![a, b, c]);
        let x = buf(&[3, 7, 6], 4);
        check_moves(
            &Op::Layout(Layout::Split {
                axis: 2,
                sizes: vec![2; 3],
            }),
            &[&x],
            |idx| (0, ravel(&[idx[1], idx[2], idx[0] * 2 + idx[3]], &x.shape)),
        );
        let (p, q) = (buf(&[783], 5), buf(&[1], 6));
        assert_eq!(
            run(&Op::Layout(Layout::Concat { axis: 0 }), &[&p, &q])[0].data,
            [p.data.clone(), q.data.clone()].concat()
        );
        let t = input(&[3, 7, 6]).unwrap();
        let parts = t.split(3, -1).unwrap();
        assert_eq!(
            parts.iter().map(|p| p.shape().to_vec()).collect::<Vec<_>>(),
            vec![vec![3, 7, 2]; 3]
        );
        assert_eq!(concat(&parts, -1).unwrap().shape(), [3, 7, 6]);
        assert_eq!(t.split_sizes(&[1, 5, 1], 1).unwrap()[1].shape(), [3, 5, 6]);
    }

    /// Slices of short rows (by 8-float moves, the last overlapping), long rows and whole runs
    /// of merged axes, on one thread and split over the pool, match the naive gather.
    #[test]
    fn slices_of_short_and_merged_rows_match_naive() {
        for (shape, begin, size) in [
            (
                vec![16, 64, 28, 28],
                vec![0, 0, 0, 13],
                vec![16, 64, 28, 15],
            ),
            (vec![16, 64, 28, 28], vec![0, 0, 0, 0], vec![16, 64, 28, 13]),
            (vec![5, 3, 9, 80], vec![1, 0, 2, 3], vec![3, 3, 5, 65]),
            (vec![5, 3, 9, 80], vec![0, 1, 0, 70], vec![5, 2, 9, 7]),
            (vec![5, 3, 9, 80], vec![0, 1, 0, 0], vec![5, 1, 9, 80]),
            (vec![2, 1, 40, 17], vec![1, 0, 3, 8], vec![1, 1, 30, 9]),
            (vec![64, 8, 9, 16], vec![0, 2, 0, 0], vec![64, 6, 9, 16]),
        ] {
            let x = buf(&shape, 5);
            check_moves(
                &Op::Layout(Layout::SliceBySize {
                    begin: begin.clone(),
                    size,
                }),
                &[&x],
                |idx| {
                    let at: Vec<usize> = begin.iter().zip(&idx[1..]).map(|(b, i)| b + i).collect();
                    (0, ravel(&at, &x.shape))
                },
            );
        }
    }

    #[test]
    fn slice_upsample_and_copies_match_naive() {
        let x = buf(&[7, 783], 1);
        check_moves(
            &Op::Layout(Layout::SliceBySize {
                begin: vec![2, 100],
                size: vec![5, 683],
            }),
            &[&x],
            |idx| (0, ravel(&[idx[1] + 2, idx[2] + 100], &x.shape)),
        );
        let x5 = buf(&[2, 3, 4, 5, 6], 2);
        check_moves(
            &Op::Layout(Layout::SliceBySize {
                begin: vec![1, 0, 1, 2, 5],
                size: vec![1, 3, 2, 3, 1],
            }),
            &[&x5],
            |idx| {
                (
                    0,
                    ravel(
                        &[1 + idx[1], idx[2], 1 + idx[3], 2 + idx[4], 5 + idx[5]],
                        &x5.shape,
                    ),
                )
            },
        );
        let img = buf(&[2, 3, 4, 5], 3);
        check_moves(
            &Op::Layout(Layout::Upsample {
                scale_h: 2,
                scale_w: 3,
            }),
            &[&img],
            |idx| {
                (
                    0,
                    ravel(&[idx[1], idx[2], idx[3] / 2, idx[4] / 3], &img.shape),
                )
            },
        );
        let one = buf(&[1, 1, 7], 4);
        assert_eq!(
            run(
                &Op::Layout(Layout::Upsample {
                    scale_h: 1,
                    scale_w: 1
                }),
                &[&one]
            )[0],
            one
        );
        for op in [
            Layout::Reshape { shape: vec![7, 1] },
            Layout::Squeeze { axes: vec![0, 1] },
            Layout::ExpandDims { axes: vec![0, 4] },
        ] {
            let y = run(&Op::Layout(op), &[&one]).remove(0);
            assert_eq!(y.data, one.data);
        }
    }

    /// `upsample_range` equals the naive gather x[(i / ow / sh) * w + i % ow / sw] on every
    /// range of odd shapes (starts and ends mid-row and mid-repeat, whole arrays, 1-element
    /// rows, factors 1–3), so the counting of rows and repeats never drifts.
    #[test]
    fn upsample_ranges_match_the_naive_gather() {
        for (rows, w, sh, sw) in [(5, 7, 2, 2), (3, 1, 2, 2), (4, 14, 2, 2), (6, 5, 3, 1)]
            .into_iter()
            .chain([(2, 3, 1, 3), (7, 4, 1, 2), (3, 9, 3, 3)])
        {
            let x = data(rows * w, 7);
            let (ow, len) = (w * sw, rows * sh * w * sw);
            let naive: Vec<f32> = (0..len)
                .map(|i| x[(i / ow / sh) * w + i % ow / sw])
                .collect();
            for start in 0..len {
                for n in [1, 2, 3, ow + 1, 2 * ow * sh + 3, len - start] {
                    let n = n.min(len - start);
                    let mut out = vec![f32::NAN; n];
                    upsample_range(&x, [w, sh, sw], start, &mut out);
                    assert_eq!(
                        out,
                        naive[start..start + n],
                        "{rows}×{w} ×({sh},{sw}) at {start}+{n}"
                    );
                }
            }
        }
    }

    #[test]
    fn builders_infer_shapes_and_keep_dtype() {
        let x = input(&[2, 3, 4]).unwrap();
        assert_eq!(x.reshape(&[-1, 4]).unwrap().shape(), [6, 4]);
        assert_eq!(x.reshape(&[4, -1, 2, 1]).unwrap().shape(), [4, 3, 2, 1]);
        assert_eq!(x.expand_dims(&[0, -1]).unwrap().shape(), [1, 2, 3, 4, 1]);
        assert_eq!(
            x.reshape(&[1, 24, 1])
                .unwrap()
                .squeeze(&[0, -1])
                .unwrap()
                .shape(),
            [24]
        );
        assert_eq!(
            x.slice_by_size(&[1, 0, 2], &[1, 3, 2]).unwrap().shape(),
            [1, 3, 2]
        );
        assert_eq!(x.upsample(2, 3).unwrap().shape(), [2, 6, 12]);
        let u = input_port(&[2, 3], DType::Uint8, None).unwrap();
        for t in [
            u.transpose(&[1, 0]).unwrap(),
            u.reshape(&[6]).unwrap(),
            concat(&[u.clone(), u.clone()], 0).unwrap(),
            u.split(3, 1).unwrap().remove(2),
        ] {
            assert_eq!(t.dtype(), DType::Uint8);
        }
    }

    #[test]
    fn builder_errors() {
        let x = input(&[2, 3, 4]).unwrap();
        let u = input_port(&[2, 3, 4], DType::Uint8, None).unwrap();
        let msg = x.reshape(&[5, 5]).unwrap_err().to_string();
        assert!(msg.contains("[2, 3, 4]") && msg.contains("[5, 5]"), "{msg}");
        let msg = x.reshape(&[5, -1]).unwrap_err().to_string();
        assert!(
            msg.contains("[2, 3, 4]") && msg.contains("[5, -1]"),
            "{msg}"
        );
        let errs = [
            x.reshape(&[-1, -1, 6]).map(drop),
            x.reshape(&[0, 24]).map(drop),
            x.reshape(&[-2, -12]).map(drop),
            x.reshape(&[1, 1, 1, 1, 2, 12]).map(drop),
            x.reshape(&[-1, 1 << 40]).map(drop),
            x.transpose(&[0, 1]).map(drop),
            x.transpose(&[0, 1, 1]).map(drop),
            x.transpose(&[0, 1, 3]).map(drop),
            concat(&[], 0).map(drop),
            concat(&[x.clone(), input(&[2, 4, 4]).unwrap()], 0).map(drop),
            concat(&[x.clone(), input(&[2, 3]).unwrap()], 0).map(drop),
            concat(&[x.clone(), u.clone()], 0).map(drop),
            concat(std::slice::from_ref(&x), 3).map(drop),
            concat(&[x.clone(), input(&[2, 65534, 4]).unwrap()], 1).map(drop),
            x.split(5, 1).map(drop),
            x.split(0, 1).map(drop),
            x.split(2, 3).map(drop),
            x.split_sizes(&[1, 1], 1).map(drop),
            x.split_sizes(&[3, 0], 1).map(drop),
            x.split_sizes(&[], 1).map(drop),
            x.split_sizes(&[usize::MAX, 4], 1).map(drop),
            x.slice_by_size(&[1, 0, 3], &[1, 3, 2]).map(drop),
            x.slice_by_size(&[0, 0, 0], &[1, 0, 2]).map(drop),
            x.slice_by_size(&[0, 0], &[1, 1]).map(drop),
            x.slice_by_size(&[usize::MAX, 0, 0], &[2, 1, 1]).map(drop),
            x.squeeze(&[0]).map(drop),
            x.squeeze(&[]).map(drop),
            input(&[1, 1]).unwrap().squeeze(&[0, 1]).map(drop),
            x.expand_dims(&[0, 1, 2]).map(drop),
            x.expand_dims(&[0, 0]).map(drop),
            x.expand_dims(&[5]).map(drop),
            input(&[3, 4]).unwrap().upsample(2, 2).map(drop),
            x.upsample(0, 2).map(drop),
            x.upsample(2, usize::MAX).map(drop),
            u.upsample(2, 2).map(drop),
        ];
        for (i, e) in errs.iter().enumerate() {
            assert!(e.is_err(), "case {i} should fail");
        }
        let msg = x
            .slice_by_size(&[1, 0, 3], &[1, 3, 2])
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("[1, 0, 3]") && msg.contains("[1, 3, 2]") && msg.contains("[2, 3, 4]"),
            "{msg}"
        );
        assert!(Layout::Squeeze { axes: vec![1, 0] }
            .infer(&[TensorType::fp16(vec![1, 1, 3])])
            .is_err());
    }

    #[test]
    fn mil_round_trip() {
        for l in [
            Layout::Reshape { shape: vec![6, 4] },
            Layout::Transpose {
                perm: vec![2, 0, 1],
            },
            Layout::Concat { axis: 1 },
            Layout::Split {
                axis: 2,
                sizes: vec![1, 5, 1],
            },
            Layout::SliceBySize {
                begin: vec![0, 2],
                size: vec![3, 1],
            },
            Layout::Squeeze { axes: vec![0, 2] },
            Layout::ExpandDims { axes: vec![1] },
            Layout::Upsample {
                scale_h: 2,
                scale_w: 3,
            },
        ] {
            round_trip(&Op::Layout(l), from_mil);
        }
        assert_eq!(
            Layout::Concat { axis: 0 }.mil().inputs,
            MilInputs::Tuple("values")
        );
        let bad = [
            (
                "concat",
                vec![
                    ("axis", Literal::Int32(0)),
                    ("interleave", Literal::Bool(true)),
                ],
            ),
            (
                "concat",
                vec![
                    ("axis", Literal::Int32(-1)),
                    ("interleave", Literal::Bool(false)),
                ],
            ),
            (
                "split",
                vec![
                    ("axis", Literal::Int32(0)),
                    ("split_sizes", Literal::Ints(vec![2, -1])),
                ],
            ),
            ("reshape", vec![("shape", Literal::Int32(3))]),
            (
                "upsample_nearest_neighbor",
                vec![("scale_factor_height", Literal::Int32(2))],
            ),
        ];
        for (op, params) in bad {
            assert!(
                from_mil(op, &mut mil_args(params)).unwrap().is_err(),
                "{op}"
            );
        }
        assert!(from_mil("relu", &mut mil_args(vec![])).is_none());
    }
}
