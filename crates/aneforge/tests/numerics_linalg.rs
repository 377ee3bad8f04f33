//! af.linalg solvers on the reference executor, checked in f64 against matrices with known
//! spectra (A = H·diag(λ)·H with H a Householder reflection, so eigenvalues and condition are exact).

use aneforge::conformance::corpus::data;
use aneforge::numerics::linalg::direct::{cholesky, lu, qr};
use aneforge::numerics::linalg::eigen::{dominant_eig, dominant_svd, eigh, svd};
use aneforge::numerics::linalg::krylov::{conjugate_gradient, iterative_refine, jacobi};
use aneforge::numerics::linalg::lsq::{gmres, least_squares, lsqr};
use aneforge::numerics::linalg::Matrix;
use aneforge::{Device, Error};

const DEV: Device = Device::Reference;

/// Deterministic values in [-1, 1).
fn rand(len: usize, seed: u64) -> Vec<f64> {
    data(len, seed).into_iter().map(f64::from).collect()
}

/// H·diag(λ)·H with H = I − 2vvᵀ/vᵀv: symmetric, eigenvalues exactly λ.
fn with_spectrum(lambda: &[f64], seed: u64) -> Vec<f64> {
    let n = lambda.len();
    let v = rand(n, seed);
    let vv: f64 = v.iter().map(|x| x * x).sum();
    let h = |i: usize, j: usize| f64::from(u8::from(i == j)) - 2.0 * v[i] * v[j] / vv;
    (0..n * n)
        .map(|k| (0..n).map(|l| h(k / n, l) * lambda[l] * h(l, k % n)).sum())
        .collect()
}

/// Eigenvalues log-spaced from 1 to `cond`.
fn spectrum(n: usize, cond: f64) -> Vec<f64> {
    (0..n)
        .map(|i| cond.powf(i as f64 / (n - 1) as f64))
        .collect()
}

fn matmul(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    (0..m * n)
        .map(|i| (0..k).map(|l| a[(i / n) * k + l] * b[l * n + i % n]).sum())
        .collect()
}

