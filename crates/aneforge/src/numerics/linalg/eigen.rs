//! Eigenvalues and singular values: power iteration with normalisation after every product (so
//! fp16 never overflows, whatever the dominant eigenvalue or singular value) for `dominant_eig`
//! and `dominant_svd`; cyclic Jacobi rotations for `eigh`, and `svd` / `pca` through the Gram
//! matrix AᵀA and `eigh` (which squares the condition number: small singular values lose
//! relative accuracy).

use super::{check_iters, max_abs, port, Matrix, MAX_ORDER};
use crate::compile::Device;
use crate::error::{Error, Result};
use crate::graph::Tensor;
use crate::numerics::{cached, dot, run, sum_last, Feeds, Plan};
use crate::ops::elementwise::Compare;
use crate::ops::io::HostArray;
use crate::select;
use crate::{constant, scalar};

/// `w / ‖w‖` and ‖w‖ ([1, 1]).
fn normalise(w: &Tensor) -> Result<(Tensor, Tensor)> {
    let nrm = dot(w, w)?.sqrt()?;
    Ok((w.div(&nrm)?, nrm))
}

/// A deterministic start vector with no zero component (so it is not orthogonal to the dominant one by construction).
fn start(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| 1.0 + 0.5 * ((i as f32) * 0.7).sin())
        .collect()
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
        Plan::build(
            &["at", "v0"],
            &[("lambda", lambda), ("v", v)],
            Feeds::default(),
            device,
        )
    })?;
    let at: Vec<f32> = a.transposed().iter().map(|v| (v / k) as f32).collect();
    let out = run(&plan, OP, &[&at, &start(n)])?;
    Ok((
        out[0][0] as f64 * k,
        out[1].iter().map(|&v| v as f64).collect(),
    ))
}

