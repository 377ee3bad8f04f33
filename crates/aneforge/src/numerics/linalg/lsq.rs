//! Krylov least-squares and non-symmetric solvers, unrolled into one program each, with host-f64
//! correction rounds (each round solves for the f64 residual, normalised to unit norm):
//! `least_squares` (CGLS: CG on AᵀA x = Aᵀb without forming AᵀA — the condition number is
//! squared), `lsqr` (Golub–Kahan bidiagonalisation, Paige–Saunders) and `gmres` (one GMRES(m)
//! cycle per round: Arnoldi with modified Gram–Schmidt on the device, the small Hessenberg
//! least-squares problem on the host in f64).

use super::{
    check_iters, check_vector, max_abs, norm, port, residual, scaled_f32, Matrix, Solution, TINY,
};
use crate::compile::Device;
use crate::concat;
use crate::constant;
use crate::error::{Error, Result};
use crate::graph::Tensor;
use crate::numerics::{accumulate, cached, dot, run, Feeds, Plan, SharedPlan};
use crate::ops::io::HostArray;

/// ‖v‖ as [1, 1], clamped away from 0.
fn vnorm(v: &Tensor) -> Result<Tensor> {
    dot(v, v)?.maximum_scalar(TINY)?.sqrt()
}

/// `rounds` correction rounds x ← x + solve(r / ‖r‖)·‖r‖/σ with r = b − A·x in f64, where
/// `solve` runs on A/σ (σ = max |A|).
fn correct(
    a: &Matrix,
    b: &[f64],
    x0: Option<&[f64]>,
    rounds: usize,
    sigma: f64,
    mut solve: impl FnMut(&[f32]) -> Result<Vec<f64>>,
) -> Result<Solution> {
    let mut x = match x0 {
        Some(v) => v.to_vec(),
        None => vec![0.0; a.cols],
    };
    for _ in 0..rounds {
        let r: Vec<f64> = a.matvec(&x).iter().zip(b).map(|(ax, bi)| bi - ax).collect();
        let k = norm(&r);
        if k == 0.0 {
            break;
        }
        let y = solve(&scaled_f32(&r, 1.0 / k))?;
        x.iter_mut()
            .zip(&y)
            .for_each(|(xi, yi)| *xi += yi * k / sigma);
    }
    Ok(Solution {
        residual: residual(a, b, &x),
        x,
    })
}

/// Shared argument checks; returns (A/σ, Aᵀ/σ as f32, σ).
fn prepare(
    op: &str,
    a: &Matrix,
    b: &[f64],
    x0: Option<&[f64]>,
    iters: usize,
) -> Result<(Vec<f32>, Vec<f32>, f64)> {
    check_vector(op, "b", b, a.rows)?;
    if let Some(x0) = x0 {
        check_vector(op, "x0", x0, a.cols)?;
    }
    check_iters(op, iters)?;
    let sigma = max_abs(a.data);
    if sigma == 0.0 {
        return Err(Error::value(op, "matrix is zero"));
    }
    let f = |v: &[f64]| v.iter().map(|x| (x / sigma) as f32).collect::<Vec<_>>();
    Ok((f(a.data), f(&a.transposed()), sigma))
}

/// CGLS program: inputs `a` [m, n], `at` [n, m], `b` [1, m]; output `x` [1, n].
fn cgls_plan(m: usize, n: usize, iters: usize, device: Device) -> Result<SharedPlan> {
    cached(format!("linalg/cgls/{m}/{n}/{iters}/{device:?}"), || {
        let (a, at, b) = (
            port("a", &[m, n])?,
            port("at", &[n, m])?,
            port("b", &[1, m])?,
        );
        let mut r = b;
        let mut s = r.matmul(&a)?;
        let (mut p, mut gamma) = (s.clone(), dot(&s, &s)?);
        let mut x: Option<Tensor> = None;
        for _ in 0..iters {
            let q = p.matmul(&at)?;
            let alpha = gamma.div(&dot(&q, &q)?.maximum_scalar(TINY)?)?;
            let step = p.mul(&alpha)?;
            x = Some(accumulate(x, step)?);
            r = r.sub(&q.mul(&alpha)?)?;
            s = r.matmul(&a)?;
            let g = dot(&s, &s)?;
            p = s.add(&p.mul(&g.div(&gamma.maximum_scalar(TINY)?)?)?)?;
            gamma = g;
        }
        let x = x.ok_or_else(|| Error::value("least_squares", "iters must be >= 1"))?;
        Plan::build(&["a", "at", "b"], &[("x", x)], Feeds::default(), device)
    })
}

