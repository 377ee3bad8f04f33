//! f32 GEMM over operands in panel layout, for weights packed once at load instead of per call.
//! The lhs A (m×k) is cut into panels of `MR` rows stored [p][MR] (depth-major), the rhs B
//! (k×n) into panels of `NR` columns stored [p][NR], both zero-padded at the edge; a weight is
//! packed once ([`PackedLhs`] for conv, [`PackedRhs`] for matmul) and the other operand per call
//! into a reused scratch. Every output element follows the `gemm` crate's sequence
//! (`gemm_order`), so a product gives the bits of the same `sgemm` call; the kernel runs only
//! where that sequence is known ([`depth_block`]: the crate's blocked path with a fused
//! multiply-add microkernel, and AVX2+FMA here), and callers fall back to `sgemm` otherwise.

use std::cell::RefCell;

use rayon::prelude::*;

use super::gemm::{check_operand, PAR_MIN_MACS};
use super::gemm_avx2::{self as avx2, MR, NR};
use super::gemm_order;

thread_local! {
    /// The operand packed per call (grown to the largest, then reused).
    static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// The depth block with which the packed kernel reproduces `sgemm` for C (m×n, depth k) on
/// this CPU, or `None` when it does not run (callers use `sgemm`).
pub fn depth_block(m: usize, n: usize, k: usize) -> Option<usize> {
    if !avx2::available() || !gemm_order::blocked_path(m, n, k) {
        return None;
    }
    gemm_order::depth_block(m, n, k)
}

/// Write A (m×k, A[i, p] = a[i·rs + p·cs]) as MR-row panels into `out` (length
/// [`lhs_len`]; panel padding zeroed). Panics if A exceeds `a`.
fn pack_lhs(m: usize, k: usize, a: &[f32], rs: usize, cs: usize, out: &mut [f32]) {
    check_operand("A", m, k, a, rs, cs);
    for (ib, panel) in out.chunks_exact_mut(k * MR).enumerate() {
        for (p, step) in panel.chunks_exact_mut(MR).enumerate() {
            for (r, v) in step.iter_mut().enumerate() {
                let i = ib * MR + r;
                *v = if i < m { a[i * rs + p * cs] } else { 0.0 };
            }
        }
    }
}

/// Write B (k×n, B[p, j] = b[p·rs + j·cs]) as NR-column panels into `out` (length
/// [`rhs_len`]; panel padding zeroed). Panics if B exceeds `b`.
fn pack_rhs(k: usize, n: usize, b: &[f32], rs: usize, cs: usize, out: &mut [f32]) {
    check_operand("B", k, n, b, rs, cs);
    for (jb, panel) in out.chunks_exact_mut(k * NR).enumerate() {
        let (j0, w) = (jb * NR, NR.min(n - jb * NR));
        for (p, step) in panel.chunks_exact_mut(NR).enumerate() {
            if cs == 1 {
                step[..w].copy_from_slice(&b[p * rs + j0..p * rs + j0 + w]);
            } else {
                for (c, v) in step[..w].iter_mut().enumerate() {
                    *v = b[p * rs + (j0 + c) * cs];
                }
            }
            step[w..].fill(0.0);
        }
    }
}

/// Length of m×k packed as lhs panels.
fn lhs_len(m: usize, k: usize) -> usize {
    m.div_ceil(MR) * MR * k
}

/// Length of k×n packed as rhs panels.
fn rhs_len(k: usize, n: usize) -> usize {
    n.div_ceil(NR) * NR * k
}

/// A lhs operand (m×k) packed once.
#[derive(Clone, Debug)]
pub struct PackedLhs {
    m: usize,
    k: usize,
    data: Vec<f32>,
}

impl PackedLhs {
    /// Pack A (m×k, A[i, p] = a[i·rs + p·cs]); panics if A exceeds `a`.
    pub fn new(m: usize, k: usize, a: &[f32], rs: usize, cs: usize) -> PackedLhs {
        let mut data = vec![0.0; lhs_len(m, k)];
        pack_lhs(m, k, a, rs, cs, &mut data);
        PackedLhs { m, k, data }
    }

    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        4 * self.data.len() as u64
    }

    /// C (m×n, row stride `c_rs`) = A·B, or += when `accumulate`, with B[p, j] = b[p·rs + j·cs],
    /// depth block `kc` from [`depth_block`]`(m, n, k)`; on the rayon pool when `parallel` and
    /// large. Panics if B or C exceed their slices.
    #[allow(clippy::too_many_arguments)]
    pub fn gemm(
        &self,
        kc: usize,
        parallel: bool,
        n: usize,
        b: &[f32],
        rs: usize,
        cs: usize,
        c: &mut [f32],
        c_rs: usize,
        accumulate: bool,
    ) {
        let (m, k) = (self.m, self.k);
        SCRATCH.with_borrow_mut(|s| {
            grow(s, rhs_len(k, n));
            let rhs = &mut s[..rhs_len(k, n)];
            pack_rhs(k, n, b, rs, cs, rhs);
            let shape = Shape { m, n, k, kc };
            run(shape, &self.data, rhs, c, c_rs, accumulate, parallel);
        })
    }
}

