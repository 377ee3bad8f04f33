//! f32 GEMM with arbitrary strides over the `gemm` crate: a safe, bounds-checked wrapper used by
//! the matmul and conv kernels (f32 accumulation; the executor rounds to fp16 once afterwards).

use gemm::Parallelism;
use rayon::prelude::*;

/// Smallest m·n the crate multiplies on its blocked path whatever the strides.
const MIN_BLOCKED_OUTPUT: usize = 16 * 16 + 1;

/// Multiply-adds (m·n·k) from which one GEMM runs on the rayon pool.
pub const PAR_MIN_MACS: usize = 1 << 20;

/// C = A·B, or C += A·B when `accumulate`, with A[i,p] = a[i·a_rs + p·a_cs], B[p,j] = b[p·b_rs + j·b_cs]
/// and C[i,j] = c[i·c_rs + j] (m×k, k×n, m×n); panics if any index is out of bounds or rows of C overlap.
#[allow(clippy::too_many_arguments)]
pub fn sgemm(
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    a_rs: usize,
    a_cs: usize,
    b: &[f32],
    b_rs: usize,
    b_cs: usize,
    c: &mut [f32],
    c_rs: usize,
    accumulate: bool,
) {
    sgemm_with(
        true, m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, c_rs, accumulate,
    );
}

/// [`sgemm`], on the rayon pool above [`PAR_MIN_MACS`] only when `parallel` (callers that split
/// the work across threads themselves pass false); the thread count changes no bit.
#[allow(clippy::too_many_arguments)]
pub fn sgemm_with(
    parallel: bool,
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    a_rs: usize,
    a_cs: usize,
    b: &[f32],
    b_rs: usize,
    b_cs: usize,
    c: &mut [f32],
    c_rs: usize,
    accumulate: bool,
) {
    if m == 0 || n == 0 {
        return;
    }
    check_operand("C", m, n, c, c_rs, 1);
    assert!(
        m == 1 || c_rs >= n,
        "sgemm: C rows overlap (row stride {c_rs} < n = {n})"
    );
    if k == 0 {
        if !accumulate {
            c.chunks_mut(c_rs.max(n))
                .take(m)
                .for_each(|row| row[..n].fill(0.0));
        }
        return;
    }
    check_operand("A", m, k, a, a_rs, a_cs);
    check_operand("B", k, n, b, b_rs, b_cs);
    let par = if parallel && m.saturating_mul(n).saturating_mul(k) >= PAR_MIN_MACS {
        Parallelism::Rayon(rayon::current_num_threads())
    } else {
        Parallelism::None
    };
    // SAFETY: the asserts above keep every A, B and C element the kernel addresses inside its
    // slice; C rows are disjoint, and `c` is borrowed mutably so it aliases neither A nor B.
    unsafe {
        crate_gemm(
            par,
            m,
            n,
            k,
            c.as_mut_ptr(),
            c_rs,
            a.as_ptr(),
            a_rs,
            a_cs,
            b.as_ptr(),
            b_rs,
            b_cs,
            accumulate,
        )
    }
}

/// The `gemm` crate's C (+)= A·B over raw pointers (strides as in [`sgemm`]).
///
/// # Safety
/// Every element the strides address for m×k A, k×n B and m×n C must be in bounds, C's rows
/// disjoint, and C aliased by neither A nor B nor any concurrent writer of the same elements.
#[allow(clippy::too_many_arguments)]
unsafe fn crate_gemm(
    par: Parallelism,
    m: usize,
    n: usize,
    k: usize,
    c: *mut f32,
    c_rs: usize,
    a: *const f32,
    a_rs: usize,
    a_cs: usize,
    b: *const f32,
    b_rs: usize,
    b_cs: usize,
    accumulate: bool,
) {
    // Strides of unit axes are never applied; normalise them so every stride fits in isize
    // (a used stride times its extent is below a slice length, hence below isize::MAX).
    let st = |extent: usize, s: usize| if extent == 1 { 1 } else { s as isize };
    gemm::gemm(
        m,
        n,
        k,
        c,
        1,
        st(m, c_rs),
        accumulate,
        a,
        st(k, a_cs),
        st(m, a_rs),
        b,
        st(n, b_cs),
        st(k, b_rs),
        1.0f32,
        1.0f32,
        false,
        false,
        false,
        par,
    );
}