/// Minimise ‖A·x − b‖ for an m × n matrix by CGLS (`iters` unrolled steps, then `refine` more
/// rounds on the f64 residual). Accuracy follows cond(A)² (normal equations). Consistent systems
/// refine to f64-level residuals; for inconsistent ones the fp16 rounding of the (large) residual
/// limits optimality to ‖Aᵀr‖ / (‖A‖_F·‖b‖) ~ 1e-4. `residual` in the result is ‖b − A·x‖/‖b‖,
/// which is not 0 at the optimum of an inconsistent system.
pub fn least_squares(
    a: &Matrix,
    b: &[f64],
    iters: usize,
    x0: Option<&[f64]>,
    refine: usize,
    device: Device,
) -> Result<Solution> {
    solve_rectangular("least_squares", cgls_plan, a, b, iters, x0, refine, device)
}

/// LSQR program: inputs `a` [m, n], `at` [n, m], `b` [1, m] (unit norm); output `x` [1, n].
fn lsqr_plan(m: usize, n: usize, iters: usize, device: Device) -> Result<SharedPlan> {
    cached(format!("linalg/lsqr/{m}/{n}/{iters}/{device:?}"), || {
        let (a, at, b) = (
            port("a", &[m, n])?,
            port("at", &[n, m])?,
            port("b", &[1, m])?,
        );
        let mut u = b.clone();
        let mut v = u.matmul(&a)?;
        let mut alpha = vnorm(&v)?;
        v = v.div(&alpha)?;
        let mut w = v.clone();
        let (mut phi_bar, mut rho_bar) = (vnorm(&b)?, alpha.clone());
        let mut x: Option<Tensor> = None;
        for _ in 0..iters {
            u = v.matmul(&at)?.sub(&u.mul(&alpha)?)?;
            let beta = vnorm(&u)?;
            u = u.div(&beta)?;
            v = u.matmul(&a)?.sub(&v.mul(&beta)?)?;
            alpha = vnorm(&v)?;
            v = v.div(&alpha)?;
            let rho = rho_bar.square()?.add(&beta.square()?)?.sqrt()?;
            let (c, s) = (rho_bar.div(&rho)?, beta.div(&rho)?);
            let theta = s.mul(&alpha)?;
            rho_bar = c.mul(&alpha)?.neg()?;
            let phi = c.mul(&phi_bar)?;
            phi_bar = s.mul(&phi_bar)?;
            let step = w.mul(&phi.div(&rho)?)?;
            x = Some(accumulate(x, step)?);
            w = v.sub(&w.mul(&theta.div(&rho)?)?)?;
        }
        let x = x.ok_or_else(|| Error::value("lsqr", "iters must be >= 1"))?;
        Plan::build(&["a", "at", "b"], &[("x", x)], Feeds::default(), device)
    })
}

/// Minimise ‖A·x − b‖ by LSQR (`iters` unrolled Golub–Kahan steps, then `refine` more rounds on
/// the f64 residual); mathematically CGLS, numerically better conditioned.
pub fn lsqr(
    a: &Matrix,
    b: &[f64],
    iters: usize,
    x0: Option<&[f64]>,
    refine: usize,
    device: Device,
) -> Result<Solution> {
    solve_rectangular("lsqr", lsqr_plan, a, b, iters, x0, refine, device)
}

/// Runs an unrolled rectangular solver program (`plan(m, n, iters, device)` with inputs `a`,
/// `at`, `b`) inside the f64 residual-correction loop; errors name `op`.
#[allow(clippy::too_many_arguments)]
fn solve_rectangular(
    op: &str,
    plan: fn(usize, usize, usize, Device) -> Result<SharedPlan>,
    a: &Matrix,
    b: &[f64],
    iters: usize,
    x0: Option<&[f64]>,
    refine: usize,
    device: Device,
) -> Result<Solution> {
    let (am, at, sigma) = prepare(op, a, b, x0, iters)?;
    let plan = plan(a.rows, a.cols, iters, device)?;
    correct(a, b, x0, refine + 1, sigma, |r| {
        Ok(run(&plan, op, &[&am, &at, r])?[0]
            .iter()
            .map(|&v| v as f64)
            .collect())
    })
}

