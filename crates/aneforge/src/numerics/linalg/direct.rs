//! Small-n direct factorizations, every step unrolled into one program: QR by modified
//! Gram–Schmidt, Cholesky and Doolittle LU without pivoting (both right-looking). Rows are taken with non-last-axis slices and
//! diagonal entries with one-hot matmuls (no width-offset slices).

use super::{max_abs, port, Matrix};
use crate::compile::Device;
use crate::concat;
use crate::constant;
use crate::error::{Error, Result};
use crate::graph::Tensor;
use crate::numerics::{cached, dot, run, Feeds, Plan, SharedPlan};
use crate::ops::io::HostArray;

/// Row `j` of `v` as [1, cols].
fn row(v: &Tensor, j: usize) -> Result<Tensor> {
    v.slice_by_size(&[j, 0], &[1, v.shape()[1]])
}

/// A [1, n] constant row with `f(k)` at column k.
fn const_row(n: usize, f: impl Fn(usize) -> bool) -> Result<Tensor> {
    let v: Vec<f32> = (0..n).map(|k| f32::from(u8::from(f(k)))).collect();
    constant("linalg", HostArray::f32(&[1, n], &v))
}

/// MGS program: input `at` [n, m] (Aᵀ); outputs `qt` [n, m] (Qᵀ) and `r` [n, n].
fn qr_plan(m: usize, n: usize, device: Device) -> Result<SharedPlan> {
    cached(format!("linalg/qr/{m}/{n}/{device:?}"), || {
        let mut v = port("at", &[n, m])?;
        let (mut qs, mut rs) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for j in 0..n {
            let vj = row(&v, j)?;
            let rjj = dot(&vj, &vj)?.sqrt()?;
            let q = vj.div(&rjj)?;
            let r = q
                .matmul(&v.transpose(&[1, 0])?)?
                .mul(&const_row(n, |k| k > j)?)?;
            v = v.sub(&r.transpose(&[1, 0])?.mul(&q)?)?;
            rs.push(r.add(&const_row(n, |k| k == j)?.mul(&rjj)?)?);
            qs.push(q);
        }
        Plan::build(
            &["at"],
            &[("qt", concat(&qs, 0)?), ("r", concat(&rs, 0)?)],
            Feeds::default(),
            device,
        )
    })
}

/// Thin QR of an m × n matrix (m ≥ n) by modified Gram–Schmidt: (Q m × n, R n × n upper
/// triangular), row-major. A is scaled to unit maximum on the host. Errors: m < n, a
/// rank-deficient A (a zero column norm gives a non-finite result).
pub fn qr(a: &Matrix, device: Device) -> Result<(Vec<f64>, Vec<f64>)> {
    let (m, n) = (a.rows, a.cols);
    if m < n {
        return Err(Error::shape(
            "qr",
            format!("needs rows >= columns (thin QR), got {m}x{n}"),
        ));
    }
    let k = max_abs(a.data);
    if k == 0.0 {
        return Err(Error::value("qr", "matrix is zero (rank 0)"));
    }
    let at: Vec<f32> = a.transposed().iter().map(|v| (v / k) as f32).collect();
    let out = run(&qr_plan(m, n, device)?, "qr", &[&at]).map_err(|e| rank_error("qr", e))?;
    let q: Vec<f64> = (0..m * n)
        .map(|i| out[0][(i % n) * m + i / n] as f64)
        .collect();
    Ok((q, out[1].iter().map(|&v| v as f64 * k).collect()))
}

/// Map the plan's non-finite-output error to what it means for a factorization.
fn rank_error(op: &str, e: Error) -> Error {
    match e {
        Error::Runtime { msg, .. } if msg.contains("non-finite") => Error::value(op, format!("the factorization broke down (singular, rank-deficient or not positive definite matrix): {msg}")),
        e => e,
    }
}

/// A [n, 1] one-hot column selecting index `j`.
fn one_hot_col(n: usize, j: usize) -> Result<Tensor> {
    constant(
        "linalg",
        HostArray::f32(
            &[n, 1],
            &(0..n)
                .map(|k| f32::from(u8::from(k == j)))
                .collect::<Vec<_>>(),
        ),
    )
}