/// The dominant singular triplet (σ, u, v) of an m × n matrix by `iters` steps of power iteration
/// alternating A and Aᵀ with normalisation after each product. Errors: iters out of range, A = 0.
pub fn dominant_svd(a: &Matrix, iters: usize, device: Device) -> Result<(f64, Vec<f64>, Vec<f64>)> {
    const OP: &str = "dominant_svd";
    check_iters(OP, iters)?;
    let (m, n) = (a.rows, a.cols);
    let k = nonzero_scale(OP, a)?;
    let plan = cached(
        format!("linalg/power_svd/{m}/{n}/{iters}/{device:?}"),
        || {
            let (am, at, mut v) = (
                port("a", &[m, n])?,
                port("at", &[n, m])?,
                port("v0", &[1, n])?,
            );
            let mut last = None;
            for _ in 0..iters {
                let u = normalise(&v.matmul(&at)?)?.0;
                let (vn, s) = normalise(&u.matmul(&am)?)?;
                v = vn;
                last = Some((u, s));
            }
            let (u, sigma) = last.ok_or_else(|| Error::value(OP, "iters must be >= 1"))?;
            Plan::build(
                &["a", "at", "v0"],
                &[("sigma", sigma), ("u", u), ("v", v)],
                Feeds::default(),
                device,
            )
        },
    )?;
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

/// Largest order `eigh` / `svd` unroll (n(n−1)/2 rotations per sweep, two n³ matmuls each).
pub const MAX_JACOBI_ORDER: usize = 48;

/// An [n, n] constant with ones at `cells`.
fn cells(n: usize, cells: &[(usize, usize)], v: &[f32]) -> Result<Tensor> {
    let mut m = vec![0.0; n * n];
    cells
        .iter()
        .zip(v)
        .for_each(|(&(i, j), &x)| m[i * n + j] = x);
    constant("eigh", HostArray::f32(&[n, n], &m))
}

/// `sweeps` cyclic Jacobi sweeps on symmetric `a` [n, n]: (diagonal as [1, n], rotations V [n, n]).
fn jacobi_sweeps(a: &Tensor, n: usize, sweeps: usize) -> Result<(Tensor, Tensor)> {
    let eye: Vec<f32> = (0..n * n)
        .map(|i| f32::from(u8::from(i / n == i % n)))
        .collect();
    let eye = constant("eigh", HostArray::f32(&[n, n], &eye))?;
    let (one, minus) = (scalar("eigh", 1.0)?, scalar("eigh", -1.0)?);
    let (mut a, mut v) = (a.clone(), eye.clone());
    for _ in 0..sweeps {
        for p in 0..n {
            for q in p + 1..n {
                // a_pp, a_qq, a_pq through one-hot masks (no width-offset slices).
                let pick = |i: usize, j: usize| -> Result<Tensor> {
                    let e: Vec<f32> = (0..n).map(|k| f32::from(u8::from(k == j))).collect();
                    a.slice_by_size(&[i, 0], &[1, n])?
                        .matmul_weight(HostArray::f32(&[n, 1], &e))
                };
                let (app, aqq, apq) = (pick(p, p)?, pick(q, q)?, pick(p, q)?);
                let d = aqq.sub(&app)?;
                let sgn = select(&d.compare_scalar(Compare::Less, 0.0)?, &minus, &one)?;
                let den = d
                    .abs()?
                    .add(&d.square()?.add(&apq.square()?.mul_scalar(4.0)?)?.sqrt()?)?
                    .maximum_scalar(1e-7)?;
                let t = apq.mul_scalar(2.0)?.mul(&sgn)?.div(&den)?;
                let c = t.square()?.add_scalar(1.0)?.rsqrt(0.0)?;
                let s = t.mul(&c)?;
                let j = eye
                    .add(&cells(n, &[(p, p), (q, q)], &[1.0, 1.0])?.mul(&c.sub_scalar(1.0)?)?)?
                    .add(&cells(n, &[(p, q), (q, p)], &[1.0, -1.0])?.mul(&s)?)?;
                a = j.transpose(&[1, 0])?.matmul(&a.matmul(&j)?)?;
                v = v.matmul(&j)?;
            }
        }
    }
    let diag = sum_last(&a.mul(&eye)?)?.reshape(&[1, n as i64])?;
    Ok((diag, v))
}

/// Order the eigenpairs ascending (eigenvalues scaled by `k`); V column-major per eigenvector in `v` [n, n].
fn sorted(w: &[f32], v: &[f32], n: usize, k: f64) -> (Vec<f64>, Vec<f64>) {
    let mut idx: Vec<usize> = (0..n).collect();
    idx.sort_by(|&i, &j| w[i].total_cmp(&w[j]));
    let vals = idx.iter().map(|&i| w[i] as f64 * k).collect();
    let vecs = (0..n * n)
        .map(|e| v[(e / n) * n + idx[e % n]] as f64)
        .collect();
    (vals, vecs)
}

/// Check the order for the unrolled Jacobi programs.
fn check_jacobi_order(op: &str, n: usize, sweeps: usize) -> Result<()> {
    if n > MAX_JACOBI_ORDER.min(MAX_ORDER) {
        return Err(Error::value(op, format!("order {n} exceeds {MAX_JACOBI_ORDER} (every Jacobi rotation is unrolled into the program)")));
    }
    if sweeps == 0 || sweeps > 32 {
        return Err(Error::value(
            op,
            format!("sweeps must be in 1..=32, got {sweeps}"),
        ));
    }
    Ok(())
}

/// Eigen-decomposition of symmetric A by `sweeps` cyclic Jacobi sweeps on the device: (ascending
/// eigenvalues, eigenvectors as the columns of a row-major n × n matrix), like `numpy.linalg.eigh`.
/// Errors: non-square or non-symmetric A, order above [`MAX_JACOBI_ORDER`], sweeps out of 1..=32.
pub fn eigh(a: &Matrix, sweeps: usize, device: Device) -> Result<(Vec<f64>, Vec<f64>)> {
    const OP: &str = "eigh";
    let n = a.symmetric(OP)?;
    check_jacobi_order(OP, n, sweeps)?;
    let k = match max_abs(a.data) {
        0.0 => {
            return Ok((
                vec![0.0; n],
                (0..n * n)
                    .map(|i| f64::from(u8::from(i / n == i % n)))
                    .collect(),
            ))
        }
        k => k,
    };
    let plan = cached(format!("linalg/eigh/{n}/{sweeps}/{device:?}"), || {
        let (w, v) = jacobi_sweeps(&port("a", &[n, n])?, n, sweeps)?;
        Plan::build(&["a"], &[("w", w), ("v", v)], Feeds::default(), device)
    })?;
    let scaled: Vec<f32> = a.data.iter().map(|v| (v / k) as f32).collect();
    let out = run(&plan, OP, &[&scaled])?;
    Ok(sorted(&out[0], &out[1], n, k))
}

/// Thin SVD of an m × n matrix (m ≥ n) through the Gram matrix: AᵀA = V·diag(σ²)·Vᵀ by [`eigh`]'s
/// Jacobi sweeps and U = A·V / σ, all in one program. Returns (U m × n, σ descending, Vᵀ n × n).
/// Singular values below ~3e-2·σ₁ lose relative accuracy (cond(A)² in fp16).
pub fn svd(a: &Matrix, sweeps: usize, device: Device) -> Result<(Vec<f64>, Vec<f64>, Vec<f64>)> {
    const OP: &str = "svd";
    let (m, n) = (a.rows, a.cols);
    if m < n {
        return Err(Error::shape(
            OP,
            format!("needs rows >= columns (thin SVD; pass the transpose), got {m}x{n}"),
        ));
    }
    check_jacobi_order(OP, n, sweeps)?;
    let k = match max_abs(a.data) {
        0.0 => return Err(Error::value(OP, "matrix is zero")),
        k => k,
    };
    let plan = cached(format!("linalg/svd/{m}/{n}/{sweeps}/{device:?}"), || {
        let (am, at) = (port("a", &[m, n])?, port("at", &[n, m])?);
        let (w, v) = jacobi_sweeps(&at.matmul(&am)?, n, sweeps)?;
        let sigma = w.maximum_scalar(0.0)?.sqrt()?;
        let u = am.matmul(&v)?.div(&sigma.maximum_scalar(1e-4)?)?;
        Plan::build(
            &["a", "at"],
            &[("sigma", sigma), ("u", u), ("v", v)],
            Feeds::default(),
            device,
        )
    })?;
    let scaled: Vec<f32> = a.data.iter().map(|v| (v / k) as f32).collect();
    let at: Vec<f32> = a.transposed().iter().map(|v| (v / k) as f32).collect();
    let out = run(&plan, OP, &[&scaled, &at])?;
    let mut idx: Vec<usize> = (0..n).collect();
    idx.sort_by(|&i, &j| out[0][j].total_cmp(&out[0][i]));
    let u = (0..m * n)
        .map(|e| out[1][(e / n) * n + idx[e % n]] as f64)
        .collect();
    let s = idx.iter().map(|&i| out[0][i] as f64 * k).collect();
    let vt = (0..n * n)
        .map(|e| out[2][(e % n) * n + idx[e / n]] as f64)
        .collect();
    Ok((u, s, vt))
}

/// Principal components of the rows of X (m samples × n features, m ≥ n): the data are centred
/// on the host, then [`svd`]. Returns (the top `k` components as rows, k × n; their explained
/// variances σ²/(m − 1)).
pub fn pca(x: &Matrix, k: usize, sweeps: usize, device: Device) -> Result<(Vec<f64>, Vec<f64>)> {
    let (m, n) = (x.rows, x.cols);
    if k == 0 || k > n || m < 2 {
        return Err(Error::value(
            "pca",
            format!(
                "needs 1 <= k <= features ({n}) and at least 2 samples, got k = {k} for {m}x{n}"
            ),
        ));
    }
    let mean: Vec<f64> = (0..n)
        .map(|j| (0..m).map(|i| x.at(i, j)).sum::<f64>() / m as f64)
        .collect();
    let centred: Vec<f64> = (0..m * n).map(|e| x.data[e] - mean[e % n]).collect();
    let (_, s, vt) = svd(&Matrix::new("pca", m, n, &centred)?, sweeps, device)?;
    Ok((
        vt[..k * n].to_vec(),
        s[..k].iter().map(|v| v * v / (m - 1) as f64).collect(),
    ))
}
