"""Linear algebra run as compiled aneforge programs: iterative solvers with every iteration
unrolled into one program, small-n direct factorizations and power iteration.

Matrices are NumPy arrays (converted to float64); each function compiles one program per
(function, shape, iteration count, device), cached process-wide (``compile_count()`` counts
actual compiles), and scales its inputs on the host so the device sees values of magnitude
<= 1 (fp16 range). Dot products run as matmuls with a ones vector (wide accumulation), never
as fp16 ``reduce_sum``. Host steps (scaling, residuals for refinement) run in float64.
Every function takes the compile options as keywords (``device=...``; see
``aneforge.CompileOptions``); options other than the device raise NotImplementedError.
Documented accuracy: see docs/numerics-accuracy.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from aneforge import _core
from aneforge._core import numerics_compile_count as compile_count

__all__ = [
    "cholesky",
    "compile_count",
    "conjugate_gradient",
    "dominant_eig",
    "dominant_svd",
    "eigh",
    "gmres",
    "iterative_refine",
    "jacobi",
    "least_squares",
    "lsqr",
    "lu",
    "pca",
    "qr",
    "svd",
]


def conjugate_gradient(
    A: npt.ArrayLike,
    b: npt.ArrayLike,
    iters: int = 20,
    x0: npt.ArrayLike | None = None,
    refine: int = 0,
    return_residual: bool = False,
    **options: Any,
) -> np.ndarray | tuple[np.ndarray, float]:
    """Solve ``A x = b`` for symmetric positive definite ``A`` by ``iters`` unrolled CG steps
    on the symmetrically Jacobi-scaled system, plus ``refine`` rounds that re-solve for the
    float64 residual. With ``return_residual`` also returns ``||b - A x|| / ||b||``.
    Raises ValueError for non-square, non-symmetric or non-positive-diagonal ``A``."""
    x, res = _core.linalg_conjugate_gradient(A, b, iters, x0, refine, **options)
    return (x, res) if return_residual else x


def jacobi(
    A: npt.ArrayLike,
    b: npt.ArrayLike,
    iters: int = 60,
    x0: npt.ArrayLike | None = None,
    return_residual: bool = False,
    **options: Any,
) -> np.ndarray | tuple[np.ndarray, float]:
    """Solve ``A x = b`` by ``iters`` unrolled Jacobi sweeps (converges for strictly diagonally
    dominant ``A``); ``return_residual`` as in :func:`conjugate_gradient`."""
    x, res = _core.linalg_jacobi(A, b, iters, x0, **options)
    return (x, res) if return_residual else x


def iterative_refine(
    A: npt.ArrayLike,
    b: npt.ArrayLike,
    x0: npt.ArrayLike | None = None,
    iters: int = 3,
    inner: int = 60,
    return_residual: bool = False,
    **options: Any,
) -> np.ndarray | tuple[np.ndarray, float]:
    """Mixed-precision refinement: ``iters`` rounds of a float64 host residual and an
    on-device Richardson solve (``inner`` unrolled steps, omega = 1 / max row sum of |A|);
    converges for symmetric positive definite ``A``."""
    x, res = _core.linalg_iterative_refine(A, b, x0, iters, inner, **options)
    return (x, res) if return_residual else x


def qr(A: npt.ArrayLike, **options: Any) -> tuple[np.ndarray, np.ndarray]:
    """Thin QR of an m x n matrix (m >= n) by modified Gram-Schmidt: ``(Q [m, n], R [n, n])``
    (``numpy.linalg.qr`` reduced mode up to column signs: here diag(R) > 0)."""
    return _core.linalg_qr(A, **options)


def cholesky(A: npt.ArrayLike, **options: Any) -> np.ndarray:
    """Lower-triangular ``L`` with ``A = L @ L.T`` (``numpy.linalg.cholesky``); ValueError if
    ``A`` is not symmetric positive definite."""
    return _core.linalg_cholesky(A, **options)


def dominant_eig(A: npt.ArrayLike, iters: int = 50, **options: Any) -> tuple[float, np.ndarray]:
    """Dominant eigenpair ``(lambda, v)`` of a square matrix by power iteration with
    normalisation after every product (``||v|| = 1``)."""
    return _core.linalg_dominant_eig(A, iters, **options)


def dominant_svd(A: npt.ArrayLike, iters: int = 50, **options: Any) -> tuple[float, np.ndarray, np.ndarray]:
    """Largest singular triplet ``(sigma, u, v)`` by power iteration alternating A and A.T."""
    return _core.linalg_dominant_svd(A, iters, **options)


def lu(A: npt.ArrayLike, **options: Any) -> tuple[np.ndarray, np.ndarray]:
    """Doolittle LU without pivoting: ``(L, U)`` with unit-diagonal ``L`` and ``A = L @ U``
    (stable for diagonally dominant or SPD ``A``; a zero pivot raises ValueError)."""
    return _core.linalg_lu(A, **options)


def _least_squares(method, A, b, iters, x0, refine, return_residual, options):
    """The body of :func:`least_squares` and :func:`lsqr`: ``method`` is "cgls" or "lsqr",
    ``iters`` defaults to 2n."""
    a = np.asarray(A)
    x, res = _core.linalg_least_squares(a, b, iters or 2 * a.shape[-1], x0, refine, method, **options)
    return (x, res) if return_residual else x


def least_squares(
    A: npt.ArrayLike,
    b: npt.ArrayLike,
    iters: int | None = None,
    x0: npt.ArrayLike | None = None,
    refine: int = 2,
    return_residual: bool = False,
    **options: Any,
) -> np.ndarray | tuple[np.ndarray, float]:
    """``argmin ||A x - b||`` for an m x n ``A`` by CGLS (``iters`` unrolled steps, default 2n,
    plus ``refine`` float64-residual rounds); accuracy follows cond(A)**2 (fp16 CGLS needs more
    than n steps once cond(A) reaches ~100, see docs/numerics-accuracy.md)."""
    return _least_squares("cgls", A, b, iters, x0, refine, return_residual, options)


def lsqr(
    A: npt.ArrayLike,
    b: npt.ArrayLike,
    iters: int | None = None,
    x0: npt.ArrayLike | None = None,
    refine: int = 2,
    return_residual: bool = False,
    **options: Any,
) -> np.ndarray | tuple[np.ndarray, float]:
    """``argmin ||A x - b||`` by LSQR (Golub-Kahan bidiagonalisation), as :func:`least_squares`."""
    return _least_squares("lsqr", A, b, iters, x0, refine, return_residual, options)


def gmres(
    A: npt.ArrayLike,
    b: npt.ArrayLike,
    m: int | None = None,
    restarts: int = 1,
    x0: npt.ArrayLike | None = None,
    return_residual: bool = False,
    **options: Any,
) -> np.ndarray | tuple[np.ndarray, float]:
    """Solve square ``A x = b`` by ``restarts`` GMRES(m) cycles (default m = n): Arnoldi on the
    device, the small Hessenberg least-squares problem on the host in float64."""
    a = np.asarray(A)
    x, res = _core.linalg_gmres(a, b, m or a.shape[-1], restarts, x0, **options)
    return (x, res) if return_residual else x


def eigh(A: npt.ArrayLike, sweeps: int = 6, **options: Any) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (ascending) and eigenvectors (columns) of a symmetric matrix of order <= 48 by
    ``sweeps`` unrolled cyclic Jacobi sweeps (``numpy.linalg.eigh`` conventions)."""
    return _core.linalg_eigh(A, sweeps, **options)


def svd(A: npt.ArrayLike, sweeps: int = 6, **options: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Thin SVD ``(U, s, Vt)`` of an m x n matrix (m >= n, n <= 48) through the Gram matrix and
    :func:`eigh`; small singular values (below ~3e-2 * s[0]) lose relative accuracy."""
    return _core.linalg_svd(A, sweeps, **options)


def pca(X: npt.ArrayLike, k: int, sweeps: int = 6, **options: Any) -> tuple[np.ndarray, np.ndarray]:
    """Top ``k`` principal components of the rows of ``X`` (samples x features) as rows, and
    their explained variances (the data are centred on the host, then :func:`svd`)."""
    return _core.linalg_pca(X, k, sweeps, **options)
