//! f32 GEMM C = A·B with the weight B (k×n) packed once into panels of [`NR`] columns
//! (`[n/NR][k][NR]`, zero-padded at the edge) and A read in place: no operand is packed per
//! call. Every output element follows the `gemm` crate's sequence (`gemm_order`), so a product
//! gives the bits of the same `sgemm` call; the kernel runs only where that sequence is known
//! and the crate's kernel is not faster ([`depth_block`]), and callers use `sgemm` otherwise.
//! A last panel of at most 8 columns runs several 6-row strips at once (`gemm_avx2::narrow_at`,
//! `gemm_avx2_column::column_at` for one column), the same chain per element. On AVX-512 CPUs
//! every tile is `gemm_avx512`'s (8 rows × 2 panels in 16-lane registers).

use rayon::prelude::*;

use super::conv_gemm::SyncPtr;
use super::gemm::{check_operand, PAR_MIN_MACS};
use super::gemm_avx2::{self as avx2, MR, NARROW_ROWS, NR};
use super::gemm_avx2_column::{self as column, COLUMN_ROWS};
use super::gemm_avx512 as avx512;
use super::gemm_order;

/// Panels per column block: the block's panels (≤ 512 × 128 f32, 256 KiB) stay in L2 while
/// the kernel sweeps them with one strip of A rows in L1.
pub(crate) const BLOCK_PANELS: usize = 8;

/// The depth block with which [`gemm`] reproduces `sgemm` for C (m×n, depth k) on this CPU, or
/// `None` when it does not run here (callers use `sgemm`).
pub fn depth_block(m: usize, n: usize, k: usize) -> Option<usize> {
    let here = avx2::available() || (avx2::usable() && beats_avx512(m, n, k));
    if !here || !gemm_order::blocked_path(m, n, k) {
        return None;
    }
    gemm_order::depth_block(m, n, k)
}

/// [`depth_block`] extended on AVX-512 CPUs to every blocked-path product, which
/// `gemm_avx512`'s tile runs faster than the crate where the caller's B is packed once or
/// written into panels anyway: a matmul's shared weight (`throughput_against_sgemm`), an
/// im2col'd conv product (`conv_gemm::tests::throughput_per_conv`).
pub fn depth_block_wide(m: usize, n: usize, k: usize) -> Option<usize> {
    match avx512::available() && gemm_order::blocked_path(m, n, k) {
        true => gemm_order::depth_block(m, n, k),
        false => depth_block(m, n, k),
    }
}

/// Most multiply-adds (m·n·k) and columns (n) of a product the kernel takes from the crate
/// on AVX-512 CPUs: there the crate's packing per call costs more than its 16-lane kernel
/// gains on MobileNetV3's pointwise convs at 14×14 and 7×7 (n = 196, 49; at most 2.7 M
/// multiply-adds), while wider products (its 56×56 and 28×28 ones, the stem's im2col tiles)
/// and ResNet's (6.4 M and up) are as fast or faster on the crate (`throughput_per_conv`,
/// per-op profiles in process pairs; h-mnet7).
const AVX512_MAX_MACS: usize = 1 << 22;
/// See [`AVX512_MAX_MACS`].
const AVX512_MAX_COLS: usize = 256;

/// Whether the kernel beats the crate's AVX-512 one on C (m×n, depth k): see
/// [`AVX512_MAX_MACS`].
fn beats_avx512(m: usize, n: usize, k: usize) -> bool {
    n <= AVX512_MAX_COLS && m * n * k <= AVX512_MAX_MACS
}

/// Length of k×n packed as panels.
pub fn panels_len(k: usize, n: usize) -> usize {
    n.div_ceil(NR) * NR * k
}

/// Position of B[p, j] in the panels of a depth-k operand.
pub fn panel_index(k: usize, p: usize, j: usize) -> usize {
    (j / NR) * k * NR + p * NR + j % NR
}

/// C (m×n, C[i, j] = c[i·c_rs + j]) = A·B with A[i, p] = a[i·a_rs + p] and B packed in
/// `panels`, depth block `kc` from [`depth_block`]`(m, n, k)`; column blocks on the rayon pool
/// when `parallel` and large (each element is computed whole by one thread: no bit depends on
/// the split). Panics if an operand exceeds its slice or rows of C overlap.
#[allow(clippy::too_many_arguments)]
pub fn gemm(
    kc: usize,
    parallel: bool,
    dims: (usize, usize, usize),
    a: &[f32],
    a_rs: usize,
    panels: &[f32],
    c: &mut [f32],
    c_rs: usize,
) {
    // SAFETY: `c` is borrowed mutably, so its elements are ours alone.
    unsafe {
        gemm_raw(
            kc,
            parallel,
            dims,
            (a, a_rs),
            panels,
            (c.as_mut_ptr(), c.len()),
            c_rs,
            false,
        )
    }
}

