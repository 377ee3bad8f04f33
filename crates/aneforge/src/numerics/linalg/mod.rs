//! Linear algebra as static graphs: iterative solvers (conjugate gradient, Jacobi, mixed-precision
//! refinement), small-n direct factorizations (QR by modified Gram–Schmidt, Cholesky) and power
//! iteration. Matrices are host f64 row-major; every program input is scaled on the host so its
//! largest magnitude is 1 (fp16 range), and results are scaled back. Vectors are rows `[1, n]`;
//! dot products are `(u * v) @ ones` (wide matmul accumulation, never fp16 `reduce_sum`).
//! Data-dependent steps (scaling, convergence, refinement residuals) run on the host in f64.

pub mod direct;
pub mod eigen;
pub mod krylov;
pub mod lsq;

use crate::error::{Error, Result};
use crate::graph::Tensor;
use crate::input_port;
use crate::DType;

/// Denominators and squared norms are clamped to at least this (fp16 subnormal range) so a converged iterate gives 0, not NaN.
pub const TINY: f32 = 1e-7;

/// A named fp16 program input of `shape`.
pub fn port(name: &str, shape: &[usize]) -> Result<Tensor> {
    input_port(shape, DType::Fp16, Some(name))
}

/// Largest matrix order (rows or columns) the solvers accept.
pub const MAX_ORDER: usize = 4096;
/// Largest unrolled iteration count per program.
pub const MAX_ITERS: usize = 2048;

/// A borrowed row-major f64 matrix.
#[derive(Clone, Copy, Debug)]
pub struct Matrix<'a> {
    pub rows: usize,
    pub cols: usize,
    pub data: &'a [f64],
}

impl<'a> Matrix<'a> {
    /// A `rows × cols` view of `data`; errors (naming `op`) on a length mismatch, an empty or
    /// oversized matrix (see [`MAX_ORDER`]) or a non-finite entry.
    pub fn new(op: &str, rows: usize, cols: usize, data: &'a [f64]) -> Result<Self> {
        if rows == 0 || cols == 0 || rows > MAX_ORDER || cols > MAX_ORDER {
            return Err(Error::shape(
                op,
                format!(
                    "matrix must be between 1x1 and {MAX_ORDER}x{MAX_ORDER}, got {rows}x{cols}"
                ),
            ));
        }
        if data.len() != rows * cols {
            return Err(Error::shape(
                op,
                format!(
                    "{rows}x{cols} matrix needs {} values, got {}",
                    rows * cols,
                    data.len()
                ),
            ));
        }
        if let Some(i) = data.iter().position(|v| !v.is_finite()) {
            return Err(Error::value(
                op,
                format!(
                    "matrix entry ({}, {}) = {} is not finite",
                    i / cols,
                    i % cols,
                    data[i]
                ),
            ));
        }
        Ok(Matrix { rows, cols, data })
    }

    /// Entry (i, j).
    pub fn at(&self, i: usize, j: usize) -> f64 {
        self.data[i * self.cols + j]
    }

    /// Error unless square.
    pub fn square(&self, op: &str) -> Result<usize> {
        if self.rows != self.cols {
            return Err(Error::shape(
                op,
                format!("needs a square matrix, got {}x{}", self.rows, self.cols),
            ));
        }
        Ok(self.rows)
    }

    /// Error unless symmetric to a relative tolerance of 1e-6 of the largest entry.
    pub fn symmetric(&self, op: &str) -> Result<usize> {
        let n = self.square(op)?;
        let tol = 1e-6 * max_abs(self.data).max(f64::MIN_POSITIVE);
        for i in 0..n {
            for j in 0..i {
                if (self.at(i, j) - self.at(j, i)).abs() > tol {
                    return Err(Error::value(
                        op,
                        format!(
                            "needs a symmetric matrix, but A[{i},{j}] = {} and A[{j},{i}] = {}",
                            self.at(i, j),
                            self.at(j, i)
                        ),
                    ));
                }
            }
        }
        Ok(n)
    }

    /// A·x in f64.
    pub fn matvec(&self, x: &[f64]) -> Vec<f64> {
        self.data
            .chunks(self.cols)
            .map(|row| row.iter().zip(x).map(|(a, b)| a * b).sum())
            .collect()
    }

    /// The transpose, row-major.
    pub fn transposed(&self) -> Vec<f64> {
        (0..self.rows * self.cols)
            .map(|i| self.at(i % self.rows, i / self.rows))
            .collect()
    }
}

/// Largest |value| (0 for an empty slice).
pub fn max_abs(v: &[f64]) -> f64 {
    v.iter().fold(0.0f64, |m, x| m.max(x.abs()))
}

/// Euclidean norm in f64.
pub fn norm(v: &[f64]) -> f64 {
    v.iter().map(|x| x * x).sum::<f64>().sqrt()
}

/// `v * k` as f32 (program input data).
pub fn scaled_f32(v: &[f64], k: f64) -> Vec<f32> {
    v.iter().map(|x| (x * k) as f32).collect()
}

/// Error unless `v` has `n` finite entries.
pub fn check_vector(op: &str, what: &str, v: &[f64], n: usize) -> Result<()> {
    if v.len() != n {
        return Err(Error::shape(
            op,
            format!(
                "{what} must have {n} entries to match the matrix, got {}",
                v.len()
            ),
        ));
    }
    match v.iter().position(|x| !x.is_finite()) {
        Some(i) => Err(Error::value(
            op,
            format!("{what}[{i}] = {} is not finite", v[i]),
        )),
        None => Ok(()),
    }
}

/// Error unless 1 ≤ `iters` ≤ [`MAX_ITERS`].
pub fn check_iters(op: &str, iters: usize) -> Result<()> {
    if iters == 0 || iters > MAX_ITERS {
        return Err(Error::value(op, format!("iters must be in 1..={MAX_ITERS} (every iteration is unrolled into the program), got {iters}")));
    }
    Ok(())
}

/// Result of an iterative solve.
#[derive(Clone, Debug, PartialEq)]
pub struct Solution {
    /// The solution vector.
    pub x: Vec<f64>,
    /// ‖b − A·x‖ / ‖b‖ computed on the host in f64.
    pub residual: f64,
}

/// The relative residual ‖b − A·x‖ / ‖b‖ (‖b − A·x‖ when b = 0).
pub fn residual(a: &Matrix, b: &[f64], x: &[f64]) -> f64 {
    let r: Vec<f64> = a.matvec(x).iter().zip(b).map(|(ax, bi)| bi - ax).collect();
    let nb = norm(b);
    norm(&r) / if nb > 0.0 { nb } else { 1.0 }
}
