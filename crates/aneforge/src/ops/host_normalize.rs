//! `minmax_norm` ((x − min) / (max − min + eps) along the width or height axis of an NCHW
//! tensor) and `scaled_elementwise` (scale · (x OP z) for two same-shaped tensors).

use crate::error::{Error, Result};
use crate::ops::host::checks::check_len;
use crate::ops::host::lanes;
use crate::shape::Shape;

/// Op name of the min-max normalisation.
pub const MINMAX_NORM: &str = "minmax_norm";
/// Op name of the scaled elementwise op.
pub const SCALED_ELEMENTWISE: &str = "scaled_elementwise";

/// The axis of `x [N, C, H, W]` that `minmax_norm` normalises along: `"width"` → 3,
/// `"height"` → 2 (case-insensitive); `"channel"` and others are value errors. Also checks
/// the rank and that `eps` is finite and > 0.
pub fn minmax_norm_axis(x: &[usize], dimension: &str, eps: f64) -> Result<usize> {
    if x.len() != 4 {
        return Err(Error::shape(
            MINMAX_NORM,
            format!("x must be [N, C, H, W], got {x:?}"),
        ));
    }
    if !(eps.is_finite() && eps > 0.0) {
        return Err(Error::value(
            MINMAX_NORM,
            format!("eps must be finite and > 0, got {eps}"),
        ));
    }
    match dimension.to_ascii_lowercase().as_str() {
        "width" => Ok(3),
        "height" => Ok(2),
        _ => Err(Error::value(
            MINMAX_NORM,
            format!("dimension must be \"width\" or \"height\", got {dimension:?}"),
        )),
    }
}

/// `(x − min) / (max − min + eps)` with min and max taken along `axis` (f32 arithmetic).
pub fn minmax_norm(x: &[f32], shape: &[usize], axis: usize, eps: f32) -> Result<Vec<f32>> {
    check_len(MINMAX_NORM, "x", x.len(), shape)?;
    let (outer, extent, inner) = lanes(shape, axis);
    let mut out = vec![0.0f32; x.len()];
    for o in 0..outer {
        for i in 0..inner {
            let at = |a: usize| (o * extent + a) * inner + i;
            let (lo, hi) = (0..extent).fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), a| {
                (lo.min(x[at(a)]), hi.max(x[at(a)]))
            });
            let denom = hi - lo + eps;
            for a in 0..extent {
                out[at(a)] = (x[at(a)] - lo) / denom;
            }
        }
    }
    Ok(out)
}

/// The binary operation inside `scaled_elementwise`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScaledOp {
    /// x + z
    Add,
    /// x − z
    Sub,
    /// x · z
    Mul,
    /// min(x, z)
    Min,
    /// max(x, z)
    Max,
}

impl ScaledOp {
    /// `"add" | "sub" | "mul" | "min" | "max"` (case-insensitive; `"mult"` = mul).
    pub fn parse(name: &str) -> Result<Self> {
        Ok(match name.to_ascii_lowercase().as_str() {
            "add" => ScaledOp::Add,
            "sub" => ScaledOp::Sub,
            "mul" | "mult" => ScaledOp::Mul,
            "min" => ScaledOp::Min,
            "max" => ScaledOp::Max,
            _ => {
                return Err(Error::value(
                    SCALED_ELEMENTWISE,
                    format!("op must be one of add, sub, mul, min, max; got {name:?}"),
                ))
            }
        })
    }

    /// The canonical lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            ScaledOp::Add => "add",
            ScaledOp::Sub => "sub",
            ScaledOp::Mul => "mul",
            ScaledOp::Min => "min",
            ScaledOp::Max => "max",
        }
    }
}

/// Shape rule of `scaled_elementwise`: `x` and `z` have the same shape; `scale` finite.
pub fn scaled_elementwise_shape(x: &[usize], z: &[usize], scale: f64) -> Result<Shape> {
    if x != z {
        return Err(Error::shape(
            SCALED_ELEMENTWISE,
            format!("x {x:?} and z {z:?} must have the same shape"),
        ));
    }
    if !scale.is_finite() {
        return Err(Error::value(
            SCALED_ELEMENTWISE,
            format!("scale must be finite, got {scale}"),
        ));
    }
    Ok(x.to_vec())
}

/// `scale · (x OP z)` elementwise (f32, one rounding at the executor's output).
pub fn scaled_elementwise(x: &[f32], z: &[f32], op: ScaledOp, scale: f32) -> Result<Vec<f32>> {
    scaled_elementwise_shape(&[x.len()], &[z.len()], scale as f64)?;
    Ok(x.iter()
        .zip(z)
        .map(|(&a, &b)| {
            scale
                * match op {
                    ScaledOp::Add => a + b,
                    ScaledOp::Sub => a - b,
                    ScaledOp::Mul => a * b,
                    ScaledOp::Min => a.min(b),
                    ScaledOp::Max => a.max(b),
                }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minmax_norm_maps_each_row_onto_zero_one() {
        let x = [2.0, 4.0, 6.0, 1.0, 1.0, 1.0];
        let out = minmax_norm(&x, &[1, 1, 2, 3], 3, 1e-4).unwrap();
        let d = 4.0 + 1e-4;
        assert_eq!(out, [0.0, 2.0 / d, 4.0 / d, 0.0, 0.0, 0.0]);
        let h = minmax_norm(&x, &[1, 1, 2, 3], 2, 1e-4).unwrap();
        assert_eq!(h[0], 1.0 / (1.0 + 1e-4));
        assert_eq!(h[3], 0.0);
        assert!(minmax_norm_axis(&[1, 1, 2, 3], "channel", 1e-4).is_err());
        assert!(minmax_norm_axis(&[1, 1, 2, 3], "Width", 0.0).is_err());
        assert_eq!(minmax_norm_axis(&[1, 1, 2, 3], "Height", 1e-4).unwrap(), 2);
    }

    #[test]
    fn scaled_elementwise_applies_the_scale_after_the_op() {
        let (x, z) = ([1.0, -2.0], [3.0, 5.0]);
        let run = |op| scaled_elementwise(&x, &z, op, 0.5).unwrap();
        assert_eq!(run(ScaledOp::Add), [2.0, 1.5]);
        assert_eq!(run(ScaledOp::Sub), [-1.0, -3.5]);
        assert_eq!(run(ScaledOp::Mul), [1.5, -5.0]);
        assert_eq!(run(ScaledOp::Min), [0.5, -1.0]);
        assert_eq!(run(ScaledOp::Max), [1.5, 2.5]);
        assert!(ScaledOp::parse("div").is_err());
        assert!(scaled_elementwise_shape(&[2], &[3], 1.0).is_err());
    }
}