/// Cholesky program: input `a` [n, n]; output `lt` [n, n] (Lᵀ, upper triangular).
fn cholesky_plan(n: usize, device: Device) -> Result<SharedPlan> {
    cached(format!("linalg/cholesky/{n}/{device:?}"), || {
        let mut s = port("a", &[n, n])?;
        let mut rows = Vec::with_capacity(n);
        for j in 0..n {
            let sj = row(&s, j)?;
            let l = sj
                .div(&sj.matmul(&one_hot_col(n, j)?)?.sqrt()?)?
                .mul(&const_row(n, |k| k >= j)?)?;
            s = s.sub(&l.transpose(&[1, 0])?.mul(&l)?)?;
            rows.push(l);
        }
        Plan::build(
            &["a"],
            &[("lt", concat(&rows, 0)?)],
            Feeds::default(),
            device,
        )
    })
}

/// Cholesky factor L (lower triangular, row-major) with A = L·Lᵀ for symmetric positive
/// definite A, scaled to unit maximum diagonal on the host. Errors: non-square or non-symmetric
/// A, a non-positive pivot (A not positive definite, also as seen in fp16).
pub fn cholesky(a: &Matrix, device: Device) -> Result<Vec<f64>> {
    let n = a.symmetric("cholesky")?;
    let k = (0..n).map(|i| a.at(i, i)).fold(0.0, f64::max);
    if k <= 0.0 {
        return Err(Error::value(
            "cholesky",
            "matrix is not positive definite (no positive diagonal entry)",
        ));
    }
    let scaled: Vec<f32> = a.data.iter().map(|v| (v / k) as f32).collect();
    let lt = &run(&cholesky_plan(n, device)?, "cholesky", &[&scaled])
        .map_err(|e| rank_error("cholesky", e))?[0];
    Ok((0..n * n)
        .map(|i| lt[(i % n) * n + i / n] as f64 * k.sqrt())
        .collect())
}

/// LU program: input `a` [n, n]; outputs `l` [n, n] (unit lower) and `u` [n, n] (upper).
fn lu_plan(n: usize, device: Device) -> Result<SharedPlan> {
    cached(format!("linalg/lu/{n}/{device:?}"), || {
        let mut s = port("a", &[n, n])?;
        let (mut ls, mut us) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for j in 0..n {
            let e = one_hot_col(n, j)?;
            let u = row(&s, j)?.mul(&const_row(n, |k| k >= j)?)?;
            let below = const_row(n, |k| k > j)?.transpose(&[1, 0])?;
            let l = s.matmul(&e)?.div(&u.matmul(&e)?)?.mul(&below)?;
            s = s.sub(&l.mul(&u)?)?;
            ls.push(l.add(&e)?);
            us.push(u);
        }
        Plan::build(
            &["a"],
            &[("l", concat(&ls, 1)?), ("u", concat(&us, 0)?)],
            Feeds::default(),
            device,
        )
    })
}

/// Doolittle LU without pivoting: (L unit lower triangular, U upper triangular), row-major, with
/// A = L·U. Stable for diagonally dominant or symmetric positive definite A; a zero pivot is an
/// error (no row exchanges are made). A is scaled to unit maximum on the host.
pub fn lu(a: &Matrix, device: Device) -> Result<(Vec<f64>, Vec<f64>)> {
    let n = a.square("lu")?;
    let k = max_abs(a.data);
    if k == 0.0 {
        return Err(Error::value("lu", "matrix is zero (singular)"));
    }
    let scaled: Vec<f32> = a.data.iter().map(|v| (v / k) as f32).collect();
    let out = run(&lu_plan(n, device)?, "lu", &[&scaled]).map_err(|e| rank_error("lu", e))?;
    let f = |v: &[f32], s: f64| v.iter().map(|&x| x as f64 * s).collect::<Vec<_>>();
    Ok((f(&out[0], 1.0), f(&out[1], k)))
}
