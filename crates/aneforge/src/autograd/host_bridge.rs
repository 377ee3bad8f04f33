//! Gradient rules of the bridge layers that have one, built from fused ops and host ops:
//! `minmax_norm` (through the lane's min and max), `sdpa` (the softmax attention backward,
//! recomputing the probabilities in fused ops), `cross_correlation` (correlations with the
//! padded gradient and the flipped template), `cost_volume` (signs of the differences),
//! `input_view` (the gradient padded back into place), `dynamic_slice` (the gradient placed
//! into zeros at the run-time start by the `dynamic_slice_add` host op, whose own gradient is
//! the slice again) and `scaled_elementwise`.

use super::{mask, pad_axis, reshape_to, unbroadcast, Grads, Vjp};
use crate::error::Result;
use crate::graph::build::bridge;
use crate::graph::build::host::host;
use crate::graph::Tensor;
use crate::ops::elementwise::Compare;
use crate::ops::host::bridge::{
    CostVolume, DynamicSlice, DynamicSliceAdd, InputView, MinmaxNorm, ScaledElementwise, Sdpa,
};
use crate::ops::host::normalize::ScaledOp;
use crate::ops::host::HostOp;

/// dx of `y = (x − lo) / (hi − lo + eps)` per lane: `g/D + [x = lo](t − s/D) − [x = hi] t`
/// with `s = Σ g`, `t = Σ g·y / D`.
pub fn minmax_norm(op: &MinmaxNorm, a: &Vjp) -> Result<Grads> {
    let (x, y, g) = (&a.x[0], &a.y[0], a.g0());
    let ax = [op.axis as i64];
    let lo = x.amin(&ax, true)?;
    let hi = x.amax(&ax, true)?;
    let d = hi.sub(&lo)?.add_scalar(op.eps)?;
    let s = g.sum(&ax, true)?;
    let t = g.mul(y)?.sum(&ax, true)?.div(&d)?;
    let at_min = t.sub(&s.div(&d)?)?;
    let bcast = |v: &Tensor| super::broadcast_to(v, x.shape());
    let dx = g
        .div(&d)?
        .add(&mask(&x.compare(Compare::Equal, &lo)?, &bcast(&at_min)?)?)?
        .sub(&mask(&x.compare(Compare::Equal, &hi)?, &bcast(&t)?)?)?;
    Ok(vec![Some(dx)])
}

/// The attention backward: P = softmax(q kᵀ·scale + mask), dV = Pᵀ g, dP = g vᵀ,
/// dS = P (dP − Σ dP·P), dq = dS k · scale, dk = dSᵀ q · scale, dmask = dS summed to its shape.
pub fn sdpa(op: &Sdpa, a: &Vjp) -> Result<Grads> {
    let (q, k, v, g) = (&a.x[0], &a.x[1], &a.x[2], a.g0());
    let p = bridge::sdpa_probs(q, k, a.x.get(3), op.scale)?;
    let dv = bridge::transpose_last(&p)?.matmul(g)?;
    let dp = g.matmul(&bridge::transpose_last(v)?)?;
    let ds = p.mul(&dp.sub(&dp.mul(&p)?.sum(&[-1], true)?)?)?;
    let dq = ds.matmul(k)?.mul_scalar(op.scale)?;
    let dk = bridge::transpose_last(&ds)?
        .matmul(q)?
        .mul_scalar(op.scale)?;
    let mut out = vec![Some(dq), Some(dk), Some(dv)];
    if let Some(m) = a.x.get(3) {
        out.push(Some(unbroadcast(&ds, m.shape())?));
    }
    Ok(out)
}

/// `out = x ⋆ t`: dx = (g padded by the template extent − 1) ⋆ flip(t), dt = x ⋆ g.
pub fn cross_correlation(a: &Vjp) -> Result<Grads> {
    let (x, t, g) = (&a.x[0], &a.x[1], a.g0());
    let (th, tw) = (t.shape()[0], t.shape()[1]);
    let padded = pad_axis(&pad_axis(g, 0, th - 1, th - 1)?, 1, tw - 1, tw - 1)?;
    let dx = bridge::cross_correlation(&padded, &t.reverse(&[0, 1])?)?;
    let dt = bridge::cross_correlation(x, g)?;
    Ok(vec![Some(dx), Some(dt)])
}

