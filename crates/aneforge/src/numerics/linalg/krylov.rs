//! Iterative solvers, every iteration unrolled into one program: conjugate gradient (symmetric
//! Jacobi scaling, optional host-f64 refinement rounds), Jacobi, and mixed-precision iterative
//! refinement (host f64 residual, on-device Richardson inner solve).

use super::{
    check_iters, check_vector, max_abs, norm, port, residual, scaled_f32, Matrix, Solution, TINY,
};
use crate::compile::Device;
use crate::error::{Error, Result};
use crate::graph::Tensor;
use crate::numerics::{accumulate, cached, dot, run, Feeds, Plan, SharedPlan};

/// CG program: inputs `a` [n, n] (symmetric), `b` [1, n]; `iters` steps from x = 0; output `x` [1, n].
fn cg_plan(n: usize, iters: usize, device: Device) -> Result<SharedPlan> {
    cached(format!("linalg/cg/{n}/{iters}/{device:?}"), || {
        let (a, b) = (port("a", &[n, n])?, port("b", &[1, n])?);
        let (mut r, mut p) = (b.clone(), b.clone());
        let mut rs = dot(&r, &r)?;
        let mut x: Option<Tensor> = None;
        for _ in 0..iters {
            let ap = p.matmul(&a)?;
            let alpha = rs.div(&dot(&p, &ap)?.maximum_scalar(TINY)?)?;
            let step = p.mul(&alpha)?;
            x = Some(accumulate(x, step)?);
            r = r.sub(&ap.mul(&alpha)?)?;
            let rs_new = dot(&r, &r)?;
            p = r.add(&p.mul(&rs_new.div(&rs.maximum_scalar(TINY)?)?)?)?;
            rs = rs_new;
        }
        let x = x.ok_or_else(|| Error::value("conjugate_gradient", "iters must be >= 1"))?;
        Plan::build(&["a", "b"], &[("x", x)], Feeds::default(), device)
    })
}

/// Solve A·x = b for symmetric positive definite A by conjugate gradient: A is scaled to unit
/// diagonal on the host (symmetric Jacobi scaling, so every entry is in [-1, 1]), `iters` steps run
/// on the device from x = 0 on the current residual, and `refine` more rounds each re-solve for
/// the host-f64 residual. Errors: non-square, non-symmetric or non-positive diagonal A, size
/// mismatches, iters out of 1..=2048, fp16 overflow.
pub fn conjugate_gradient(
    a: &Matrix,
    b: &[f64],
    iters: usize,
    x0: Option<&[f64]>,
    refine: usize,
    device: Device,
) -> Result<Solution> {
    const OP: &str = "conjugate_gradient";
    let n = a.symmetric(OP)?;
    check_vector(OP, "b", b, n)?;
    check_iters(OP, iters)?;
    let diag: Vec<f64> = (0..n).map(|i| a.at(i, i)).collect();
    if let Some(i) = diag.iter().position(|&d| d <= 0.0) {
        return Err(Error::value(
            OP,
            format!("matrix is not positive definite: A[{i},{i}] = {}", diag[i]),
        ));
    }
    let s: Vec<f64> = diag.iter().map(|d| 1.0 / d.sqrt()).collect();
    let scaled: Vec<f32> = (0..n * n)
        .map(|i| (s[i / n] * a.data[i] * s[i % n]) as f32)
        .collect();
    let plan = cg_plan(n, iters, device)?;
    let mut x = start(OP, x0, n)?;
    for _ in 0..=refine {
        let r: Vec<f64> = a
            .matvec(&x)
            .iter()
            .zip(b)
            .zip(&s)
            .map(|((ax, bi), si)| (bi - ax) * si)
            .collect();
        let k = norm(&r);
        if k == 0.0 {
            break;
        }
        let y = &run(&plan, OP, &[&scaled, &scaled_f32(&r, 1.0 / k)])?[0];
        x.iter_mut()
            .zip(y)
            .zip(&s)
            .for_each(|((xi, &yi), si)| *xi += yi as f64 * si * k);
    }
    Ok(Solution {
        residual: residual(a, b, &x),
        x,
    })
}

/// `x0` (checked) or zeros.
fn start(op: &str, x0: Option<&[f64]>, n: usize) -> Result<Vec<f64>> {
    match x0 {
        Some(v) => check_vector(op, "x0", v, n).map(|_| v.to_vec()),
        None => Ok(vec![0.0; n]),
    }
}

