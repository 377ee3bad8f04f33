//! Builders for the elementwise ops.

use crate::error::Result;
use crate::graph::build::io::scalar;
use crate::graph::Tensor;
use crate::ops::elementwise::{Binary, Compare, Select};
use crate::ops::Op;
use crate::shape;

/// Builders.
impl Tensor {
    fn binary(&self, b: Binary, other: &Tensor) -> Result<Tensor> {
        Tensor::apply1(Op::Binary(b), vec![self.clone(), other.clone()])
    }
    fn binary_scalar(&self, b: Binary, k: f32) -> Result<Tensor> {
        self.binary(b, &scalar(b.mil_name(), k)?)
    }

    /// x², lowered as `mul(x, x)` (native `square` fused with a following nonlinearity miscompiles).
    pub fn square(&self) -> Result<Tensor> {
        self.binary(Binary::Mul, self)
    }
    /// self + other (broadcasting).
    pub fn add(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(Binary::Add, other)
    }
    /// self − other (broadcasting).
    pub fn sub(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(Binary::Sub, other)
    }
    /// self · other (broadcasting).
    pub fn mul(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(Binary::Mul, other)
    }
    /// self / other (broadcasting; MIL `real_div`).
    pub fn div(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(Binary::RealDiv, other)
    }
    /// Elementwise maximum (broadcasting).
    pub fn maximum(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(Binary::Maximum, other)
    }
    /// Elementwise minimum (broadcasting).
    pub fn minimum(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(Binary::Minimum, other)
    }
    /// self ^ other (broadcasting).
    pub fn pow(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(Binary::Pow, other)
    }
    /// self + k.
    pub fn add_scalar(&self, k: f32) -> Result<Tensor> {
        self.binary_scalar(Binary::Add, k)
    }
    /// self − k.
    pub fn sub_scalar(&self, k: f32) -> Result<Tensor> {
        self.binary_scalar(Binary::Sub, k)
    }
    /// k − self.
    pub fn rsub_scalar(&self, k: f32) -> Result<Tensor> {
        scalar("sub", k)?.binary(Binary::Sub, self)
    }
    /// self · k.
    pub fn mul_scalar(&self, k: f32) -> Result<Tensor> {
        self.binary_scalar(Binary::Mul, k)
    }
    /// self / k.
    pub fn div_scalar(&self, k: f32) -> Result<Tensor> {
        self.binary_scalar(Binary::RealDiv, k)
    }
    /// k / self.
    pub fn rdiv_scalar(&self, k: f32) -> Result<Tensor> {
        scalar("real_div", k)?.binary(Binary::RealDiv, self)
    }
    /// self ^ k.
    pub fn pow_scalar(&self, k: f32) -> Result<Tensor> {
        self.binary_scalar(Binary::Pow, k)
    }
    /// max(self, k).
    pub fn maximum_scalar(&self, k: f32) -> Result<Tensor> {
        self.binary_scalar(Binary::Maximum, k)
    }
    /// min(self, k).
    pub fn minimum_scalar(&self, k: f32) -> Result<Tensor> {
        self.binary_scalar(Binary::Minimum, k)
    }
    /// −self, as `mul(x, -1)`.
    pub fn neg(&self) -> Result<Tensor> {
        self.mul_scalar(-1.0)
    }

    /// Elementwise comparison producing a bool tensor (for `select`).
    pub fn compare(&self, c: Compare, other: &Tensor) -> Result<Tensor> {
        Tensor::apply1(Op::Compare(c), vec![self.clone(), other.clone()])
    }
    /// Elementwise comparison against a scalar.
    pub fn compare_scalar(&self, c: Compare, k: f32) -> Result<Tensor> {
        self.compare(c, &scalar(c.mil_name(), k)?)
    }
}

/// `cond ? a : b` elementwise with broadcasting; `cond` must be bool. MIL types select's
/// result from `a` and `b` alone (coremltools' type inference), so when only `cond` carries the
/// full shape, `a` is tiled up to it first and the printed program types correctly.
pub fn select(cond: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let shapes = shape::broadcast("select", a.shape(), b.shape())
        .and_then(|ab| Ok((shape::broadcast("select", cond.shape(), &ab)?, ab)));
    let a = match shapes {
        Ok((full, ab)) if full != ab => expand_to(a, &full)?,
        _ => a.clone(), // equal, or a shape error that `infer` reports naming all three operands
    };
    Tensor::apply1(Op::Select(Select), vec![cond.clone(), a, b.clone()])
}

/// `t` repeated up to `full` (NumPy-broadcast-compatible, rank ≤ full's): leading 1s, then tiling.
fn expand_to(t: &Tensor, full: &[usize]) -> Result<Tensor> {
    let lead = full.len() - t.rank();
    let ranked: Vec<usize> = std::iter::repeat_n(1, lead)
        .chain(t.shape().iter().copied())
        .collect();
    let t = if lead > 0 {
        t.reshape(&ranked.iter().map(|&d| d as i64).collect::<Vec<_>>())?
    } else {
        t.clone()
    };
    t.tile(
        &full
            .iter()
            .zip(&ranked)
            .map(|(&f, &d)| f / d)
            .collect::<Vec<_>>(),
    )
}
