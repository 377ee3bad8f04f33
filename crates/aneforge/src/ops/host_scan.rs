//! `cumsum` (inclusive or exclusive, forward or reverse, accumulated in f64) and
//! `one_hot(indices, depth)` (fp16 0/1 values on a new last axis).

use super::host::checks::{check_len, resolve_index};
use super::host::lanes;
use super::host::{check_axis, expect_dtypes, HostKernel, HostRef, HostTensor};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::TensorType;
use crate::shape::Shape;

/// Op name of the running sum.
pub const CUMSUM: &str = "cumsum";
/// Op name of the one-hot encoding.
pub const ONE_HOT: &str = "one_hot";

/// Running sum of `x` (shape `shape`) along `axis`: `exclusive` leaves the element itself out
/// (the first sum is 0), `reverse` sums from the end. Output has `x`'s shape.
pub fn cumsum(
    x: &[f32],
    shape: &[usize],
    axis: usize,
    exclusive: bool,
    reverse: bool,
) -> Result<Vec<f32>> {
    check_len(CUMSUM, "x", x.len(), shape)?;
    let (outer, extent, inner) = lanes(shape, axis);
    let mut out = vec![0.0f32; x.len()];
    let mut acc = vec![0.0f64; inner];
    for o in 0..outer {
        acc.iter_mut().for_each(|a| *a = 0.0);
        for step in 0..extent {
            let a = if reverse { extent - 1 - step } else { step };
            let base = (o * extent + a) * inner;
            for (i, sum) in acc.iter_mut().enumerate() {
                let v = x[base + i] as f64;
                if exclusive {
                    out[base + i] = *sum as f32;
                    *sum += v;
                } else {
                    *sum += v;
                    out[base + i] = *sum as f32;
                }
            }
        }
    }
    Ok(out)
}

/// Shape rule of `one_hot`: `indices`' shape plus a last axis of `depth` (depth >= 1).
pub fn one_hot_shape(indices: &[usize], depth: i64) -> Result<Shape> {
    if depth < 1 {
        return Err(Error::value(
            ONE_HOT,
            format!("depth must be >= 1, got {depth}"),
        ));
    }
    let mut out = indices.to_vec();
    out.push(depth as usize);
    Ok(out)
}

/// `out[..., j] = 1` where `j == indices[...]`, else 0; an index outside `0..depth` is a value
/// error naming it (negative indices are not wrapped).
pub fn one_hot(indices: &[i32], depth: usize) -> Result<Vec<f32>> {
    let mut out = vec![0.0f32; indices.len() * depth];
    for (row, &i) in out.chunks_mut(depth).zip(indices) {
        if i < 0 {
            return Err(Error::value(
                ONE_HOT,
                format!("indices holds the negative index {i} (valid: 0..{depth})"),
            ));
        }
        row[resolve_index(ONE_HOT, "indices", i as i64, depth)?] = 1.0;
    }
    Ok(out)
}

/// `cumsum(x, axis, exclusive, reverse)` as a host op: fp16 → fp16 of the same shape.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Cumsum {
    pub axis: usize,
    pub exclusive: bool,
    pub reverse: bool,
}

impl HostKernel for Cumsum {
    fn name(&self) -> &'static str {
        CUMSUM
    }

    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_dtypes(CUMSUM, inputs, &[DType::Fp16])?;
        check_axis(CUMSUM, self.axis, &inputs[0].shape)?;
        Ok(vec![inputs[0].clone()])
    }

    fn run(&self, inputs: &[HostRef<'_>], outputs: &mut [HostTensor]) -> Result<()> {
        let x = inputs[0];
        let out = cumsum(
            x.f32s(CUMSUM)?,
            x.shape,
            self.axis,
            self.exclusive,
            self.reverse,
        )?;
        outputs[0].f32s_mut(CUMSUM)?.copy_from_slice(&out);
        Ok(())
    }
}

/// `one_hot(indices, depth)` as a host op: int32 indices → fp16 `indices.shape + [depth]`.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct OneHot {
    pub depth: usize,
}

impl HostKernel for OneHot {
    fn name(&self) -> &'static str {
        ONE_HOT
    }

    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_dtypes(ONE_HOT, inputs, &[DType::Int32])?;
        let shape = one_hot_shape(&inputs[0].shape, self.depth as i64)?;
        crate::shape::check(ONE_HOT, &shape)?;
        Ok(vec![TensorType::fp16(shape)])
    }

    fn run(&self, inputs: &[HostRef<'_>], outputs: &mut [HostTensor]) -> Result<()> {
        let out = one_hot(inputs[0].i32s(ONE_HOT)?, self.depth)?;
        outputs[0].f32s_mut(ONE_HOT)?.copy_from_slice(&out);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cumsum_variants_match_hand_sums() {
        let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        assert_eq!(
            cumsum(&x, &[2, 3], 1, false, false).unwrap(),
            [1.0, 3.0, 6.0, 4.0, 9.0, 15.0]
        );
        assert_eq!(
            cumsum(&x, &[2, 3], 1, true, false).unwrap(),
            [0.0, 1.0, 3.0, 0.0, 4.0, 9.0]
        );
        assert_eq!(
            cumsum(&x, &[2, 3], 1, false, true).unwrap(),
            [6.0, 5.0, 3.0, 15.0, 11.0, 6.0]
        );
        assert_eq!(
            cumsum(&x, &[2, 3], 1, true, true).unwrap(),
            [5.0, 3.0, 0.0, 11.0, 6.0, 0.0]
        );
        assert_eq!(
            cumsum(&x, &[2, 3], 0, false, false).unwrap(),
            [1.0, 2.0, 3.0, 5.0, 7.0, 9.0]
        );
    }

    #[test]
    fn one_hot_sets_one_position_per_index_and_rejects_bad_ones() {
        assert_eq!(one_hot(&[2, 0], 3).unwrap(), [0.0, 0.0, 1.0, 1.0, 0.0, 0.0]);
        assert_eq!(one_hot_shape(&[4, 2], 7).unwrap(), [4, 2, 7]);
        assert!(one_hot_shape(&[4], 0)
            .unwrap_err()
            .to_string()
            .contains("depth"));
        assert!(one_hot(&[3], 3)
            .unwrap_err()
            .to_string()
            .contains("index 3"));
        assert!(one_hot(&[-1], 3).unwrap_err().to_string().contains("-1"));
    }
}