/// Affine iteration program: inputs `m` [n, n], `c` [1, n], `x0` [1, n]; `iters` steps of x ← c + x·m.
fn affine_plan(n: usize, iters: usize, device: Device) -> Result<SharedPlan> {
    cached(format!("linalg/affine/{n}/{iters}/{device:?}"), || {
        let (m, c, x0) = (
            port("m", &[n, n])?,
            port("c", &[1, n])?,
            port("x0", &[1, n])?,
        );
        let mut x = x0;
        for _ in 0..iters {
            x = c.add(&x.matmul(&m)?)?;
        }
        Plan::build(&["m", "c", "x0"], &[("x", x)], Feeds::default(), device)
    })
}

/// Run x ← c + x·m `iters` times from `x0` with c and x0 scaled together to unit maximum.
fn affine(
    op: &str,
    m: &[f32],
    c: &[f64],
    x0: &[f64],
    iters: usize,
    device: Device,
) -> Result<Vec<f64>> {
    let n = c.len();
    let k = max_abs(c).max(max_abs(x0));
    if k == 0.0 {
        return Ok(vec![0.0; n]);
    }
    let y = &run(
        &affine_plan(n, iters, device)?,
        op,
        &[m, &scaled_f32(c, 1.0 / k), &scaled_f32(x0, 1.0 / k)],
    )?[0];
    Ok(y.iter().map(|&v| v as f64 * k).collect())
}

/// Solve A·x = b by `iters` unrolled Jacobi sweeps x ← D⁻¹(b − (A − D)·x) from `x0` (default 0).
/// Converges for strictly diagonally dominant A. Errors: non-square A, a zero diagonal entry,
/// size mismatches, iters out of range, fp16 overflow (a diverging iteration).
pub fn jacobi(
    a: &Matrix,
    b: &[f64],
    iters: usize,
    x0: Option<&[f64]>,
    device: Device,
) -> Result<Solution> {
    const OP: &str = "jacobi";
    let n = a.square(OP)?;
    check_vector(OP, "b", b, n)?;
    check_iters(OP, iters)?;
    if let Some(i) = (0..n).find(|&i| a.at(i, i) == 0.0) {
        return Err(Error::value(
            OP,
            format!("diagonal entry A[{i},{i}] is zero"),
        ));
    }
    // Row form: x_j ← b_j / A_jj + Σ_i x_i·M[i, j] with M[i, j] = −A[j, i] / A[j, j] (i ≠ j).
    let m: Vec<f32> = (0..n * n)
        .map(|k| (k / n, k % n))
        .map(|(i, j)| {
            if i == j {
                0.0
            } else {
                (-a.at(j, i) / a.at(j, j)) as f32
            }
        })
        .collect();
    let c: Vec<f64> = (0..n).map(|j| b[j] / a.at(j, j)).collect();
    let x = affine(OP, &m, &c, &start(OP, x0, n)?, iters, device)?;
    Ok(Solution {
        residual: residual(a, b, &x),
        x,
    })
}

/// Mixed-precision iterative refinement: `iters` rounds of r = b − A·x on the host in f64, then
/// an on-device Richardson solve of A·y = r (`inner` unrolled steps y ← y + ω(r − A·y) with
/// ω = 1 / max row sum of |A|), x ← x + y. Converges for symmetric positive definite A (rate
/// 1 − ω·λ_min per inner step). Errors as [`jacobi`].
pub fn iterative_refine(
    a: &Matrix,
    b: &[f64],
    x0: Option<&[f64]>,
    iters: usize,
    inner: usize,
    device: Device,
) -> Result<Solution> {
    const OP: &str = "iterative_refine";
    let n = a.square(OP)?;
    check_vector(OP, "b", b, n)?;
    check_iters(OP, inner)?;
    let omega = 1.0
        / (0..n)
            .map(|i| (0..n).map(|j| a.at(i, j).abs()).sum::<f64>())
            .fold(0.0, f64::max);
    // Row form of y ← ω·r + (I − ω·A)·y: M = (I − ω·A)ᵀ.
    let m: Vec<f32> = (0..n * n)
        .map(|k| (k / n, k % n))
        .map(|(i, j)| (f64::from(u8::from(i == j)) - omega * a.at(j, i)) as f32)
        .collect();
    let mut x = start(OP, x0, n)?;
    let zeros = vec![0.0; n];
    for _ in 0..iters {
        let r: Vec<f64> = a
            .matvec(&x)
            .iter()
            .zip(b)
            .map(|(ax, bi)| omega * (bi - ax))
            .collect();
        let y = affine(OP, &m, &r, &zeros, inner, device)?;
        x.iter_mut().zip(&y).for_each(|(xi, yi)| *xi += yi);
    }
    Ok(Solution {
        residual: residual(a, b, &x),
        x,
    })
}