fn max_diff(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

#[test]
fn cg_reaches_the_documented_residual_on_spd_systems() {
    for &(n, cond) in &[(16usize, 10.0), (32, 100.0), (64, 100.0)] {
        let a = with_spectrum(&spectrum(n, cond), n as u64);
        let am = Matrix::new("test", n, n, &a).unwrap();
        let b = rand(n, 99);
        let plain = conjugate_gradient(&am, &b, n, None, 0, DEV).unwrap();
        let refined = conjugate_gradient(&am, &b, n, None, 2, DEV).unwrap();
        eprintln!(
            "cg n={n} cond={cond}: residual {:e}, refined {:e}",
            plain.residual, refined.residual
        );
        assert!(
            plain.residual < 1e-2,
            "n={n} cond={cond}: {:e}",
            plain.residual
        );
        assert!(
            refined.residual < 1e-4,
            "n={n} cond={cond}: {:e}",
            refined.residual
        );
    }
}

#[test]
fn jacobi_and_refinement_solve_diagonally_dominant_systems() {
    let n = 24;
    let mut a = rand(n * n, 5);
    for i in 0..n {
        a[i * n + i] = 2.0 * n as f64;
    }
    let am = Matrix::new("test", n, n, &a).unwrap();
    let b = rand(n, 6);
    let j = jacobi(&am, &b, 40, None, DEV).unwrap();
    assert!(j.residual < 5e-3, "jacobi {:e}", j.residual);
    let spd = with_spectrum(&spectrum(n, 10.0), 3);
    let sm = Matrix::new("test", n, n, &spd).unwrap();
    let r = iterative_refine(&sm, &b, None, 4, 60, DEV).unwrap();
    let one = iterative_refine(&sm, &b, None, 1, 60, DEV).unwrap();
    eprintln!(
        "jacobi {:e}, refine x1 {:e}, x4 {:e}",
        j.residual, one.residual, r.residual
    );
    assert!(
        r.residual < one.residual / 10.0 && r.residual < 1e-3,
        "refine {:e} vs {:e}",
        r.residual,
        one.residual
    );
}

#[test]
fn qr_and_cholesky_reconstruct_their_input() {
    let (m, n) = (40, 12);
    let a = rand(m * n, 8);
    let (q, r) = qr(&Matrix::new("test", m, n, &a).unwrap(), DEV).unwrap();
    let qt: Vec<f64> = (0..n * m).map(|i| q[(i % m) * n + i / m]).collect();
    let eye: Vec<f64> = (0..n * n)
        .map(|i| f64::from(u8::from(i / n == i % n)))
        .collect();
    let ortho = max_diff(&matmul(&qt, &q, n, m, n), &eye);
    let recon = max_diff(&matmul(&q, &r, m, n, n), &a);
    assert!(
        ortho < 1e-2 && recon < 5e-3,
        "QᵀQ − I {ortho:e}, QR − A {recon:e}"
    );
    assert!(
        (0..n).all(|i| (0..i).all(|j| r[i * n + j] == 0.0)),
        "R must be upper triangular"
    );

    let n = 20;
    let spd = with_spectrum(&spectrum(n, 50.0), 4);
    let l = cholesky(&Matrix::new("test", n, n, &spd).unwrap(), DEV).unwrap();
    let lt: Vec<f64> = (0..n * n).map(|i| l[(i % n) * n + i / n]).collect();
    let err = max_diff(&matmul(&l, &lt, n, n, n), &spd) / 50.0;
    assert!(err < 2e-3, "L·Lᵀ − A relative {err:e}");
}

#[test]
fn lu_reconstructs_a_diagonally_dominant_matrix() {
    let n = 20;
    let mut a = rand(n * n, 21);
    (0..n).for_each(|i| a[i * n + i] += n as f64);
    let (l, u) = lu(&Matrix::new("test", n, n, &a).unwrap(), DEV).unwrap();
    let err = max_diff(&matmul(&l, &u, n, n, n), &a) / n as f64;
    assert!(err < 2e-3, "LU − A relative {err:e}");
    assert!((0..n)
        .all(|i| l[i * n + i] == 1.0
            && (i + 1..n).all(|j| l[i * n + j] == 0.0 && u[j * n + i] == 0.0)));
}

#[test]
fn least_squares_lsqr_and_gmres() {
    let (m, n) = (60, 16);
    let a = rand(m * n, 31);
    let am = Matrix::new("test", m, n, &a).unwrap();
    let b = rand(m, 32);
    let at: Vec<f64> = (0..n * m).map(|i| a[(i % m) * n + i / m]).collect();
    let atm = Matrix::new("test", n, m, &at).unwrap();
    let fro = a.iter().map(|v| v * v).sum::<f64>().sqrt();
    let nrm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
    let x_true = rand(n, 34);
    let consistent = am.matvec(&x_true);
    for (name, solve) in [
        ("cgls", least_squares as fn(_, _, _, _, _, _) -> _),
        ("lsqr", lsqr),
    ] {
        // Optimality of an inconsistent system: Aᵀ(b − A·x) = 0, relative to ‖A‖_F·‖b‖.
        let s = solve(&am, &b, n, None, 2, DEV).unwrap();
        let r: Vec<f64> = am
            .matvec(&s.x)
            .iter()
            .zip(&b)
            .map(|(ax, bi)| bi - ax)
            .collect();
        let opt = nrm(&atm.matvec(&r)) / (fro * nrm(&b));
        assert!(opt < 1e-3, "{name}: ‖Aᵀr‖/(‖A‖‖b‖) = {opt:e}");
        // A consistent system refines to its exact solution.
        let s = solve(&am, &consistent, n, None, 3, DEV).unwrap();
        let err = max_diff(&s.x, &x_true);
        assert!(
            err < 1e-5 && s.residual < 1e-5,
            "{name}: consistent error {err:e}"
        );
    }
    let n = 32;
    let mut sq = rand(n * n, 33);
    (0..n).for_each(|i| sq[i * n + i] += 6.0);
    let sm = Matrix::new("test", n, n, &sq).unwrap();
    let one = gmres(&sm, &b[..n], n, 1, None, DEV).unwrap();
    let three = gmres(&sm, &b[..n], n, 3, None, DEV).unwrap();
    assert!(
        one.residual < 2e-2 && three.residual < 1e-5,
        "gmres {:e} / {:e}",
        one.residual,
        three.residual
    );
}

#[test]
fn eigh_and_svd_recover_a_known_spectrum() {
    let n = 12;
    let lambda: Vec<f64> = (0..n).map(|i| -3.0 + 0.7 * i as f64).collect();
    let a = with_spectrum(&lambda, 41);
    let am = Matrix::new("test", n, n, &a).unwrap();
    let (w, v) = eigh(&am, 6, DEV).unwrap();
    let err = max_diff(&w, &lambda) / 4.7;
    assert!(err < 3e-3, "eigenvalues {w:?}: {err:e}");
    let av = matmul(&a, &v, n, n, n);
    let vl: Vec<f64> = (0..n * n).map(|i| v[i] * w[i % n]).collect();
    assert!(max_diff(&av, &vl) / 4.7 < 1e-2);
    let (u, s, vt) = svd(&am, 6, DEV).unwrap();
    let mut want: Vec<f64> = lambda.iter().map(|l| l.abs()).collect();
    want.sort_by(|x, y| y.total_cmp(x));
    assert!(
        max_diff(&s[..8], &want[..8]) / 4.7 < 3e-3,
        "σ {s:?} vs {want:?}"
    );
    let us: Vec<f64> = (0..n * n).map(|i| u[i] * s[i % n]).collect();
    assert!(max_diff(&matmul(&us, &vt, n, n, n), &a) / 4.7 < 1e-2);
}

#[test]
fn power_iteration_finds_the_dominant_pair() {
    let n = 16;
    let mut lambda = spectrum(n, 4.0);
    lambda[n - 1] = 300.0; // beyond fp16's comfortable range without normalisation
    let a = with_spectrum(&lambda, 12);
    let am = Matrix::new("test", n, n, &a).unwrap();
    let (l, v) = dominant_eig(&am, 30, DEV).unwrap();
    assert!((l - 300.0).abs() / 300.0 < 2e-3, "λ = {l}");
    let av = am.matvec(&v);
    assert!(max_diff(&av, &v.iter().map(|x| x * l).collect::<Vec<_>>()) / 300.0 < 5e-3);
    let (s, _, _) = dominant_svd(&am, 30, DEV).unwrap();
    assert!((s - 300.0).abs() / 300.0 < 2e-3, "σ = {s}");
}

#[test]
fn bad_matrices_are_typed_errors() {
    let ns = [1.0, 2.0, 0.0, 1.0];
    let m = Matrix::new("test", 2, 2, &ns).unwrap();
    let e = conjugate_gradient(&m, &[1.0, 1.0], 4, None, 0, DEV).unwrap_err();
    assert!(
        matches!(e, Error::Value { .. }) && e.to_string().contains("symmetric"),
        "{e}"
    );
    let e = cholesky(
        &Matrix::new("test", 2, 2, &[1.0, 2.0, 2.0, 1.0]).unwrap(),
        DEV,
    )
    .unwrap_err();
    assert!(
        matches!(e, Error::Value { .. }) && e.to_string().contains("positive definite"),
        "{e}"
    );
    let e = Matrix::new("test", 2, 3, &[1.0; 5]).unwrap_err();
    assert!(e.to_string().contains("6 values"), "{e}");
    let e = jacobi(
        &Matrix::new("test", 2, 3, &[1.0; 6]).unwrap(),
        &[1.0, 1.0],
        3,
        None,
        DEV,
    )
    .unwrap_err();
    assert!(
        matches!(e, Error::Shape { .. }) && e.to_string().contains("square"),
        "{e}"
    );
    let e = conjugate_gradient(
        &Matrix::new("test", 2, 2, &[2.0, 0.0, 0.0, 2.0]).unwrap(),
        &[1.0],
        3,
        None,
        0,
        DEV,
    )
    .unwrap_err();
    assert!(e.to_string().contains("b must have 2 entries"), "{e}");
    let e = conjugate_gradient(
        &Matrix::new("test", 1, 1, &[2.0]).unwrap(),
        &[1.0],
        5000,
        None,
        0,
        DEV,
    )
    .unwrap_err();
    assert!(e.to_string().contains("5000"), "{e}");
    let e = qr(&Matrix::new("test", 2, 3, &[1.0; 6]).unwrap(), DEV).unwrap_err();
    assert!(e.to_string().contains("rows >= columns"), "{e}");
}