/// [`gemm`] into C given as (pointer, length), C (+)= A·B: `accumulate` adds the product to C
/// (C = C + acc after the first depth block too, as `sgemm` accumulating).
///
/// # Safety
/// `c` points to `c.1` writable f32 of which no addressed element is accessed by anyone else
/// during the call.
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm_raw(
    kc: usize,
    parallel: bool,
    (m, n, k): (usize, usize, usize),
    (a, a_rs): (&[f32], usize),
    panels: &[f32],
    c: (*mut f32, usize),
    c_rs: usize,
    accumulate: bool,
) {
    if m == 0 || n == 0 {
        return;
    }
    assert!(kc >= 1 && k >= 1, "packed gemm: depth {k}, block {kc}");
    check_operand("A", m, k, a.len(), a_rs, 1);
    check_operand("C", m, n, c.1, c_rs, 1);
    assert!(m == 1 || c_rs >= n, "packed gemm: C rows overlap");
    assert!(panels.len() >= panels_len(k, n), "packed gemm: B panels");
    assert!(avx2::usable(), "packed gemm: no AVX2+FMA");
    let count = n.div_ceil(NR);
    let threads = rayon::current_num_threads();
    let large = parallel && threads > 1 && m * n * k >= PAR_MIN_MACS;
    let mut blocks = count.div_ceil(BLOCK_PANELS);
    if large {
        blocks = blocks.max((2 * threads).min(count));
    }
    let dst = SyncPtr(c.0);
    let zmm = avx512::available();
    let block = |t: usize| {
        let range = count * t / blocks..count * (t + 1) / blocks;
        let mut p0 = 0;
        while p0 < k {
            let kb = kc.min(k - p0);
            if zmm {
                // C's columns up to this block's end: a tile takes a second panel only inside it.
                let n_block = n.min(range.end * NR);
                for i0 in (0..m).step_by(avx512::MR) {
                    let mut jb = range.start;
                    while jb < range.end {
                        // SAFETY: AVX-512F detected; the checks above keep the A rows, the
                        // panels and the C tile inside their slices; blocks write disjoint
                        // columns.
                        jb += unsafe {
                            let b = (panels.as_ptr().add(jb * k * NR + p0 * NR), k * NR);
                            let (a, c) = ((a.as_ptr(), a_rs), (dst.get(), c_rs));
                            avx512::tile_at((p0, kb), (i0, jb), (m, n_block), a, b, c, accumulate)
                        };
                    }
                }
                p0 += kb;
                continue;
            }
            for i0 in (0..m).step_by(MR) {
                for jb in range.clone() {
                    // SAFETY: the CPU has AVX2+FMA (asserted); the checks above keep the A rows,
                    // the panel and the C tile inside their slices; blocks write disjoint columns.
                    unsafe {
                        let b = (panels.as_ptr().add(jb * k * NR + p0 * NR), NR);
                        let (a, c) = ((a.as_ptr(), a_rs), (dst.get(), c_rs));
                        panel_call((p0, kb), (i0, jb), (m, n), a, b, c, accumulate)
                    };
                }
            }
            p0 += kb;
        }
    };
    if large && blocks > 1 {
        (0..blocks).into_par_iter().for_each(block);
    } else {
        (0..blocks).for_each(block);
    }
}

