"""af.linalg against NumPy / SciPy float64 on the reference executor, over sizes and condition numbers."""

import aneforge as af
import numpy as np
import pytest
import scipy.linalg

DEV = "reference"


def _spd(n, cond, seed):
    """Q diag(logspace(0, log10 cond)) Q^T with Q from scipy's QR of a Gaussian matrix."""
    rng = np.random.default_rng(seed)
    q, _ = scipy.linalg.qr(rng.standard_normal((n, n)))
    return q @ np.diag(np.logspace(0, np.log10(cond), n)) @ q.T


def _rel_res(a, x, b):
    return np.linalg.norm(b - a @ x) / np.linalg.norm(b)


@pytest.mark.parametrize("n,cond", [(8, 2.0), (16, 10.0), (48, 100.0), (96, 100.0)])
def test_cg_reaches_documented_residuals(n, cond):
    a, b = _spd(n, cond, n), np.random.default_rng(1).standard_normal(n)
    x, res = af.linalg.conjugate_gradient(a, b, iters=n, device=DEV, return_residual=True)
    assert res == pytest.approx(_rel_res(a, x, b)) and res < 5e-2
    xr = af.linalg.conjugate_gradient(a, b, iters=n, refine=2, device=DEV)
    assert _rel_res(a, xr, b) < 1e-4
    assert np.linalg.norm(xr - scipy.linalg.solve(a, b, assume_a="pos")) / np.linalg.norm(xr) < cond * 1e-4


def test_jacobi_refine_and_x0():
    n = 32
    rng = np.random.default_rng(3)
    a = rng.uniform(-1, 1, (n, n)) + np.eye(n) * 2 * n
    b = rng.standard_normal(n)
    want = scipy.linalg.solve(a, b)
    x = af.linalg.jacobi(a, b, iters=40, device=DEV)
    assert np.linalg.norm(x - want) / np.linalg.norm(want) < 5e-3
    spd = _spd(n, 10.0, 4)
    one = af.linalg.iterative_refine(spd, b, iters=1, device=DEV)
    four = af.linalg.iterative_refine(spd, b, iters=4, device=DEV)
    assert _rel_res(spd, four, b) < min(1e-3, _rel_res(spd, one, b) / 10)
    exact = scipy.linalg.solve(spd, b)
    warm = af.linalg.conjugate_gradient(spd, b, iters=2, x0=exact, device=DEV)
    assert _rel_res(spd, warm, b) < 1e-2


@pytest.mark.parametrize("m,n", [(8, 8), (50, 16), (120, 24)])
def test_qr_matches_scipy(m, n):
    a = np.random.default_rng(m).standard_normal((m, n))
    q, r = af.linalg.qr(a, device=DEV)
    q0, r0 = scipy.linalg.qr(a, mode="economic")
    s = np.sign(np.diag(r0))  # scipy's column signs vs MGS's positive diagonal
    assert np.abs(r - s[:, None] * r0).max() / np.abs(r0).max() < 5e-3
    assert np.abs(q - q0 * s).max() < 2e-2
    assert np.abs(q.T @ q - np.eye(n)).max() < 2e-2


@pytest.mark.parametrize("n,cond", [(8, 10.0), (32, 100.0)])
def test_cholesky_matches_numpy(n, cond):
    a = _spd(n, cond, n + 7)
    l = af.linalg.cholesky(a, device=DEV)
    assert np.abs(l - np.linalg.cholesky(a)).max() / np.abs(a).max() < cond * 2e-4


def test_power_iteration_vs_eigh_and_svd():
    rng = np.random.default_rng(8)
    a = _spd(24, 5.0, 9)
    a += 400.0 * np.outer(*(2 * [rng.standard_normal(24) / 5]))
    w, v = np.linalg.eigh(a)
    lam, vec = af.linalg.dominant_eig(a, iters=40, device=DEV)
    assert abs(lam - w[-1]) / w[-1] < 2e-3
    assert abs(abs(vec @ v[:, -1]) - 1) < 2e-3
    m = rng.standard_normal((30, 20)) + 3.0
    s, u, vt = af.linalg.dominant_svd(m, iters=40, device=DEV)
    u0, s0, vt0 = np.linalg.svd(m)
    assert abs(s - s0[0]) / s0[0] < 2e-3 and abs(abs(u @ u0[:, 0]) - 1) < 2e-3 and abs(abs(vt @ vt0[0]) - 1) < 2e-3


def test_lu_least_squares_gmres():
    rng = np.random.default_rng(11)
    a = rng.uniform(-1, 1, (20, 20)) + 20 * np.eye(20)
    l, u = af.linalg.lu(a, device=DEV)
    p, l0, u0 = scipy.linalg.lu(a)
    assert np.allclose(p, np.eye(20))  # diagonally dominant: scipy pivots nothing either
    assert np.abs(l - l0).max() < 2e-3 and np.abs(u - u0).max() / np.abs(u0).max() < 2e-3
    m = rng.standard_normal((80, 12))
    b = rng.standard_normal(80)
    want = scipy.linalg.lstsq(m, b)[0]
    for fn in (af.linalg.least_squares, af.linalg.lsqr):
        x = fn(m, b, device=DEV)
        assert np.linalg.norm(x - want) / np.linalg.norm(want) < 5e-3, fn.__name__
    g = rng.standard_normal((24, 24)) + 5 * np.eye(24)
    x, res = af.linalg.gmres(g, b[:24], restarts=3, device=DEV, return_residual=True)
    assert res < 1e-5 and np.linalg.norm(x - scipy.linalg.solve(g, b[:24])) / np.linalg.norm(x) < 1e-4


