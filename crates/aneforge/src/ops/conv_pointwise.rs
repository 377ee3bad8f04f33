//! The product of a pointwise conv (1×1 kernel, stride 1, no padding) on the packed GEMM's AVX2
//! microkernel with its input read in place: out [Cout, n] (+)= weight [Cout, K] · x [K, n],
//! where x's rows are the input's channel planes (row stride = the plane size). A 16-column
//! panel of B is a run of 16 columns of every plane, so nothing is packed per call except the
//! last n mod 16 columns (copied into one zero-padded panel, the kernel's loads must not pass
//! the end of the input). The kernel is `gemm_avx2::tile`, so every element is the `gemm`
//! crate's chain (`gemm_order`) with the depth block the caller passes: the bits of `sgemm`.
//!
//! Loop order (`gemm_packed`'s): depth blocks (in order, so C = acc then C = C + acc as the
//! crate), then blocks of [`BLOCK_PANELS`] panels, then 6-row strips of the weight (each read
//! once per block: with few columns, as at 7×7, a big weight is streamed once), then panels.

use std::cell::RefCell;

use super::conv_gemm::{with_scratch, SyncPtr};
use super::gemm::check_operand;
use super::gemm_avx2::{self as avx2, MR, NR};
use super::gemm_packed::{self, BLOCK_PANELS};
use crate::error::Result;

/// Deepest product read in place: deeper ones lose to panels copied once (the in-place rows,
/// P floats apart and often split across cache lines, cost more per multiply-add than the copy;
/// ResNet-50's K = 512…2048 at 7×7 to 28×28, BENCHMARKS.md h-pw round 14).
const MAX_DEPTH: usize = 256;

/// Most output channels read in place: every 6-row strip of the weight re-reads the in-place
/// rows, so a tall weight is faster on a copy (MobileNetV3's 40→240 and 48→288 at 14×14 on
/// panels, ResNet-50's 128→512 at 28×28 on the crate; BENCHMARKS.md h-pw round 14).
const MAX_ROWS: usize = 192;

/// Whether a pointwise product (m output channels, depth k) is multiplied with its input read
/// in place ([`run`]) rather than copied into panels or packed by the `gemm` crate.
pub(crate) fn in_place(m: usize, k: usize) -> bool {
    k <= MAX_DEPTH && m <= MAX_ROWS
}

