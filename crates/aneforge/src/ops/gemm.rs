//! f32 GEMM with arbitrary strides over the `gemm` crate: a safe, bounds-checked wrapper used by
//! the matmul and conv kernels (f32 accumulation; the executor rounds to fp16 once afterwards).

use gemm::Parallelism;

/// Multiply-adds (m·n·k) from which one GEMM runs on the rayon pool.
pub const PAR_MIN_MACS: usize = 1 << 20;

/// Right-operand widths (in microkernel columns) up to which the crate reads a unit-stride left
/// operand in place on one thread rather than packing it per call (its default is 8). Ours are
/// shared weights in column blocks, which packing would copy from memory on every call
/// (`ops::weight_blocks`), and conv inputs / im2col panels, which measured as fast
/// or faster unpacked (ResNet-18/50). Packing moves values, not arithmetic: no bit changes.
const LHS_IN_PLACE_COLUMNS: usize = 256;

/// Set the crate's packing threshold (see [`LHS_IN_PLACE_COLUMNS`]) once per process.
fn read_left_operands_in_place() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        gemm_common::gemm::set_lhs_packing_threshold_single_thread(LHS_IN_PLACE_COLUMNS)
    });
}

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
    // SAFETY: `c` is borrowed mutably, so it is valid for its length and nothing else
    // accesses it (nor aliases A or B) during the call.
    unsafe {
        sgemm_raw(
            parallel,
            m,
            n,
            k,
            a,
            a_rs,
            a_cs,
            b,
            b_rs,
            b_cs,
            (c.as_mut_ptr(), c.len()),
            c_rs,
            accumulate,
        )
    }
}

/// [`sgemm_with`] with C given as (pointer, length), for callers whose threads write disjoint
/// column blocks of one matrix in place (conv tiles); same checks, same bits.
///
/// # Safety
/// `c.0` is valid for reads and writes of `c.1` f32, and while the call runs nothing else
/// reads or writes the elements C[i, j] = c[i·c_rs + j] (i < m, j < n), nor do A or B alias them.
#[allow(clippy::too_many_arguments)]
pub unsafe fn sgemm_raw(
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
    c: (*mut f32, usize),
    c_rs: usize,
    accumulate: bool,
) {
    if m == 0 || n == 0 {
        return;
    }
    check_operand("C", m, n, c.1, c_rs, 1);
    assert!(
        m == 1 || c_rs >= n,
        "sgemm: C rows overlap (row stride {c_rs} < n = {n})"
    );
    if k == 0 {
        if !accumulate {
            for i in 0..m {
                // SAFETY: C[i, 0..n] lies inside `c` (checked above) and is the caller's alone.
                unsafe { std::slice::from_raw_parts_mut(c.0.add(i * c_rs), n) }.fill(0.0);
            }
        }
        return;
    }
    check_operand("A", m, k, a.len(), a_rs, a_cs);
    check_operand("B", k, n, b.len(), b_rs, b_cs);
    read_left_operands_in_place();
    // Strides of unit axes are never applied; normalise them so every stride fits in isize
    // (a used stride times its extent is below a slice length, hence below isize::MAX).
    let st = |extent: usize, s: usize| if extent == 1 { 1 } else { s as isize };
    let par = if parallel && m.saturating_mul(n).saturating_mul(k) >= PAR_MIN_MACS {
        Parallelism::Rayon(rayon::current_num_threads())
    } else {
        Parallelism::None
    };
    // SAFETY: the asserts above keep every A, B and C element the kernel addresses inside its
    // slice; C rows are disjoint, and the caller keeps C's elements from every other access.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c.0,
            1,
            st(m, c_rs),
            accumulate,
            a.as_ptr(),
            st(k, a_cs),
            st(m, a_rs),
            b.as_ptr(),
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
}

/// Panics unless the r×c matrix X[i, j] = x[i·rs + j·cs] lies inside `len` elements (empty fits).
pub(crate) fn check_operand(name: &str, r: usize, c: usize, len: usize, rs: usize, cs: usize) {
    if r == 0 || c == 0 {
        return;
    }
    let last = (r - 1)
        .checked_mul(rs)
        .and_then(|e| e.checked_add((c - 1).checked_mul(cs)?));
    assert!(
        matches!(last, Some(i) if i < len),
        "sgemm: {name} {r}x{c} (strides {rs}, {cs}) exceeds {len} elements"
    );
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Deterministic pseudo-random values in [-1, 1) (xorshift), for kernel tests.
    pub(crate) use crate::conformance::corpus::data as rand_vec;

    /// `f` on a rayon pool of `threads` threads (for the thread-count bit tests).
    pub(crate) fn on_threads<R: Send>(threads: usize, f: impl FnOnce() -> R + Send) -> R {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads);
        pool.build().unwrap().install(f)
    }

    /// Rayon pools of 1 to `max` threads, built once so that tests can keep them across cases
    /// (each thread's scratch then goes from geometry to geometry).
    pub(crate) fn pools(max: usize) -> Vec<rayon::ThreadPool> {
        let pool = |t| rayon::ThreadPoolBuilder::new().num_threads(t).build();
        (1..=max).map(|t| pool(t).unwrap()).collect()
    }

    /// Median over 9 rounds of the process CPU time of `calls` calls of `f`, in µs per call
    /// (for the `#[ignore]` throughput benchmarks; nothing asserts it).
    pub(crate) fn median_cpu_us(calls: usize, f: &mut dyn FnMut()) -> f64 {
        let mut t: Vec<f64> = (0..9)
            .map(|_| {
                let t = crate::exec::clock::process_cpu_us().unwrap();
                (0..calls).for_each(|_| f());
                (crate::exec::clock::process_cpu_us().unwrap() - t) / calls as f64
            })
            .collect();
        t.sort_by(f64::total_cmp);
        t[4]
    }

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
