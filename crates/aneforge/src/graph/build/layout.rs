//! Builders for the layout ops.

use crate::error::{Error, Result};
use crate::graph::Tensor;
use crate::ops::layout::Layout;
use crate::ops::Op;
use crate::shape::{self};

/// Builders. Layout ops keep the input dtype (fp16, bool or uint8); upsample takes fp16 only.
impl Tensor {
    fn layout(&self, l: Layout) -> Result<Tensor> {
        Tensor::apply1(Op::Layout(l), vec![self.clone()])
    }

    /// Same elements in a new shape; one extent may be -1 (inferred); errors name both shapes.
    pub fn reshape(&self, shape: &[i64]) -> Result<Tensor> {
        let mut out = Vec::with_capacity(shape.len());
        let mut hole = None;
        let bad = || {
            Error::shape(
                "reshape",
                format!(
                    "cannot reshape {:?} to {shape:?}: extents must be >= 1 apart from a single -1",
                    self.shape()
                ),
            )
        };
        for (i, &d) in shape.iter().enumerate() {
            if d == -1 && hole.is_none() {
                hole = Some(i);
                out.push(1);
            } else {
                out.push(usize::try_from(d).map_err(|_| bad())?);
            }
        }
        shape::check("reshape", &out)?;
        if let Some(i) = hole {
            let (n, rest) = (
                crate::ops::layout::count(self.shape()),
                crate::ops::layout::count(&out),
            );
            if n % rest != 0 {
                return Err(Error::shape("reshape", format!("cannot reshape {:?} ({n} elements) to {shape:?}: {n} is not a multiple of {rest}", self.shape())));
            }
            out[i] = usize::try_from(n / rest).unwrap_or(usize::MAX);
        }
        self.layout(Layout::Reshape { shape: out })
    }
    /// Permute axes; `perm` (negative entries allowed) must be a permutation of the axes.
    pub fn transpose(&self, perm: &[i64]) -> Result<Tensor> {
        let perm = perm
            .iter()
            .map(|&a| shape::axis("transpose", a, self.rank()))
            .collect::<Result<_>>()?;
        self.layout(Layout::Transpose { perm })
    }
    /// `num_splits` equal parts along `axis`; the extent must divide evenly.
    pub fn split(&self, num_splits: usize, axis: i64) -> Result<Vec<Tensor>> {
        let ax = shape::axis("split", axis, self.rank())?;
        let ext = self.shape()[ax];
        if num_splits == 0 || !ext.is_multiple_of(num_splits) {
            return Err(Error::shape(
                "split",
                format!(
                    "cannot split extent {ext} (axis {axis} of {:?}) into {num_splits} equal parts",
                    self.shape()
                ),
            ));
        }
        self.split_sizes(&vec![ext / num_splits; num_splits], axis)
    }
    /// Parts of the given extents along `axis` (each >= 1, summing to the extent).
    pub fn split_sizes(&self, sizes: &[usize], axis: i64) -> Result<Vec<Tensor>> {
        let axis = shape::axis("split", axis, self.rank())?;
        Tensor::apply(
            Op::Layout(Layout::Split {
                axis,
                sizes: sizes.to_vec(),
            }),
            vec![self.clone()],
        )
    }
    /// The static window `begin .. begin + size` on every axis (bounds-checked).
    pub fn slice_by_size(&self, begin: &[usize], size: &[usize]) -> Result<Tensor> {
        self.layout(Layout::SliceBySize {
            begin: begin.to_vec(),
            size: size.to_vec(),
        })
    }
    /// Drop the given extent-1 axes (negative allowed); the result keeps rank >= 1.
    pub fn squeeze(&self, axes: &[i64]) -> Result<Tensor> {
        self.layout(Layout::Squeeze {
            axes: shape::axes("squeeze", axes, self.rank())?,
        })
    }
    /// Insert extent-1 axes at `axes` of the output (negative allowed); result rank <= 5.
    pub fn expand_dims(&self, axes: &[i64]) -> Result<Tensor> {
        self.layout(Layout::ExpandDims {
            axes: shape::axes("expand_dims", axes, self.rank() + axes.len())?,
        })
    }
    /// Nearest-neighbour upsample of the last two axes by integer factors >= 1 (rank >= 3, fp16).
    pub fn upsample(&self, scale_h: usize, scale_w: usize) -> Result<Tensor> {
        self.layout(Layout::Upsample { scale_h, scale_w })
    }
}

/// Join tensors along `axis` (negative allowed): same rank and dtype, other extents equal.
pub fn concat(tensors: &[Tensor], axis: i64) -> Result<Tensor> {
    let first = tensors
        .first()
        .ok_or_else(|| Error::shape("concat", "needs at least one tensor"))?;
    let axis = shape::axis("concat", axis, first.rank())?;
    Tensor::apply1(Op::Layout(Layout::Concat { axis }), tensors.to_vec())
}