/// The kernel call for panel `jb` of C (m×n) at strip row `i0` ([`avx2::tile_at`]'s
/// arguments): a last panel of one column runs [`COLUMN_ROWS`] rows at once (lanes over rows),
/// one of ≤ NR / 2 columns [`NARROW_ROWS`], others one 6-row strip; a row inside a group
/// already run from its first strip is skipped. Each element gets the tile's chain.
///
/// # Safety
/// As [`avx2::tile_at`], for every row of C from `i0` that the call runs.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn panel_call(
    depth: (usize, usize),
    (i0, jb): (usize, usize),
    (m, n): (usize, usize),
    a: (*const f32, usize),
    b: (*const f32, usize),
    c: (*mut f32, usize),
    accumulate: bool,
) {
    let cols = n - jb * NR;
    let rows_at_once = match cols {
        1 => COLUMN_ROWS,
        _ if cols <= NR / 2 => NARROW_ROWS,
        _ => MR,
    };
    if i0 % rows_at_once != 0 {
        return;
    }
    // SAFETY: the caller's contract.
    unsafe {
        match rows_at_once {
            COLUMN_ROWS => column::column_at(depth, (i0, jb * NR), m, a, b, c, accumulate),
            NARROW_ROWS => avx2::narrow_at(depth, (i0, jb), (m, n), a, b, c, accumulate),
            _ => avx2::tile_at(depth, (i0, jb), (m, n), a, b, c, accumulate),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::gemm::sgemm;
    use crate::ops::gemm::tests::{median_cpu_us, on_threads, rand_vec};

    /// B (k×n) with B[p, j] = `b(p, j)` packed as panels (padding zero).
    fn pack(k: usize, n: usize, b: impl Fn(usize, usize) -> f32) -> Vec<f32> {
        let mut out = vec![0f32; panels_len(k, n)];
        for p in 0..k {
            for j in 0..n {
                out[panel_index(k, p, j)] = b(p, j);
            }
        }
        out
    }

    /// The packed product gives every bit of `sgemm` (B stored [K, N] or read transposed from
    /// [N, K]): edges that are not multiples of the tile, depth past one block (balanced and
    /// small-size blocking), 1, 2 and 3 threads, A with a padded row stride.
    #[test]
    fn packed_products_match_sgemm_bit_for_bit() {
        let shapes = [
            (128, 384, 384),
            (128, 1536, 384),
            (77, 384, 1536),
            (13, 1536, 390),
            (40, 60, 1100),
            (2, 129, 3),
            (13, 49, 1100),
            (512, 49, 700),
            (7, 17, 9),
            (300, 5, 700),
            (64, 3136, 64),
        ];
        for (si, &(m, n, k)) in shapes.iter().enumerate() {
            let Some(kc) = depth_block_wide(m, n, k) else {
                return;
            };
            let seed = 20 * si as u64;
            let a_rs = k + 3;
            let (a, b) = (rand_vec(m * a_rs, seed + 1), rand_vec(k * n, seed + 2));
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            for (b_rs, b_cs) in [(n, 1), (1, k)] {
                let mut want = vec![0f32; m * n];
                sgemm(m, n, k, &a, a_rs, 1, &b, b_rs, b_cs, &mut want, n, false);
                let panels = pack(k, n, |p, j| b[p * b_rs + j * b_cs]);
                for threads in [1, 2, 3] {
                    let mut got = vec![f32::NAN; m * n];
                    on_threads(threads, || {
                        gemm(kc, true, (m, n, k), &a, a_rs, &panels, &mut got, n)
                    });
                    assert_eq!(bits(&got), bits(&want), "({m}, {n}, {k}) {threads} threads");
                }
            }
        }
    }

    /// Operands that do not fit their slices panic before any access.
    #[test]
    #[should_panic(expected = "exceeds")]
    fn short_operand_panics() {
        let panels = pack(300, 300, |_, _| 1.0);
        let mut c = vec![0f32; 300 * 300];
        gemm(
            300,
            false,
            (300, 300, 300),
            &[0.0; 10],
            300,
            &panels,
            &mut c,
            300,
        );
    }

    /// Throughput against `sgemm` on MiniLM products (B the weight, packed once), one thread (a
    /// benchmark, not a test: run with `--ignored --nocapture` in release).
    #[test]
    #[ignore]
    fn throughput_against_sgemm() {
        for &(m, n, k) in &[
            (128, 384, 384),
            (128, 1536, 384),
            (128, 384, 1536),
            (256, 384, 384),
        ] {
            let Some(kc) = depth_block_wide(m, n, k) else {
                return;
            };
            let (a, w) = (rand_vec(m * k, 1), rand_vec(n * k, 2));
            let mut c = vec![0.0; m * n];
            let wt = pack(k, n, |p, j| w[p * n + j]);
            let time = |f: &mut dyn FnMut()| median_cpu_us(20, f);
            let crate_t = time(&mut || {
                crate::ops::gemm::sgemm_with(false, m, n, k, &a, k, 1, &w, n, 1, &mut c, n, false)
            });
            let packed_t = time(&mut || gemm(kc, false, (m, n, k), &a, k, &wt, &mut c, n));
            let gmacs = |t: f64| (m * n * k) as f64 / t / 1e3;
            println!(
                "| ({m}, {n}, {k}) | {kc} | {crate_t:.0} µs ({:.1} GMAC/s) | {packed_t:.0} µs ({:.1} GMAC/s) | {:.2}× |",
                gmacs(crate_t),
                gmacs(packed_t),
                packed_t / crate_t
            );
        }
    }
}
