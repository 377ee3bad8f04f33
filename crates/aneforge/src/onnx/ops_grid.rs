//! GridSample (2-D: X [N, C, H, W], grid [N, Ho, Wo, 2] of normalized (x, y)) as a fused
//! gather: the sampling coordinates are computed in the graph, each corner pixel is a host
//! `take` at its flat index into X viewed as [N·H·W, C]. Modes linear (bilinear) and nearest
//! (round half to even), padding zeros and border, both align_corners. The flat index is exact
//! in fp16 up to 2048, so N·H·W ≤ 2048.

use super::ops::{to_fp16, Args, OpFn, Value};
use crate::dtype::DType;
use crate::error::Result;
use crate::graph::build::io::constant;
use crate::graph::Tensor;
use crate::ops::elementwise::Compare;
use crate::ops::io::HostArray;

/// The mapping of `op`, or None.
pub fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "GridSample" => grid_sample,
        _ => return None,
    })
}

/// Largest N·H·W (flat pixel indices are computed in fp16).
const MAX_PIXELS: usize = 2048;

/// `round(x)` with ties to even: r = floor(x + 0.5), minus 1 where x + 0.5 is an odd integer.
fn round_half_even(x: &Tensor) -> Result<Tensor> {
    let up = x.add_scalar(0.5)?;
    let r = up.unary_named("floor", &[])?;
    let tie = to_fp16(&r.compare(Compare::Equal, &up)?)?;
    let odd = r.sub(
        &r.mul_scalar(0.5)?
            .unary_named("floor", &[])?
            .mul_scalar(2.0)?,
    )?;
    r.sub(&tie.mul(&odd)?)
}

/// 1.0 where `lo <= v <= hi`, else 0.0.
fn inside(v: &Tensor, lo: f32, hi: f32) -> Result<Tensor> {
    let a = to_fp16(&v.compare_scalar(Compare::GreaterEqual, lo)?)?;
    let b = to_fp16(&v.compare_scalar(Compare::LessEqual, hi)?)?;
    a.mul(&b)
}

fn grid_sample(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let x = a.ftensor(0)?;
    let grid = a.ftensor(1)?;
    if x.rank() != 4 {
        return Err(n.unsupported(&format!(
            "a {}-D GridSample (only 2-D: X of rank 4)",
            x.rank().saturating_sub(2)
        )));
    }
    let [nb, c, h, w] = [x.shape()[0], x.shape()[1], x.shape()[2], x.shape()[3]];
    let gs = grid.shape().to_vec();
    if gs.len() != 4 || gs[0] != nb || gs[3] != 2 {
        return Err(n.bad(format!("grid {gs:?} does not fit X {:?}", x.shape())));
    }
    if nb * h * w > MAX_PIXELS {
        return Err(n.unsupported(&format!(
            "N·H·W = {} pixels (flat indices are exact in fp16 up to {MAX_PIXELS})",
            nb * h * w
        )));
    }
    let mode = n.string("mode", if n.opset >= 20 { "linear" } else { "bilinear" })?;
    let nearest = match mode.as_str() {
        "linear" | "bilinear" => false,
        "nearest" => true,
        other => {
            return Err(n.unsupported(&format!("mode = '{other}' (linear and nearest are mapped)")))
        }
    };
    let padding = n.string("padding_mode", "zeros")?;
    let border = match padding.as_str() {
        "zeros" => false,
        "border" => true,
        other => {
            return Err(n.unsupported(&format!(
                "padding_mode = '{other}' (zeros and border are mapped)"
            )))
        }
    };
    let align = n.int("align_corners", 0)? != 0;
    let (ho, wo) = (gs[1], gs[2]);
    let coord = |k: usize, len: usize| -> Result<Tensor> {
        let g = grid
            .slice_by_size(&[0, 0, 0, k], &[nb, ho, wo, 1])?
            .reshape(&[nb as i64, ho as i64, wo as i64])?;
        let len_f = len as f32;
        let v = if align {
            g.add_scalar(1.0)?.mul_scalar((len_f - 1.0) / 2.0)?
        } else {
            g.add_scalar(1.0)?
                .mul_scalar(len_f)?
                .sub_scalar(1.0)?
                .mul_scalar(0.5)?
        };
        let v = if nearest { round_half_even(&v)? } else { v };
        if border {
            v.maximum_scalar(0.0)?.minimum_scalar(len_f - 1.0)
        } else {
            Ok(v)
        }
    };
    let (xs, ys) = (coord(0, w)?, coord(1, h)?);
    // X as [N·H·W, C] rows; a batch offset per grid row.
    let rows = x
        .transpose(&[0, 2, 3, 1])?
        .reshape(&[(nb * h * w) as i64, c as i64])?;
    let offsets: Vec<f32> = (0..nb).map(|b| (b * h * w) as f32).collect();
    let offsets = constant(&n.what, HostArray::f32(&[nb, 1, 1], &offsets))?;
    // One corner: weight · (inside ? X[row] : 0), with the indices clamped into the image.
    let corner = |xi: &Tensor, yi: &Tensor, weight: Tensor| -> Result<Tensor> {
        // Border padding clamps (coordinates are already inside); zeros drops outside corners.
        let weight = if border {
            weight
        } else {
            weight
                .mul(&inside(xi, 0.0, (w - 1) as f32)?)?
                .mul(&inside(yi, 0.0, (h - 1) as f32)?)?
        };
        let cx = xi.maximum_scalar(0.0)?.minimum_scalar((w - 1) as f32)?;
        let cy = yi.maximum_scalar(0.0)?.minimum_scalar((h - 1) as f32)?;
        let flat = cy
            .mul_scalar(w as f32)?
            .add(&cx)?
            .add(&offsets)?
            .cast(DType::Int32)?;
        let px = rows.take(&flat, 0)?; // [N, Ho, Wo, C]
        px.mul(&weight.expand_dims(&[3])?)
    };
    let y = if nearest {
        let one = xs.mul_scalar(0.0)?.add_scalar(1.0)?;
        corner(&xs, &ys, one)?
    } else {
        let (x0, y0) = (xs.unary_named("floor", &[])?, ys.unary_named("floor", &[])?);
        let (x1, y1) = (x0.add_scalar(1.0)?, y0.add_scalar(1.0)?);
        let (fx, fy) = (xs.sub(&x0)?, ys.sub(&y0)?);
        let (gx, gy) = (fx.rsub_scalar(1.0)?, fy.rsub_scalar(1.0)?);
        corner(&x0, &y0, gx.mul(&gy)?)?
            .add(&corner(&x1, &y0, fx.mul(&gy)?)?)?
            .add(&corner(&x0, &y1, gx.mul(&fy)?)?)?
            .add(&corner(&x1, &y1, fx.mul(&fy)?)?)?
    };
    Ok(vec![Value::Graph {
        t: y.transpose(&[0, 3, 1, 2])?,
        elem: a.req(0)?.elem(),
    }])
}