/// `out[d, i] = |aux[i] − ref[i + d]|`: with `s_d = sign(aux − ref[d..d+Wa]) · g[d]`,
/// daux = Σ_d s_d and dref = −Σ_d s_d shifted by d.
pub fn cost_volume(op: &CostVolume, a: &Vjp) -> Result<Grads> {
    let (aux, reference, g) = (&a.x[0], &a.x[1], a.g0());
    let (wa, wr) = (aux.shape()[0], reference.shape()[0]);
    let (mut daux, mut dref): (Option<Tensor>, Option<Tensor>) = (None, None);
    for d in 0..=op.disparity_range {
        let diff = aux.sub(&reference.slice_by_size(&[d], &[wa])?)?;
        let gd = reshape_to(&g.slice_by_size(&[d, 0], &[1, wa])?, &[wa])?;
        let s = mask(&diff.compare_scalar(Compare::Greater, 0.0)?, &gd)?
            .sub(&mask(&diff.compare_scalar(Compare::Less, 0.0)?, &gd)?)?;
        let shifted = pad_axis(&s.neg()?, 0, d, wr - wa - d)?;
        daux = Some(match daux {
            Some(acc) => acc.add(&s)?,
            None => s,
        });
        dref = Some(match dref {
            Some(acc) => acc.add(&shifted)?,
            None => shifted,
        });
    }
    Ok(vec![daux, dref])
}

/// `input_view`: the gradient padded with zeros around the window, reshaped to x.
pub fn input_view(op: &InputView, a: &Vjp) -> Result<Grads> {
    let (x, g) = (&a.x[0], a.g0());
    let n = crate::shape::numel(x.shape());
    let flat = pad_axis(g, 0, op.offset, n - op.offset - op.size)?;
    Ok(vec![Some(reshape_to(&flat, x.shape())?)])
}

/// `dynamic_slice(x, start)`: dx = zeros like x with g in the box at `start`; start has none.
pub fn dynamic_slice(a: &Vjp) -> Result<Grads> {
    let shape = a.x[0].shape().to_vec();
    let op = HostOp::DynamicSliceAdd(DynamicSliceAdd { shape });
    let dx = host(op, vec![a.g0().clone(), a.x[1].clone()])?.remove(0);
    Ok(vec![Some(dx), None])
}

/// `dynamic_slice_add(g, start)`: dg = the slice of the incoming gradient at `start`.
pub fn dynamic_slice_add(a: &Vjp) -> Result<Grads> {
    let sizes = a.x[0].shape().to_vec();
    let op = HostOp::DynamicSlice(DynamicSlice { sizes });
    let dg = host(op, vec![a.g0().clone(), a.x[1].clone()])?.remove(0);
    Ok(vec![Some(dg), None])
}

/// `scale · (x OP z)`: add/sub/mul by the usual rules, min/max routed by x ≤ z / x ≥ z.
pub fn scaled_elementwise(op: &ScaledElementwise, a: &Vjp) -> Result<Grads> {
    let (x, z) = (&a.x[0], &a.x[1]);
    let g = a.g0().mul_scalar(op.scale)?;
    let routed = |c: Compare| -> Result<Grads> {
        let to_x = x.compare(c, z)?;
        let dx = mask(&to_x, &g)?;
        let dz = g.sub(&dx)?;
        Ok(vec![Some(dx), Some(dz)])
    };
    match op.op {
        ScaledOp::Add => Ok(vec![Some(g.clone()), Some(g)]),
        ScaledOp::Sub => Ok(vec![Some(g.clone()), Some(g.neg()?)]),
        ScaledOp::Mul => Ok(vec![Some(g.mul(z)?), Some(g.mul(x)?)]),
        ScaledOp::Min => routed(Compare::LessEqual),
        ScaledOp::Max => routed(Compare::GreaterEqual),
    }
}
