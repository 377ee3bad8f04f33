//! Power iteration with normalisation after every product (so fp16 never overflows, whatever
//! the dominant eigenvalue or singular value): `dominant_eig` and `dominant_svd`.

use super::{check_iters, max_abs, Matrix};
use crate::compile::Device;
use crate::error::{Error, Result};
use crate::graph::Tensor;
use crate::numerics::{cached, dot, run, Feeds, Plan};
use crate::ops::io::input_port;
use crate::DType;

fn port(name: &str, shape: &[usize]) -> Result<Tensor> {
    input_port(shape, DType::Fp16, Some(name))
}

/// `w / ‖w‖` and ‖w‖ ([1, 1]).
fn normalise(w: &Tensor) -> Result<(Tensor, Tensor)> {
    let nrm = dot(w, w)?.sqrt()?;
    Ok((w.div(&nrm)?, nrm))
}

/// A deterministic start vector with no zero component (so it is not orthogonal to the dominant one by construction).
fn start(n: usize) -> Vec<f32> {
    (0..n).map(|i| 1.0 + 0.5 * ((i as f32) * 0.7).sin()).collect()
}

/// The dominant eigenpair (λ, v) of square A by `iters` steps of power iteration on the device
/// (A scaled to unit maximum; λ by the Rayleigh quotient vᵀA v with ‖v‖ = 1). Converges when
/// |λ₁| > |λ₂|, at rate |λ₂/λ₁| per step. Errors: non-square A, iters out of range, A = 0.
pub fn dominant_eig(a: &Matrix, iters: usize, device: Device) -> Result<(f64, Vec<f64>)> {
    const OP: &str = "dominant_eig";
    let n = a.square(OP)?;
    check_iters(OP, iters)?;
    let k = nonzero_scale(OP, a)?;
    let plan = cached(format!("linalg/power/{n}/{iters}/{device:?}"), || {
        let (at, mut v) = (port("at", &[n, n])?, port("v0", &[1, n])?);
        for _ in 0..iters {
            v = normalise(&v.matmul(&at)?)?.0;
        }
        let lambda = dot(&v, &v.matmul(&at)?)?;
        Plan::build(&["at", "v0"], &[("lambda", lambda), ("v", v)], Feeds::default(), device)
    })?;
    let at: Vec<f32> = a.transposed().iter().map(|v| (v / k) as f32).collect();
    let out = run(&plan, OP, &[&at, &start(n)])?;
    Ok((out[0][0] as f64 * k, out[1].iter().map(|&v| v as f64).collect()))
}

/// The dominant singular triplet (σ, u, v) of an m × n matrix by `iters` steps of power iteration
/// alternating A and Aᵀ with normalisation after each product. Errors: iters out of range, A = 0.
pub fn dominant_svd(a: &Matrix, iters: usize, device: Device) -> Result<(f64, Vec<f64>, Vec<f64>)> {
    const OP: &str = "dominant_svd";
    check_iters(OP, iters)?;
    let (m, n) = (a.rows, a.cols);
    let k = nonzero_scale(OP, a)?;
    let plan = cached(format!("linalg/power_svd/{m}/{n}/{iters}/{device:?}"), || {
        let (am, at, mut v) = (port("a", &[m, n])?, port("at", &[n, m])?, port("v0", &[1, n])?);
        let mut last = None;
        for _ in 0..iters {
            let u = normalise(&v.matmul(&at)?)?.0;
            let (vn, s) = normalise(&u.matmul(&am)?)?;
            v = vn;
            last = Some((u, s));
        }
        let (u, sigma) = last.ok_or_else(|| Error::value(OP, "iters must be >= 1"))?;
        Plan::build(&["a", "at", "v0"], &[("sigma", sigma), ("u", u), ("v", v)], Feeds::default(), device)
    })?;
    let scaled: Vec<f32> = a.data.iter().map(|v| (v / k) as f32).collect();
    let at: Vec<f32> = a.transposed().iter().map(|v| (v / k) as f32).collect();
    let out = run(&plan, OP, &[&scaled, &at, &start(n)])?;
    let f = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<_>>();
    Ok((out[0][0] as f64 * k, f(&out[1]), f(&out[2])))
}

/// max |A|, or an error for the zero matrix.
fn nonzero_scale(op: &str, a: &Matrix) -> Result<f64> {
    match max_abs(a.data) {
        k if k > 0.0 => Ok(k),
        _ => Err(Error::value(op, "matrix is zero")),
    }
}
