//! Builders for the pool ops.

use crate::error::Result;
use crate::graph::Tensor;
use crate::ops::pool::{Pool, PoolKind};
use crate::ops::Op;

/// Builders.
impl Tensor {
    fn pool(
        &self,
        kind: PoolKind,
        kernel: [usize; 2],
        strides: [usize; 2],
        pad: [usize; 4],
    ) -> Result<Tensor> {
        Tensor::apply1(
            Op::Pool(Pool {
                kind,
                kernel,
                strides,
                pad,
            }),
            vec![self.clone()],
        )
    }

    /// Max pooling over H, W of NCHW `self`; padding [t, b, l, r] (< kernel) is never selected.
    pub fn max_pool(
        &self,
        kernel: [usize; 2],
        stride: [usize; 2],
        pad: [usize; 4],
    ) -> Result<Tensor> {
        self.pool(PoolKind::Max, kernel, stride, pad)
    }

    /// Average pooling; `count_include_pad` divides by kH·kW, otherwise by the number of real elements.
    pub fn avg_pool(
        &self,
        kernel: [usize; 2],
        stride: [usize; 2],
        pad: [usize; 4],
        count_include_pad: bool,
    ) -> Result<Tensor> {
        self.pool(
            PoolKind::Avg {
                exclude_padding: !count_include_pad,
            },
            kernel,
            stride,
            pad,
        )
    }
}
