//! Builders for the rearrange ops.

use crate::error::{Error, Result};
use crate::graph::Tensor;
use crate::ops::rearrange::{Rearrange, Shuffle};
use crate::ops::Op;
use crate::shape::{self};

/// Builders.
impl Tensor {
    fn rearrange(&self, r: Rearrange) -> Result<Tensor> {
        Tensor::apply1(Op::Rearrange(r), vec![self.clone()])
    }

    /// Flip the order of elements along `axes` (negative allowed, no repeats).
    pub fn reverse(&self, axes: &[i64]) -> Result<Tensor> {
        self.rearrange(Rearrange::Reverse {
            axes: shape::axes("reverse", axes, self.rank())?,
        })
    }
    /// Repeat the tensor `reps[i]` times along axis i (one factor >= 1 per axis).
    pub fn tile(&self, reps: &[usize]) -> Result<Tensor> {
        self.rearrange(Rearrange::Tile {
            reps: reps.to_vec(),
        })
    }
    /// Collapse to 2-D `[prod(shape[..axis]), prod(shape[axis..])]`; axis in -rank..=rank (negative adds rank).
    pub fn flatten2d(&self, axis: i64) -> Result<Tensor> {
        let r = self.rank() as i64;
        if !(-r..=r).contains(&axis) {
            return Err(Error::shape(
                "flatten2d",
                format!(
                    "axis {axis} is out of range -{r}..={r} for {:?}",
                    self.shape()
                ),
            ));
        }
        self.rearrange(Rearrange::Flatten2d {
            axis: (if axis < 0 { axis + r } else { axis }) as usize,
        })
    }
    /// Drop `top`/`bottom` rows and `left`/`right` columns of the last two axes (rank 3+).
    pub fn crop(&self, top: usize, bottom: usize, left: usize, right: usize) -> Result<Tensor> {
        self.rearrange(Rearrange::Crop {
            top,
            bottom,
            left,
            right,
        })
    }
    /// `[N, C, H·r, W·r]` → `[N, C·r², H, W]`, TensorFlow DCR channel order (MIL `space_to_depth`).
    pub fn space_to_depth(&self, block_size: usize) -> Result<Tensor> {
        self.rearrange(Rearrange::Shuffle {
            kind: Shuffle::SpaceToDepth,
            r: block_size,
        })
    }
    /// `[N, C·r², H, W]` → `[N, C, H·r, W·r]`, TensorFlow DCR channel order (MIL `depth_to_space`).
    pub fn depth_to_space(&self, block_size: usize) -> Result<Tensor> {
        self.rearrange(Rearrange::Shuffle {
            kind: Shuffle::DepthToSpace,
            r: block_size,
        })
    }
    /// `[N, C·r², H, W]` → `[N, C, H·r, W·r]`, PyTorch `pixel_shuffle` channel order.
    pub fn pixel_shuffle(&self, r: usize) -> Result<Tensor> {
        self.rearrange(Rearrange::Shuffle {
            kind: Shuffle::PixelShuffle,
            r,
        })
    }
    /// `[N, C, H·r, W·r]` → `[N, C·r², H, W]`, PyTorch `pixel_unshuffle` channel order.
    pub fn pixel_unshuffle(&self, r: usize) -> Result<Tensor> {
        self.rearrange(Rearrange::Shuffle {
            kind: Shuffle::PixelUnshuffle,
            r,
        })
    }
    /// Elements at static `indices` (negative count from the end) along `axis`, NumPy `take`:
    /// runs of consecutive indices become one `slice_by_size`, joined by `concat`.
    pub fn gather(&self, indices: &[i64], axis: i64) -> Result<Tensor> {
        let ax = shape::axis("gather", axis, self.rank())?;
        let d = self.shape()[ax];
        let bad = |i: i64| {
            Error::shape(
                "gather",
                format!(
                    "index {i} is out of range for extent {d} (axis {axis} of {:?})",
                    self.shape()
                ),
            )
        };
        let idx = indices
            .iter()
            .map(|&i| {
                usize::try_from(if i < 0 { i + d as i64 } else { i })
                    .ok()
                    .filter(|&u| u < d)
                    .ok_or_else(|| bad(i))
            })
            .collect::<Result<Vec<_>>>()?;
        if idx.is_empty() {
            return Err(Error::shape("gather", "needs at least one index"));
        }
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for &i in &idx {
            match runs.last_mut() {
                Some((start, len)) if *start + *len == i => *len += 1,
                _ => runs.push((i, 1)),
            }
        }
        let parts = runs
            .iter()
            .map(|&(start, len)| {
                let (mut begin, mut size) = (vec![0; self.rank()], self.shape().to_vec());
                (begin[ax], size[ax]) = (start, len);
                self.slice_by_size(&begin, &size)
            })
            .collect::<Result<Vec<_>>>()?;
        match parts.as_slice() {
            [one] => Ok(one.clone()),
            _ => crate::graph::build::layout::concat(&parts, ax as i64),
        }
    }
    /// The slice at one static `index` along `axis` with that axis dropped (NumPy `take` with an
    /// int); x needs rank ≥ 2, since a rank-0 result is not supported (Shape error naming `take`).
    pub fn take_index(&self, index: i64, axis: i64) -> Result<Tensor> {
        if self.rank() < 2 {
            return Err(Error::shape(
                "take",
                format!(
                    "an int index drops the axis, and x {:?} would become rank 0 (not supported); pass [{index}] to keep it",
                    self.shape()
                ),
            ));
        }
        self.gather(&[index], axis)?.squeeze(&[axis])
    }
}

/// Join equal-shaped tensors along a new axis `axis` (in -rank-1..=rank).
pub fn stack(tensors: &[Tensor], axis: i64) -> Result<Tensor> {
    let first = tensors
        .first()
        .ok_or_else(|| Error::shape("stack", "needs at least one tensor"))?;
    let axis = shape::axis("stack", axis, first.rank() + 1)?;
    Tensor::apply1(Op::Rearrange(Rearrange::Stack { axis }), tensors.to_vec())
}