/// Column-block granularity of [`sgemm_cols`] (the crate's 16-lane microkernel covers 64
/// output columns of a row-major C per register tile).
const COL_BLOCK: usize = 64;

/// C's base pointer, shared by the column blocks of [`sgemm_cols`] (each writes only its own
/// columns).
#[derive(Clone, Copy)]
struct CPtr(*mut f32);
// SAFETY: the blocks sharing it write disjoint columns of C.
unsafe impl Send for CPtr {}
unsafe impl Sync for CPtr {}

/// [`sgemm`] for row-major A [m, k] and C [m, n] (written, not accumulated), with C's columns
/// cut into one block per pool thread above [`PAR_MIN_MACS`], each block a single-threaded crate
/// call that packs only its own columns of B (the crate's own split has every thread pack all
/// of B). Bit-identical to [`sgemm`]: on the crate's blocked path the per-element order depends
/// on k alone (ops/gemm_order.rs); blocks are formed only when each stays on that path and is
/// wider than 64 (the crate's small-size depth rule reads m and n), else [`sgemm`] runs.
#[allow(clippy::too_many_arguments)]
pub fn sgemm_cols(
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    b: &[f32],
    b_rs: usize,
    b_cs: usize,
    c: &mut [f32],
) {
    let threads = rayon::current_num_threads();
    let width = n.div_ceil(threads.max(1)).next_multiple_of(COL_BLOCK);
    let last = n - (n.max(1) - 1) / width * width;
    let split = threads > 1
        && width < n
        && last > COL_BLOCK
        && m >= 2
        && k >= 3
        && m * last >= MIN_BLOCKED_OUTPUT
        && m.saturating_mul(n).saturating_mul(k) >= PAR_MIN_MACS;
    if !split {
        return sgemm(m, n, k, a, k, 1, b, b_rs, b_cs, c, n, false);
    }
    check_operand("A", m, k, a, k, 1);
    check_operand("B", k, n, b, b_rs, b_cs);
    check_operand("C", m, n, c, n, 1);
    let cp = CPtr(c.as_mut_ptr());
    (0..n.div_ceil(width)).into_par_iter().for_each(|blk| {
        let j0 = blk * width;
        let w = width.min(n - j0);
        // SAFETY: the checks above keep every element of A, B and C in bounds; this block
        // writes only C's columns j0..j0 + w, which no other block touches, and `c` is
        // borrowed mutably for the whole call so it aliases neither A nor B.
        unsafe {
            crate_gemm(
                Parallelism::None,
                m,
                w,
                k,
                { cp }.0.add(j0),
                n,
                a.as_ptr(),
                k,
                1,
                b.as_ptr().add(j0 * b_cs),
                b_rs,
                b_cs,
                false,
            )
        }
    });
}