thread_local! {
    /// The zero-padded panel of the last n mod NR columns (every element read is written).
    static TAIL: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// C (m×n, C[i, j] at `c.0[i·c_rs + j]`) (+)= A·B with A[i, p] = `a[i·k + p]` and
/// B[p, j] = `x[p·x_rs + j]`, depth block `kc` (from `gemm_packed::depth_block(m, n, k)`):
/// `accumulate` adds to C (which holds the bias), as `sgemm` accumulating. Panics if an operand
/// exceeds its slice, C's rows overlap or the CPU lacks AVX2+FMA.
///
/// # Safety
/// `c` points to `c.1` writable f32 of which no addressed element is accessed by anyone else
/// during the call.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn run(
    kc: usize,
    (m, n, k): (usize, usize, usize),
    a: &[f32],
    (x, x_rs): (&[f32], usize),
    c: (*mut f32, usize),
    c_rs: usize,
    accumulate: bool,
) -> Result<()> {
    if m == 0 || n == 0 {
        return Ok(());
    }
    assert!(kc >= 1 && k >= 1, "pointwise conv: depth {k}, block {kc}");
    check_operand("A", m, k, a.len(), k, 1);
    check_operand("B", k, n, x.len(), x_rs, 1);
    check_operand("C", m, n, c.1, c_rs, 1);
    assert!(m == 1 || c_rs >= n, "pointwise conv: C rows overlap");
    assert!(avx2::usable(), "pointwise conv: no AVX2+FMA");
    let (full, tail) = (n / NR, n % NR);
    let tail_len = if tail > 0 { k * NR } else { 0 };
    with_scratch(&TAIL, tail_len, "the pointwise tail panel", |panel| {
        for (p, row) in panel.chunks_exact_mut(NR).enumerate() {
            let src = &x[p * x_rs + full * NR..p * x_rs + n];
            row[..tail].copy_from_slice(src);
            row[tail..].fill(0.0);
        }
        let dst = SyncPtr(c.0);
        let count = n.div_ceil(NR);
        let mut p0 = 0;
        while p0 < k {
            let kb = kc.min(k - p0);
            for first in (0..count).step_by(BLOCK_PANELS) {
                for i0 in (0..m).step_by(MR) {
                    for jb in first..(first + BLOCK_PANELS).min(count) {
                        // SAFETY: the CPU has AVX2+FMA (asserted). A's rows i0.. hold kb values
                        // from p0 (checked above). A full panel reads NR values from column
                        // jb·NR ≤ n − NR of rows p0..p0 + kb < k of B (checked above); the
                        // tail reads its own k·NR panel. C's tile lies inside C (checked) and
                        // is ours alone (the caller's contract).
                        unsafe {
                            let b = match jb < full {
                                true => (x.as_ptr().add(p0 * x_rs + jb * NR), x_rs),
                                false => (panel.as_ptr().add(p0 * NR), NR),
                            };
                            let (a, c) = ((a.as_ptr(), k), (dst.get(), c_rs));
                            gemm_packed::panel_call((p0, kb), (i0, jb), (m, n), a, b, c, accumulate)
                        };
                    }
                }
            }
            p0 += kb;
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::gemm::sgemm;
    use crate::ops::gemm::tests::rand_vec;
    use crate::ops::gemm_order;

    /// `run` on weight [m, k] × planes [k, n] (x row stride `x_rs` ≥ n, C row stride `c_rs`
    /// ≥ n, both offset by `skew` columns as a tile of a wider output is) with depth block `kc`.
    #[allow(clippy::too_many_arguments)]
    fn pointwise(
        kc: usize,
        (m, n, k): (usize, usize, usize),
        a: &[f32],
        x: &[f32],
        (x_rs, c_rs, skew): (usize, usize, usize),
        c: &mut [f32],
        accumulate: bool,
    ) {
        let (x, c) = (&x[skew..], &mut c[skew..]);
        // SAFETY: `c` is borrowed mutably.
        unsafe {
            run(
                kc,
                (m, n, k),
                a,
                (x, x_rs),
                (c.as_mut_ptr(), c.len()),
                c_rs,
                accumulate,
            )
        }
        .unwrap();
    }

    /// Bits of a slice.
    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|f| f.to_bits()).collect()
    }

    /// Every MobileNetV3-small pointwise product (Cout, K, H·W) and odd ones (K = 1, 3, 17;
    /// n = 1, 7, 49, 50, 3136; Cout = 1, 5, 576) give the bits of the `gemm` crate's
    /// per-element order: `sgemm` where `gemm_order` knows the crate's depth block (the
    /// products a conv may send here), else the scalar model of that order (`gemm_order`) with
    /// the depth block the product would have or a short one (several depth blocks); C with
    /// and without a bias to accumulate onto; planes and C wider than the tile (a column tile
    /// of a wider output) and exactly as wide. Fails if a column, a row or a depth step of a
    /// tile is dropped, reordered or read from the wrong plane.
    #[test]
    fn pointwise_products_match_the_crate_bit_for_bit() {
        if !avx2::usable() {
            return;
        }
        let mobilenet = [
            (16, 16, 3136),
            (72, 16, 3136),
            (24, 72, 784),
            (88, 24, 784),
            (24, 88, 784),
            (96, 24, 784),
            (40, 96, 196),
            (240, 40, 196),
            (40, 240, 196),
            (120, 40, 196),
            (48, 120, 196),
            (144, 48, 196),
            (48, 144, 196),
            (288, 48, 196),
            (96, 288, 49),
            (576, 96, 49),
            (96, 576, 49),
        ];
        let odd = [
            (1, 17, 50),
            (5, 1, 3136),
            (5, 3, 7),
            (576, 17, 1),
            (7, 3, 49),
            (5, 17, 50),
            (576, 3, 7),
            (64, 1024, 196),
            (13, 600, 17),
        ];
        let mut via_sgemm = 0;
        for (si, &(m, k, n)) in mobilenet.iter().chain(&odd).enumerate() {
            let seed = 30 * si as u64;
            let a = rand_vec(m * k, seed + 1);
            for (x_rs, c_rs, skew) in [(n, n, 0), (n + 21, n + 5, 3)] {
                let x = rand_vec(skew + (k - 1) * x_rs + n, seed + 2);
                let bias = rand_vec(skew + (m - 1) * c_rs + n, seed + 3);
                // The crate's order, whether or not this CPU sends the product here.
                let known = gemm_order::blocked_path(m, n, k)
                    .then(|| gemm_order::depth_block(m, n, k))
                    .flatten();
                let blocks = match known {
                    Some(kc) => vec![kc],
                    None => vec![k.min(512), 5],
                };
                for kc in blocks {
                    for accumulate in [false, true] {
                        let mut want = bias.clone();
                        let (xs, cs) = (&x[skew..], &mut want[skew..]);
                        if known.is_some() {
                            sgemm(m, n, k, &a, k, 1, xs, x_rs, 1, cs, c_rs, accumulate);
                            via_sgemm += 1;
                        } else {
                            let (ar, br) = (|i, p| a[i * k + p], |p, j| xs[p * x_rs + j]);
                            gemm_order::reference(m, n, k, kc, ar, br, cs, c_rs, accumulate);
                        }
                        let mut got = bias.clone();
                        let dims = (x_rs, c_rs, skew);
                        pointwise(kc, (m, n, k), &a, &x, dims, &mut got, accumulate);
                        assert_eq!(
                            bits(&got),
                            bits(&want),
                            "(m {m}, k {k}, n {n}) strides ({x_rs}, {c_rs}) kc {kc} acc {accumulate}"
                        );
                    }
                }
            }
        }
        assert!(via_sgemm >= 2 * 2 * mobilenet.len());
    }

    /// An input slice one value short of the last plane's columns panics before any access.
    #[test]
    #[should_panic(expected = "exceeds")]
    fn short_input_panics() {
        if !avx2::usable() {
            panic!("B exceeds (no AVX2: nothing to check)");
        }
        let (a, x) = (vec![1.0; 6 * 4], vec![1.0; 3 * 20 + 19]);
        let mut c = vec![0.0; 6 * 20];
        pointwise(4, (6, 20, 4), &a, &x, (20, 20, 0), &mut c, false);
    }
}
