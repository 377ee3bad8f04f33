//! Block rearranges between space and batch / channels (TensorFlow's space_to_batch and
//! space_to_depth orders, blocks outermost) and `flatten`.
//!
//! For `x [N, C, H, W]` and blocks `bh × bw` (block row `i`, column `j`):
//! `space_to_batch`: `out[(i·bw + j)·N + n, c, h, w] = x[n, c, h·bh + i, w·bw + j]`;
//! `space_to_channel`: `out[n, (i·bw + j)·C + c, h, w] = x[n, c, h·bh + i, w·bw + j]`;
//! `batch_to_space` / `channel_to_space` are their inverses.

use crate::error::{Error, Result};
use crate::ops::host::checks::check_len;
use crate::shape::{self, Shape};

/// Op name of `flatten`.
pub const FLATTEN: &str = "flatten";

/// Where the blocks go.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockAxis {
    /// Blocks move to the batch axis (space_to_batch / batch_to_space).
    Batch,
    /// Blocks move to the channel axis (space_to_channel / channel_to_space).
    Channel,
}

/// Direction of a block rearrange.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Spatial blocks to batch/channels.
    FromSpace,
    /// Batch/channels back to spatial blocks.
    ToSpace,
}

/// The op name of a rearrange.
pub fn op_name(axis: BlockAxis, dir: Direction) -> &'static str {
    match (axis, dir) {
        (BlockAxis::Batch, Direction::FromSpace) => "space_to_batch",
        (BlockAxis::Batch, Direction::ToSpace) => "batch_to_space",
        (BlockAxis::Channel, Direction::FromSpace) => "space_to_channel",
        (BlockAxis::Channel, Direction::ToSpace) => "channel_to_space",
    }
}

/// Shape rule: `x` is `[N, C, H, W]`, blocks >= 1; from space H, W divide by the blocks; to
/// space the batch (or channel) extent divides by `bh·bw`. Errors name the op and extents.
pub fn block_shape(
    x: &[usize],
    bh: i64,
    bw: i64,
    axis: BlockAxis,
    dir: Direction,
) -> Result<Shape> {
    let op = op_name(axis, dir);
    if x.len() != 4 {
        return Err(Error::shape(
            op,
            format!("x must be [N, C, H, W], got {x:?}"),
        ));
    }
    if bh < 1 || bw < 1 {
        return Err(Error::value(
            op,
            format!("block sizes must be >= 1, got {bh} x {bw}"),
        ));
    }
    let (bh, bw) = (bh as usize, bw as usize);
    let blocks = bh * bw;
    let slot = if axis == BlockAxis::Batch { 0 } else { 1 };
    let mut out = x.to_vec();
    match dir {
        Direction::FromSpace => {
            if !x[2].is_multiple_of(bh) || !x[3].is_multiple_of(bw) {
                return Err(Error::shape(
                    op,
                    format!(
                        "H {} and W {} must divide by the blocks {bh} x {bw}",
                        x[2], x[3]
                    ),
                ));
            }
            out[slot] *= blocks;
            out[2] /= bh;
            out[3] /= bw;
        }
        Direction::ToSpace => {
            if !x[slot].is_multiple_of(blocks) {
                return Err(Error::shape(
                    op,
                    format!(
                        "axis {slot} extent {} must divide by bh·bw = {blocks}",
                        x[slot]
                    ),
                ));
            }
            out[slot] /= blocks;
            out[2] *= bh;
            out[3] *= bw;
        }
    }
    Ok(out)
}

/// The rearrange of `x` (shape `x_shape`) with blocks `bh × bw` (see the module doc).
pub fn block_rearrange(
    x: &[f32],
    x_shape: &[usize],
    bh: usize,
    bw: usize,
    axis: BlockAxis,
    dir: Direction,
) -> Result<Vec<f32>> {
    let out_shape = block_shape(x_shape, bh as i64, bw as i64, axis, dir)?;
    check_len(op_name(axis, dir), "x", x.len(), x_shape)?;
    let space = if dir == Direction::FromSpace {
        x_shape
    } else {
        &out_shape[..]
    };
    let (n, c, h, w) = (space[0], space[1], space[2], space[3]);
    let (ho, wo) = (h / bh, w / bw);
    let mut out = vec![0.0f32; x.len()];
    let mut big = 0;
    for ni in 0..n {
        for ci in 0..c {
            for hi in 0..h {
                for wi in 0..w {
                    let block = (hi % bh) * bw + wi % bw;
                    let (b, ch, cs) = match axis {
                        BlockAxis::Batch => (block * n + ni, ci, c),
                        BlockAxis::Channel => (ni, block * c + ci, c * bh * bw),
                    };
                    let small = ((b * cs + ch) * ho + hi / bh) * wo + wi / bw;
                    match dir {
                        Direction::FromSpace => out[small] = x[big],
                        Direction::ToSpace => out[big] = x[small],
                    }
                    big += 1;
                }
            }
        }
    }
    Ok(out)
}

/// Shape rule of `flatten`: any shape → `[numel]`.
pub fn flatten_shape(x: &[usize]) -> Shape {
    vec![shape::numel(x)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn space_to_batch_follows_the_tensorflow_order() {
        // x [1, 1, 2, 4], blocks 2 x 2: batch (i, j) holds x[0, 0, i, j::2].
        let x: Vec<f32> = (0..8).map(|v| v as f32).collect();
        let out = block_rearrange(
            &x,
            &[1, 1, 2, 4],
            2,
            2,
            BlockAxis::Batch,
            Direction::FromSpace,
        )
        .unwrap();
        assert_eq!(out, [0.0, 2.0, 1.0, 3.0, 4.0, 6.0, 5.0, 7.0]);
        assert_eq!(
            block_shape(&[1, 1, 2, 4], 2, 2, BlockAxis::Batch, Direction::FromSpace).unwrap(),
            [4, 1, 1, 2]
        );
        let back = block_rearrange(
            &out,
            &[4, 1, 1, 2],
            2,
            2,
            BlockAxis::Batch,
            Direction::ToSpace,
        )
        .unwrap();
        assert_eq!(back, x);
    }

    #[test]
    fn space_to_channel_puts_blocks_outside_channels() {
        // x [1, 2, 2, 2]: channel (i·2 + j)·2 + c holds x[0, c, i, j].
        let x: Vec<f32> = (0..8).map(|v| v as f32).collect();
        let out = block_rearrange(
            &x,
            &[1, 2, 2, 2],
            2,
            2,
            BlockAxis::Channel,
            Direction::FromSpace,
        )
        .unwrap();
        assert_eq!(out, [0.0, 4.0, 1.0, 5.0, 2.0, 6.0, 3.0, 7.0]);
        let back = block_rearrange(
            &out,
            &[1, 8, 1, 1],
            2,
            2,
            BlockAxis::Channel,
            Direction::ToSpace,
        )
        .unwrap();
        assert_eq!(back, x);
    }

    #[test]
    fn bad_blocks_name_the_op() {
        let e =
            block_shape(&[1, 1, 3, 4], 2, 2, BlockAxis::Batch, Direction::FromSpace).unwrap_err();
        assert!(e.to_string().starts_with("space_to_batch"), "{e}");
        assert!(block_shape(&[3, 1, 2, 2], 2, 1, BlockAxis::Batch, Direction::ToSpace).is_err());
        assert!(block_shape(&[1, 4, 2, 2], 0, 2, BlockAxis::Channel, Direction::ToSpace).is_err());
        assert!(block_shape(&[4, 2, 2], 1, 1, BlockAxis::Channel, Direction::ToSpace).is_err());
    }
}