/// Arnoldi program: inputs `at` [n, n] (Aᵀ), `r` [1, n] (unit norm); outputs `v` [m, n] (the
/// Krylov basis, rows) and `h` [m + 1, m] (the Hessenberg matrix).
fn arnoldi_plan(n: usize, m: usize, device: Device) -> Result<SharedPlan> {
    cached(format!("linalg/arnoldi/{n}/{m}/{device:?}"), || {
        let (at, r) = (port("at", &[n, n])?, port("r", &[1, n])?);
        let mut vs = vec![r];
        let mut cols = Vec::with_capacity(m);
        for j in 0..m {
            let mut w = vs[j].matmul(&at)?;
            let mut h = Vec::with_capacity(j + 2);
            for v in &vs {
                let hij = dot(&w, v)?;
                w = w.sub(&v.mul(&hij)?)?;
                h.push(hij);
            }
            let next = vnorm(&w)?;
            vs.push(w.div(&next)?);
            h.push(next);
            if j + 2 <= m {
                h.push(constant(
                    "gmres",
                    HostArray::f32(&[m - j - 1, 1], &vec![0.0; m - j - 1]),
                )?);
            }
            cols.push(concat(&h, 0)?);
        }
        vs.truncate(m);
        Plan::build(
            &["at", "r"],
            &[("v", concat(&vs, 0)?), ("h", concat(&cols, 1)?)],
            Feeds::default(),
            device,
        )
    })
}

/// y minimising ‖e₁ − H·y‖ for an (m + 1) × m upper Hessenberg H (row-major), by Givens rotations in f64.
fn hessenberg_lsq(h: &[f64], m: usize) -> Vec<f64> {
    let mut h = h.to_vec();
    let mut g = vec![0.0; m + 1];
    g[0] = 1.0;
    for j in 0..m {
        let (a, b) = (h[j * m + j], h[(j + 1) * m + j]);
        let r = a.hypot(b);
        let (c, s) = if r == 0.0 { (1.0, 0.0) } else { (a / r, b / r) };
        for k in j..m {
            let (x, y) = (h[j * m + k], h[(j + 1) * m + k]);
            h[j * m + k] = c * x + s * y;
            h[(j + 1) * m + k] = -s * x + c * y;
        }
        (g[j], g[j + 1]) = (c * g[j] + s * g[j + 1], -s * g[j] + c * g[j + 1]);
    }
    let mut y = vec![0.0; m];
    for j in (0..m).rev() {
        let t: f64 = g[j] - (j + 1..m).map(|k| h[j * m + k] * y[k]).sum::<f64>();
        y[j] = if h[j * m + j] == 0.0 {
            0.0
        } else {
            t / h[j * m + j]
        };
    }
    y
}

/// Solve square A·x = b by `restarts` cycles of GMRES(`m`) (m ≤ n Krylov steps unrolled on the
/// device per cycle; each cycle restarts from the f64 residual).
pub fn gmres(
    a: &Matrix,
    b: &[f64],
    m: usize,
    restarts: usize,
    x0: Option<&[f64]>,
    device: Device,
) -> Result<Solution> {
    let n = a.square("gmres")?;
    if m > n {
        return Err(Error::value(
            "gmres",
            format!("Krylov dimension m = {m} exceeds the matrix order {n}"),
        ));
    }
    let (_, at, sigma) = prepare("gmres", a, b, x0, m)?;
    let plan = arnoldi_plan(n, m, device)?;
    correct(a, b, x0, restarts.max(1), sigma, |r| {
        let out = run(&plan, "gmres", &[&at, r])?;
        let h: Vec<f64> = out[1].iter().map(|&v| v as f64).collect();
        let y = hessenberg_lsq(&h, m);
        Ok((0..n)
            .map(|i| (0..m).map(|j| y[j] * out[0][j * n + i] as f64).sum())
            .collect())
    })
}