/// Panics unless the r×c matrix X[i, j] = x[i·rs + j·cs] lies inside `x` (empty fits).
fn check_operand(name: &str, r: usize, c: usize, x: &[f32], rs: usize, cs: usize) {
    if r == 0 || c == 0 {
        return;
    }
    let last = (r - 1)
        .checked_mul(rs)
        .and_then(|e| e.checked_add((c - 1).checked_mul(cs)?));
    assert!(
        matches!(last, Some(i) if i < x.len()),
        "sgemm: {name} {r}x{c} (strides {rs}, {cs}) exceeds {} elements",
        x.len()
    );
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Deterministic pseudo-random values in [-1, 1) (xorshift), for kernel tests.
    pub(crate) use crate::conformance::corpus::data as rand_vec;

    /// Assert `got` matches the f64 reference `want` elementwise within `tol` (relative to max(1, |want|)).
    pub(crate) fn assert_close(got: &[f32], want: &[f64], tol: f64) {
        assert_eq!(got.len(), want.len(), "length");
        for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
            assert!(
                (g as f64 - w).abs() <= tol * w.abs().max(1.0),
                "element {i}: got {g}, want {w}"
            );
        }
    }

    fn naive(
        m: usize,
        n: usize,
        k: usize,
        a: &[f32],
        a_st: (usize, usize),
        b: &[f32],
        b_st: (usize, usize),
    ) -> Vec<f64> {
        let mut c = vec![0.0f64; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k)
                    .map(|p| a[i * a_st.0 + p * a_st.1] as f64 * b[p * b_st.0 + j * b_st.1] as f64)
                    .sum();
            }
        }
        c
    }

    #[test]
    fn strided_and_transposed_operands_match_naive() {
        for &(m, n, k) in &[(1, 1, 1), (7, 1, 5), (1, 9, 3), (13, 11, 17), (64, 70, 300)] {
            let (a, b) = (rand_vec(m * k, 1), rand_vec(k * n, 2));
            // Row-major A, column-major ("transposed") B.
            let want = naive(m, n, k, &a, (k, 1), &b, (1, k));
            let mut c = vec![f32::NAN; m * n];
            sgemm(m, n, k, &a, k, 1, &b, 1, k, &mut c, n, false);
            assert_close(&c, &want, 1e-5);
            // Accumulate into a padded C (row stride n + 3).
            let mut cp = vec![1.0f32; m * (n + 3)];
            sgemm(m, n, k, &a, k, 1, &b, 1, k, &mut cp, n + 3, true);
            for i in 0..m {
                let want_row: Vec<f64> = want[i * n..(i + 1) * n].iter().map(|v| v + 1.0).collect();
                assert_close(&cp[i * (n + 3)..i * (n + 3) + n], &want_row, 1e-5);
                assert!(
                    cp[i * (n + 3) + n..(i + 1) * (n + 3)]
                        .iter()
                        .all(|&v| v == 1.0),
                    "padding untouched"
                );
            }
        }
    }

    #[test]
    fn large_product_uses_parallel_path_correctly() {
        let (m, n, k) = (128, 96, 256);
        let (a, b) = (rand_vec(m * k, 3), rand_vec(k * n, 4));
        let mut c = vec![0.0; m * n];
        sgemm(m, n, k, &a, 1, m, &b, n, 1, &mut c, n, false);
        assert_close(&c, &naive(m, n, k, &a, (1, m), &b, (n, 1)), 1e-4);
    }

    /// Column blocks give `sgemm`'s bits at 2 and 3 threads (MiniLM's q/k/v/o and FFN shapes
    /// with the weight stored [K, N] or read transposed from [N, K], a ragged last block, and
    /// shapes that fall back), and match the f64 product.
    #[test]
    fn column_blocks_are_bit_identical_to_one_call() {
        let shapes = [
            (128, 384, 384),
            (128, 1536, 384),
            (128, 384, 1536),
            (16, 1536, 384),
            (33, 1000, 77),
            (128, 130, 384),
            (3, 2000, 200),
        ];
        for threads in [2, 3] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            for (si, &(m, n, k)) in shapes.iter().enumerate() {
                let (a, b) = (
                    rand_vec(m * k, 7 * si as u64),
                    rand_vec(k * n, 7 * si as u64 + 1),
                );
                for (b_rs, b_cs) in [(n, 1), (1, k)] {
                    let mut want = vec![f32::NAN; m * n];
                    sgemm(m, n, k, &a, k, 1, &b, b_rs, b_cs, &mut want, n, false);
                    let mut got = vec![f32::NAN; m * n];
                    pool.install(|| sgemm_cols(m, n, k, &a, &b, b_rs, b_cs, &mut got));
                    let differ = got
                        .iter()
                        .zip(&want)
                        .filter(|(g, w)| g.to_bits() != w.to_bits())
                        .count();
                    assert_eq!(
                        differ, 0,
                        "({m}, {n}, {k}) B strides ({b_rs}, {b_cs}) at {threads} threads"
                    );
                    let exact = naive(m, n, k, &a, (k, 1), &b, (b_rs, b_cs));
                    assert_close(&got, &exact, 1e-4);
                }
            }
        }
    }

    #[test]
    #[should_panic(expected = "exceeds")]
    fn out_of_bounds_operand_panics() {
        let mut c = vec![0.0; 4];
        sgemm(2, 2, 3, &[0.0; 5], 3, 1, &[0.0; 6], 2, 1, &mut c, 2, false);
    }

    #[test]
    #[should_panic(expected = "overlap")]
    fn overlapping_rows_panic() {
        let mut c = vec![0.0; 4];
        sgemm(2, 2, 1, &[0.0; 2], 1, 1, &[0.0; 2], 2, 1, &mut c, 1, false);
    }
}