/// A rhs operand (k×n) packed once.
#[derive(Clone, Debug)]
pub struct PackedRhs {
    k: usize,
    n: usize,
    data: Vec<f32>,
}

impl PackedRhs {
    /// Pack B (k×n, B[p, j] = b[p·rs + j·cs]); panics if B exceeds `b`.
    pub fn new(k: usize, n: usize, b: &[f32], rs: usize, cs: usize) -> PackedRhs {
        let mut data = vec![0.0; rhs_len(k, n)];
        pack_rhs(k, n, b, rs, cs, &mut data);
        PackedRhs { k, n, data }
    }

    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        4 * self.data.len() as u64
    }

    /// C (m×n, row stride `c_rs`) = A·B (+= when `accumulate`) with A[i, p] = a[i·rs + p·cs],
    /// depth block `kc` from [`depth_block`]`(m, n, k)`; on the rayon pool when `parallel` and
    /// large. Panics if A or C exceed their slices.
    #[allow(clippy::too_many_arguments)]
    pub fn gemm(
        &self,
        kc: usize,
        parallel: bool,
        m: usize,
        a: &[f32],
        rs: usize,
        cs: usize,
        c: &mut [f32],
        c_rs: usize,
        accumulate: bool,
    ) {
        let (k, n) = (self.k, self.n);
        SCRATCH.with_borrow_mut(|s| {
            grow(s, lhs_len(m, k));
            let lhs = &mut s[..lhs_len(m, k)];
            pack_lhs(m, k, a, rs, cs, lhs);
            let shape = Shape { m, n, k, kc };
            run(shape, lhs, &self.data, c, c_rs, accumulate, parallel);
        })
    }
}

/// Grow `v` to at least `len` elements.
fn grow(v: &mut Vec<f32>, len: usize) {
    if v.len() < len {
        v.resize(len, 0.0);
    }
}

/// Product extents and depth block.
#[derive(Clone, Copy)]
struct Shape {
    m: usize,
    n: usize,
    k: usize,
    kc: usize,
}

/// C pointer shared by threads that write disjoint column ranges.
#[derive(Clone, Copy)]
struct Dst(*mut f32);
// SAFETY: threads given a `Dst` write disjoint elements (distinct column panels).
unsafe impl Send for Dst {}
unsafe impl Sync for Dst {}

/// C (+)= A·B over packed panels: column panels split across the rayon pool when `parallel`
/// and the product is large (each element is computed whole by one thread: no bit depends on
/// the split). Panics if C exceeds `c` or its rows overlap.
fn run(
    s: Shape,
    lhs: &[f32],
    rhs: &[f32],
    c: &mut [f32],
    c_rs: usize,
    accumulate: bool,
    parallel: bool,
) {
    assert!(lhs.len() >= lhs_len(s.m, s.k) && rhs.len() >= rhs_len(s.k, s.n));
    assert!(s.m >= 1 && s.n >= 1 && s.kc >= 1);
    assert!(s.m == 1 || c_rs >= s.n, "packed gemm: C rows overlap");
    assert!(
        (s.m - 1)
            .checked_mul(c_rs)
            .and_then(|e| e.checked_add(s.n))
            .is_some_and(|e| e <= c.len()),
        "packed gemm: C exceeds its slice"
    );
    let panels = s.n.div_ceil(NR);
    let dst = Dst(c.as_mut_ptr());
    // SAFETY: the asserts above keep every tile inside `c`; panel ranges are disjoint.
    let cols = |range: std::ops::Range<usize>| unsafe {
        panel_range(s, lhs, rhs, dst, c_rs, accumulate, range)
    };
    let threads = rayon::current_num_threads();
    if parallel && threads > 1 && s.m * s.n * s.k >= PAR_MIN_MACS && panels > 1 {
        let chunks = panels.min(threads * 4);
        (0..chunks)
            .into_par_iter()
            .for_each(|t| cols(panels * t / chunks..panels * (t + 1) / chunks));
    } else {
        cols(0..panels);
    }
}

