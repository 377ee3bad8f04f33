//! Depthwise output planes at stride 1 (dilation 1, square 3×3 or 5×5 filters, rows of at
//! least 8 columns) from `conv_depthwise`'s padded scratch plane, each loaded input vector
//! reused by every output row of a block whose taps read it (an input row serves K output
//! rows), so a block of R rows loads (R + K − 1)·K vectors per column block instead of R·K².
//! Each output performs the per-plane kernel's operations in its order: bias (or, without bias,
//! the first tap's product x·w), then fma(x, w, acc) per later tap in (ky, kx) order: the same
//! bits.

/// Whether a plane of this geometry can take [`output_plane`]: strides and dilations 1, a 3×3
/// or 5×5 filter, output rows of ≥ 8 columns and at least [`ROWS`] of them, on AVX2 + FMA.
pub(super) fn fits(kernel: [usize; 2], steps: [[usize; 2]; 2], output: [usize; 2]) -> bool {
    let square = kernel[0] == kernel[1] && matches!(kernel[0], 3 | 5);
    let unit = steps == [[1, 1]; 2];
    square && unit && output[1] >= 8 && output[0] >= ROWS && available()
}

/// Output rows per block: 4 rows of 2 vectors give 8 independent fma chains (2, 3 and 6
/// rows measured no faster on MobileNetV3's planes, 6 slower on 14×14).
const ROWS: usize = 4;

fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Output plane `o` [rows, n] of a K×K filter `f` (K = 3 or 5), output (oy, ox) reading
/// `base[(oy + ky)·step + ox + kx]` at tap (ky, kx).
///
/// # Safety
/// [`fits`] holds for this geometry (so the CPU has AVX2 and FMA, n ≥ 8, rows ≥ [`ROWS`]);
/// `base.add((oy + ky)·step + ox + kx)` is readable for every oy < rows, ox < n, ky, kx < K;
/// f.len() = K².
pub(super) unsafe fn output_plane(
    base: *const f32,
    step: usize,
    f: &[f32],
    bias: Option<f32>,
    o: &mut [f32],
    n: usize,
) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the caller's contract.
    unsafe {
        match f.len() {
            9 => x86::plane::<3, ROWS>(base, step, f, bias, o, n),
            _ => x86::plane::<5, ROWS>(base, step, f, bias, o, n),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    unreachable!("depthwise reuse needs AVX2 and FMA ({base:?} {step} {f:?} {bias:?} {o:?} {n})")
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// [`super::output_plane`] for a K×K filter: groups of R rows (the last one ending
    /// at the plane's last row, overlapping the one before; recomputed outputs get the same
    /// bits), each in blocks of 16 columns, then the 9 to 15 columns left as one two-vector
    /// block ending at column n, or up to 8 as one vector ending there.
    ///
    /// # Safety
    /// As [`super::output_plane`].
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn plane<const K: usize, const R: usize>(
        base: *const f32,
        step: usize,
        f: &[f32],
        bias: Option<f32>,
        o: &mut [f32],
        n: usize,
    ) {
        assert!(f.len() == K * K && n >= 8 && o.len() >= R * n);
        let rows = o.len() / n;
        let out = o.as_mut_ptr();
        let mut oy = 0;
        while oy < rows {
            let top = oy.min(rows - R);
            let (b, d) = (base.add(top * step), out.add(top * n));
            let mut ox = 0;
            while ox + 16 <= n {
                group::<K, R, 2>(b, d, step, [ox, ox + 8], n, f, bias);
                ox += 16;
            }
            if n - ox > 8 {
                group::<K, R, 2>(b, d, step, [ox, n - 8], n, f, bias);
            } else if ox < n {
                group::<K, R, 1>(b, d, step, [n - 8], n, f, bias);
            }
            oy = top + R;
        }
    }

    /// [`block`] with or without bias.
    #[inline(always)]
    unsafe fn group<const K: usize, const R: usize, const V: usize>(
        base: *const f32,
        out: *mut f32,
        step: usize,
        cols: [usize; V],
        n: usize,
        f: &[f32],
        bias: Option<f32>,
    ) {
        match bias {
            Some(b) => block::<K, R, V, false>(base, out, step, cols, n, f, _mm256_set1_ps(b)),
            None => block::<K, R, V, true>(base, out, step, cols, n, f, _mm256_setzero_ps()),
        }
    }

    /// R output rows × V vectors at columns `cols`: input rows i = 0..R + K − 1 in
    /// order, each tap column kx in order, one load per vector, used by every row r with
    /// ky = i − r in 0..K. Row r thus sees its taps in (ky, kx) order: acc = `init` (the bias)
    /// then fma, or when MUL (no bias) acc = x·w at tap (0, 0) then fma.
    #[inline(always)]
    unsafe fn block<const K: usize, const R: usize, const V: usize, const MUL: bool>(
        base: *const f32,
        out: *mut f32,
        step: usize,
        cols: [usize; V],
        n: usize,
        f: &[f32],
        init: __m256,
    ) {
        let mut acc = [[init; V]; R];
        for i in 0..R + K - 1 {
            let row = base.add(i * step);
            for kx in 0..K {
                let mut x = [_mm256_setzero_ps(); V];
                for (v, x) in x.iter_mut().enumerate() {
                    *x = _mm256_loadu_ps(row.add(cols[v] + kx));
                }
                for (r, acc) in acc.iter_mut().enumerate() {
                    if i < r || i - r >= K {
                        continue;
                    }
                    let ky = i - r;
                    let w = _mm256_set1_ps(*f.get_unchecked(ky * K + kx));
                    for (a, &x) in acc.iter_mut().zip(&x) {
                        *a = if MUL && ky == 0 && kx == 0 {
                            _mm256_mul_ps(x, w)
                        } else {
                            _mm256_fmadd_ps(x, w, *a)
                        };
                    }
                }
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            for (v, a) in acc.iter().enumerate() {
                _mm256_storeu_ps(out.add(r * n + cols[v]), *a);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{fits, output_plane};
    use crate::ops::conv_depthwise::{output_row_scalar, Depthwise};
    use crate::ops::depthwise_lanes;
    use crate::ops::gemm::tests::rand_vec;

    /// `n` random values with NaN, ±inf and ±0 at every 7th.
    fn specials(n: usize, seed: u64) -> Vec<f32> {
        let mut x = rand_vec(n, seed);
        let s = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0];
        for (i, v) in x.iter_mut().enumerate().filter(|(i, _)| i % 7 == 3) {
            *v = s[(i / 7) % s.len()];
        }
        x
    }

    /// The kernel's planes against the per-plane kernel's scalar rows, bit for bit: 3×3 and
    /// 5×5, widths 8 to 40 (16-column blocks and every tail), 4 to 13 rows (groups of 4 and
    /// every overlap), with and without bias, NaN, ±inf and ±0 in the input, an infinite
    /// weight, sums of −0 products; nothing written past the plane.
    #[test]
    fn planes_match_the_scalar_rows() {
        if !fits([3, 3], [[1, 1]; 2], [8, 8]) {
            return;
        }
        // Random input with specials and an infinite weight, then −0 everywhere with positive
        // weights (every product −0: the sum is −0 only when the first tap is a product).
        let (step, random, zeros) = (48, specials(48 * 20, 61), vec![-0.0f32; 48 * 20]);
        for (k, s) in [3, 5].into_iter().flat_map(|k| [(k, &random), (k, &zeros)]) {
            let mut f: Vec<f32> = rand_vec(k * k, 62).iter().map(|v| v.abs()).collect();
            if s == &random {
                f[k + 1] = f32::INFINITY;
            }
            for n in 8..=40 {
                for rows in 4..=13 {
                    for bias in [None, Some(-0.5f32)] {
                        let len = rows * n;
                        let (mut got, mut want) = (vec![7.5f32; len + 8], vec![0f32; len]);
                        // SAFETY: the largest read is (12 + 4)·48 + 4 + 39 < 960; AVX2 and FMA
                        // are there (`fits`).
                        unsafe { output_plane(s.as_ptr(), step, &f, bias, &mut got[..len], n) };
                        assert!(
                            got[len..].iter().all(|&g| g == 7.5),
                            "k {k} n {n} rows {rows}"
                        );
                        got.truncate(len);
                        let offsets: Vec<usize> =
                            (0..k * k).map(|t| t / k * step + t % k).collect();
                        for (oy, row) in want.chunks_mut(n).enumerate() {
                            // SAFETY: as above.
                            unsafe {
                                output_row_scalar(s[oy * step..].as_ptr(), &offsets, &f, bias, row)
                            };
                        }
                        let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                        assert_eq!(
                            bits(&got),
                            bits(&want),
                            "k {k} n {n} rows {rows} bias {bias:?}"
                        );
                    }
                }
            }
        }
    }

    /// Whole convs through the per-plane path (this kernel where it fits) against the lane
    /// kernel, bit for bit: 3×3 and 5×5 at strides 1 and 2, square planes 1×1 to 40×40, channel
    /// counts not a multiple of 8, with and without bias, NaN, ±inf and ±0 inputs, an infinite
    /// weight, a plane of −0 (sums of −0 products), at 1, 2 and 3 threads (pools kept across the cases, so each thread's scratch
    /// goes from geometry to geometry).
    #[test]
    fn convs_match_the_lane_kernel() {
        if !depthwise_lanes::available() {
            return;
        }
        let pools = crate::ops::gemm::tests::pools(3);
        for size in 1..=40 {
            for (k, s) in [(3, 1), (5, 1), (3, 2), (5, 2)] {
                let out = (size + 2 * (k / 2) - k) / s + 1;
                let dw = Depthwise {
                    input: [size, size],
                    kernel: [k, k],
                    output: [out, out],
                    strides: [s, s],
                    dilations: [1, 1],
                    pad: [k / 2; 4],
                };
                if !dw.matches_gemv() {
                    continue;
                }
                let c = [1, 5, 13, 3, 9][size % 5];
                let [hw, taps, p] = dw.sizes();
                // Channel 0: −0 everywhere with positive weights (sums of −0 products); the
                // last channel (when another) with an infinite weight.
                let mut x = specials(c * hw, 63 + size as u64);
                x[..hw].fill(-0.0);
                let mut w = rand_vec(c * taps, 64);
                w[..taps].iter_mut().for_each(|v| *v = v.abs());
                if c > 1 {
                    w[taps * (c - 1) + taps / 2 + 1] = f32::INFINITY;
                }
                let b = rand_vec(c, 65);
                for (pool, threads) in pools.iter().zip(1..) {
                    for bias in [None, Some(&b[..])] {
                        let (mut want, mut got) = (vec![0f32; c * p], vec![1f32; c * p]);
                        pool.install(|| {
                            depthwise_lanes::run_then(&dw, &x, &w, bias, &mut want, &|_, _| {})
                                .unwrap();
                            dw.run_planes(&x, &w, bias, &mut got, |_, _| {}).unwrap();
                        });
                        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                        assert_eq!(
                            bits(&got),
                            bits(&want),
                            "{dw:?} c {c} threads {threads} bias {}",
                            bias.is_some()
                        );
                    }
                }
            }
        }
    }
}