# Every Jacobi rotation rounds A to fp16, so the eigenvalue error grows with the rotation count (~n^2 per sweep).
@pytest.mark.parametrize("n,tol", [(6, 3e-3), (16, 1e-2), (32, 1e-2)])
def test_eigh_svd_pca_vs_numpy(n, tol):
    rng = np.random.default_rng(n)
    a = rng.standard_normal((n, n))
    a = a + a.T
    w, v = af.linalg.eigh(a, device=DEV)
    w0 = np.linalg.eigvalsh(a)
    scale = np.abs(w0).max()
    assert np.abs(w - w0).max() / scale < tol
    assert np.abs(a @ v - v * w).max() / scale < 3 * tol
    m = rng.standard_normal((2 * n, n))
    u, s, vt = af.linalg.svd(m, device=DEV)
    s0 = np.linalg.svd(m, compute_uv=False)
    assert np.abs(s - s0).max() / s0[0] < tol
    assert np.abs((u * s) @ vt - m).max() / np.abs(m).max() < 10 * tol
    x = rng.standard_normal((200, n)) @ np.diag(np.linspace(3, 0.5, n))
    comps, var = af.linalg.pca(x, 2, device=DEV)
    xc = x - x.mean(0)
    _, s1, vt1 = np.linalg.svd(xc, full_matrices=False)
    assert np.abs(var - s1[:2] ** 2 / 199).max() / var[0] < tol
    assert np.all(np.abs(np.abs(np.sum(comps * vt1[:2], axis=1)) - 1) < 1e-2)


def test_plans_compile_once():
    a, b = _spd(12, 10.0, 2), np.ones(12)
    af.linalg.conjugate_gradient(a, b, iters=7, device=DEV)
    before = af.linalg.compile_count()
    for k in range(3):
        af.linalg.conjugate_gradient(a * (k + 1), b, iters=7, refine=1, device=DEV)
    assert af.linalg.compile_count() == before
    af.linalg.conjugate_gradient(a, b, iters=8, device=DEV)
    assert af.linalg.compile_count() == before + 1


def test_bad_input():
    with pytest.raises(ValueError, match="symmetric"):
        af.linalg.conjugate_gradient(np.triu(np.ones((3, 3))) + np.eye(3), np.ones(3), device=DEV)
    with pytest.raises(ValueError, match="positive definite"):
        af.linalg.cholesky(np.array([[1.0, 2.0], [2.0, 1.0]]), device=DEV)
    with pytest.raises(ValueError, match="square"):
        af.linalg.jacobi(np.ones((2, 3)), np.ones(2), device=DEV)
    with pytest.raises(ValueError, match="2 dimension"):
        af.linalg.qr(np.ones(4), device=DEV)
    with pytest.raises(ValueError, match="4096"):
        af.linalg.dominant_eig(np.ones((5000, 1)), device=DEV)
    with pytest.raises(ValueError, match="48"):
        af.linalg.eigh(np.eye(60), device=DEV)
    with pytest.raises(ValueError, match="singular|broke down"):
        af.linalg.lu(np.array([[0.0, 1.0], [1.0, 0.0]]), device=DEV)
    with pytest.raises(ValueError, match="unknown method"):
        af.linalg._core.linalg_least_squares(np.eye(2), np.ones(2), 2, None, 0, "qr", device=DEV)
    with pytest.raises(ValueError, match="not finite"):
        af.linalg.conjugate_gradient(np.eye(2), np.array([1.0, np.nan]), device=DEV)


def test_precision_risk_and_rewrite():
    x = af.input((2, 4096))
    y = x.sum(1, keepdims=False)
    risk = af.precision_risk(y)
    assert (
        risk["hotspots"][0]["k"] == 4096 and risk["hotspots"][0]["fixable"] and "2048" in risk["hotspots"][0]["reason"]
    )
    assert risk["graph_error"] == pytest.approx(1e-3 * 64)
    fixed = af.reduce_sum_to_matmul(y)
    assert af.precision_risk(fixed)["hotspots"] == []
    # fp16 running sum (the ANE's reduce_sum accumulator) of 4096 ones stalls at 2048; the matmul form is exact.
    acc = np.float16(0)
    for _ in range(4096):
        acc = np.float16(acc + np.float16(1))
    assert acc == 2048
    out = af.compile(fixed, device=DEV)(np.ones((2, 4096), np.float32))
    np.testing.assert_array_equal(out, [4096, 4096])
    pair = af.reduce_sum_to_matmul({"s": y, "m": x.mean(1)})
    assert set(pair) == {"s", "m"}