/// Column panels `range` of C, depth block by depth block.
///
/// # Safety
/// AVX2+FMA are available; C (m×n, row stride c_rs) lies inside the allocation at `dst`, which
/// no one else accesses in these columns.
unsafe fn panel_range(
    s: Shape,
    lhs: &[f32],
    rhs: &[f32],
    dst: Dst,
    c_rs: usize,
    accumulate: bool,
    range: std::ops::Range<usize>,
) {
    #[cfg(target_arch = "x86_64")]
    for jb in range {
        let cols = NR.min(s.n - jb * NR);
        let mut p0 = 0;
        while p0 < s.k {
            let kb = s.kc.min(s.k - p0);
            let overwrite = p0 == 0 && !accumulate;
            let b = rhs.as_ptr().add(jb * s.k * NR + p0 * NR);
            for ib in 0..s.m.div_ceil(MR) {
                let a = lhs.as_ptr().add(ib * s.k * MR + p0 * MR);
                let rows = MR.min(s.m - ib * MR);
                let c = dst.0.add(ib * MR * c_rs + jb * NR);
                avx2::tile(kb, a, b, c, c_rs, rows, cols, overwrite);
            }
            p0 += kb;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (s, lhs, rhs, dst, c_rs, accumulate, range);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::gemm::sgemm;
    use crate::ops::gemm::tests::rand_vec;

    /// Both packed forms give every bit of `sgemm` on conv-like (weight lhs, columns rhs) and
    /// matmul-like (x lhs, weight rhs stored [K, N] or [N, K]) products: edges that are not
    /// multiples of the tile, depth past one block, accumulation, one and two threads.
    #[test]
    fn packed_products_match_sgemm_bit_for_bit() {
        if !avx2::available() || gemm_order::crate_tile().is_none() {
            return;
        }
        for (si, &(m, n, k)) in [
            (64, 400, 576),
            (70, 49, 1100),
            (40, 60, 600),
            (128, 384, 384),
            (13, 1536, 390),
            (2, 129, 3),
            (300, 5, 700),
        ]
        .iter()
        .enumerate()
        {
            let kc = depth_block(m, n, k).unwrap();
            let seed = 20 * si as u64;
            let (a, b) = (rand_vec(m * k, seed + 1), rand_vec(k * n, seed + 2));
            let bias = rand_vec(m * n, seed + 3);
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            for accumulate in [false, true] {
                for (b_rs, b_cs) in [(n, 1), (1, k)] {
                    let mut want = bias.clone();
                    sgemm(m, n, k, &a, k, 1, &b, b_rs, b_cs, &mut want, n, accumulate);
                    for threads in [1, 2] {
                        let pool = rayon::ThreadPoolBuilder::new()
                            .num_threads(threads)
                            .build()
                            .unwrap();
                        let mut got = bias.clone();
                        let lhs = PackedLhs::new(m, k, &a, k, 1);
                        pool.install(|| {
                            lhs.gemm(kc, true, n, &b, b_rs, b_cs, &mut got, n, accumulate)
                        });
                        assert_eq!(bits(&got), bits(&want), "lhs ({m}, {n}, {k}) {threads}");
                        let mut got = bias.clone();
                        let rhs = PackedRhs::new(k, n, &b, b_rs, b_cs);
                        pool.install(|| rhs.gemm(kc, true, m, &a, k, 1, &mut got, n, accumulate));
                        assert_eq!(bits(&got), bits(&want), "rhs ({m}, {n}, {k}) {threads}");
                    }
                }
            }
        }
    }

    /// Throughput against `sgemm` on ResNet and MiniLM products, one thread (a benchmark, not
    /// a test: run with `--ignored --nocapture` in release).
    #[test]
    #[ignore]
    fn throughput_against_sgemm() {
        for &(m, n, k) in &[
            (64, 3136, 576),
            (128, 784, 1152),
            (256, 196, 2304),
            (512, 49, 4608),
            (256, 3136, 64),
            (128, 384, 384),
            (128, 1536, 384),
            (128, 384, 1536),
        ] {
            let Some(kc) = depth_block(m, n, k) else {
                return;
            };
            let (a, b) = (rand_vec(m * k, 1), rand_vec(k * n, 2));
            let mut c = vec![0.0; m * n];
            let lhs = PackedLhs::new(m, k, &a, k, 1);
            // Median over 9 rounds of the process CPU time of 5 calls, in µs.
            let time = |f: &mut dyn FnMut()| {
                let mut t: Vec<f64> = (0..9)
                    .map(|_| {
                        let t = crate::exec::clock::process_cpu_us().unwrap();
                        for _ in 0..5 {
                            f();
                        }
                        crate::exec::clock::process_cpu_us().unwrap() - t
                    })
                    .collect();
                t.sort_by(f64::total_cmp);
                t[4]
            };
            let crate_t = time(&mut || {
                crate::ops::gemm::sgemm_with(false, m, n, k, &a, k, 1, &b, n, 1, &mut c, n, false)
            });
            let packed_t = time(&mut || lhs.gemm(kc, false, n, &b, n, 1, &mut c, n, false));
            let gmacs = |t: f64| (m * n * k) as f64 * 5.0 / t / 1e3;
            println!(
                "| ({m}, {n}, {k}) | {kc} | {:.3} ms ({:.1} GMAC/s) | {:.3} ms ({:.1} GMAC/s) | {:.2}× |",
                crate_t / 5000.0,
                gmacs(crate_t),
                packed_t / 5000.0,
                gmacs(packed_t),
                packed_t / crate_t
            );
        }
    }
}
