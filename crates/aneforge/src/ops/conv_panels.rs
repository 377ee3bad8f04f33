//! The packed conv path's operand B: the im2col columns of a tile written as the packed
//! kernel's [`NR`]-column panels `[n/NR][K][NR]` (zeros past n and in the padding), for
//! `conv_gemm`. The values are those of `Product::im2col`, so the GEMM's bits do not depend on
//! which writer ran.
//!
//! A flat geometry (stride 1, output as wide as the input, [`Product::flat`]) is written in one
//! pass, panel by panel: tile column j of tap (c, ky, kx) reads plane c at j plus an offset of
//! the tap, so each panel row is a run of NR plane values with the lanes in the padding (or past
//! n) zeroed. Other geometries go through the im2col rows and a copy into panels.

use std::ops::Range;

use super::conv::tap;
use super::conv_gemm::Product;
use super::gemm_avx2::NR;

/// Values of the tap rows one pass of [`Product::rows_panels`] writes before copying them into
/// panels (16 KiB of f32: they stay in L1).
const PANEL_PASS: usize = 1 << 12;

impl Product {
    /// Taps per pass of [`Product::rows_panels`] for n columns: a multiple of kW (whole
    /// narrow-path groups) whose rows fill about [`PANEL_PASS`] values, at most K.
    pub(super) fn panel_taps(&self, n: usize) -> usize {
        let kw = self.kernel[1];
        ((PANEL_PASS / n.max(1)) / kw * kw).clamp(kw, self.depth())
    }

    /// The im2col columns of output rows `rows` (n = rows·W' of them) from `xs` [Cin/g, H, W]
    /// as `panels` [n/NR][K][NR] (zeros past n and in the padding), the GEMM operand B of
    /// `gemm_packed`: in one pass for a flat geometry, else through `buf` (at least
    /// [`Product::panel_taps`]`(n)`·n values).
    pub(super) fn im2col_panels(
        &self,
        xs: &[f32],
        rows: Range<usize>,
        panels: &mut [f32],
        buf: &mut [f32],
    ) {
        if self.flat() {
            self.flat_panels(xs, rows, panels)
        } else {
            self.rows_panels(xs, rows, panels, buf)
        }
    }

    /// [`Product::im2col_panels`] in two passes: [`Product::panel_taps`] taps at a time are
    /// written as im2col rows into `buf` and copied from there, still in L1, into their panels.
    fn rows_panels(&self, xs: &[f32], rows: Range<usize>, panels: &mut [f32], buf: &mut [f32]) {
        let (k, n) = (self.depth(), rows.len() * self.output[1]);
        let step = self.panel_taps(n);
        for first in (0..k).step_by(step) {
            let taps = step.min(k - first);
            let buf = &mut buf[..taps * n];
            self.im2col(xs, rows.clone(), first, buf, n, false);
            rows_to_panels(buf, n, n, first..first + taps, panels);
        }
    }

    /// [`Product::im2col_panels`] of a flat geometry in one pass: per panel, the runs of every
    /// tap (ky, kx) ([`TapRun`], the same for all channels), then each channel's K rows.
    fn flat_panels(&self, xs: &[f32], rows: Range<usize>, panels: &mut [f32]) {
        let ([cin, h, w], [kh, kw]) = (self.input, self.kernel);
        let ([dh, dw], [pt, _, pl, _]) = (self.dilations, self.pad);
        let (k, n) = (self.depth(), rows.len() * w);
        let mut runs = vec![TapRun::EMPTY; kh * kw];
        for (jb, panel) in panels.chunks_exact_mut(k * NR).enumerate() {
            let j0 = jb * NR;
            // Output (row, column) of every lane.
            let (mut oy, mut ox) = (rows.start + j0 / w, j0 % w);
            let at: [(usize, usize); NR] = std::array::from_fn(|_| {
                let here = (oy, ox);
                (ox, oy) = if ox + 1 == w {
                    (0, oy + 1)
                } else {
                    (ox + 1, oy)
                };
                here
            });
            for (t, run) in runs.iter_mut().enumerate() {
                let (ky, kx) = (t / kw, t % kw);
                let inside = |l: usize| {
                    let (y, x) = at[l];
                    j0 + l < n
                        && tap(y, ky, 1, dh, pt, h).is_some()
                        && tap(x, kx, 1, dw, pl, w).is_some()
                };
                let start = ((rows.start + ky * dh) * w + kx * dw + j0) as isize;
                *run = TapRun::new(start - (pt * w + pl) as isize, inside, h * w);
            }
            for (c, taps) in panel.chunks_exact_mut(kh * kw * NR).enumerate() {
                let plane = &xs[c * h * w..(c + 1) * h * w];
                for (dst, run) in taps.chunks_exact_mut(NR).zip(&runs) {
                    run.write(plane, dst.try_into().expect("NR values"));
                }
            }
        }
    }
}

/// How a [`TapRun`]'s lanes are read.
#[derive(Clone, Copy)]
enum Lanes {
    /// Every lane inside the plane: one NR-value copy.
    Full,
    /// No lane inside: zeros.
    Empty,
    /// Some lanes inside, the whole run within the plane: a copy with the others zeroed.
    Masked,
    /// Some lanes inside, the run crossing the plane's start or end: lane by lane.
    Edge,
}

/// One tap's row of a panel: lane l holds plane value `start` + l where `mask[l]` is all ones
/// (the tap lies inside the plane), zero elsewhere.
#[derive(Clone)]
struct TapRun {
    start: isize,
    mask: [u32; NR],
    lanes: Lanes,
}

impl TapRun {
    /// The run of no lane.
    const EMPTY: TapRun = TapRun {
        start: 0,
        mask: [0; NR],
        lanes: Lanes::Empty,
    };

    /// The run from plane index `start` whose lane l is read where `inside(l)` (such lanes
    /// index a plane of `len` values), classified once for all channels.
    fn new(start: isize, inside: impl Fn(usize) -> bool, len: usize) -> TapRun {
        let mask: [u32; NR] = std::array::from_fn(|l| if inside(l) { u32::MAX } else { 0 });
        let lanes = match mask.iter().filter(|&&m| m != 0).count() {
            NR => Lanes::Full,
            0 => Lanes::Empty,
            _ if start >= 0 && start as usize + NR <= len => Lanes::Masked,
            _ => Lanes::Edge,
        };
        TapRun { start, mask, lanes }
    }

    /// dst = the run's values of `plane` (zeros in the lanes outside).
    fn write(&self, plane: &[f32], dst: &mut [f32; NR]) {
        // In bounds for Full and Masked by construction ([`TapRun::new`]); checked anyway.
        let run = || -> &[f32; NR] {
            let s = self.start as usize;
            plane[s..s + NR].try_into().expect("NR values")
        };
        match self.lanes {
            Lanes::Full => *dst = *run(),
            Lanes::Empty => *dst = [0.0; NR],
            Lanes::Masked => {
                let src = run();
                for ((d, s), m) in dst.iter_mut().zip(src).zip(&self.mask) {
                    *d = f32::from_bits(s.to_bits() & m);
                }
            }
            Lanes::Edge => {
                for (l, (d, &m)) in dst.iter_mut().zip(&self.mask).enumerate() {
                    *d = match m {
                        0 => 0.0,
                        _ => plane[(self.start + l as isize) as usize],
                    };
                }
            }
        }
    }
}

/// Copy the depth rows `depth` of B (n columns; row `depth.start` + t at `src[t·src_rs..]`)
/// into `panels` of NR columns ([n/NR][K][NR], K = panels.len() / (n/NR) / NR), zeros past n.
pub(super) fn rows_to_panels(
    src: &[f32],
    src_rs: usize,
    n: usize,
    depth: Range<usize>,
    panels: &mut [f32],
) {
    let k = panels.len() / n.div_ceil(NR) / NR;
    for (jb, panel) in panels.chunks_exact_mut(k * NR).enumerate() {
        let (j0, dst) = (jb * NR, &mut panel[depth.start * NR..depth.end * NR]);
        for (t, d) in dst.chunks_exact_mut(NR).enumerate() {
            let row = &src[t * src_rs..];
            match <&[f32; NR]>::try_from(row.get(j0..j0 + NR).unwrap_or(&[])) {
                Ok(whole) if j0 + NR <= n => {
                    *<&mut [f32; NR]>::try_from(d).expect("NR values") = *whole
                }
                _ => {
                    d[..n - j0].copy_from_slice(&row[j0..n]);
                    d[n - j0..].fill(0.0);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::gemm::tests::rand_vec;
    use crate::ops::gemm_packed::panels_len;

    /// The one-pass writer gives exactly the two-pass writer's panels (every element written:
    /// the panels start as NaN) on flat geometries: widths 7 to 57 (tiles ending mid-panel),
    /// padding 0, 1, 2 and uneven, 1×1 to 5×5 kernels, dilation 2, channel counts not a
    /// multiple of 8, every tile of several tilings including the first and last rows.
    #[test]
    fn one_pass_panels_equal_the_two_pass_panels() {
        // (Cin, kernel, dilation, [H, W], pad (top, bottom, left, right))
        let cases = [
            (3, 3, 1, [7, 7], [1, 1, 1, 1]),
            (5, 3, 1, [14, 14], [1, 1, 1, 1]),
            (9, 3, 1, [28, 28], [1, 1, 1, 1]),
            (3, 3, 1, [9, 56], [1, 1, 1, 1]),
            (7, 3, 1, [6, 57], [1, 1, 1, 1]),
            (5, 3, 1, [10, 14], [0, 0, 1, 1]),
            (6, 5, 1, [9, 28], [2, 2, 2, 2]),
            (3, 5, 2, [11, 57], [4, 4, 4, 4]),
            (4, 3, 1, [8, 7], [2, 0, 1, 1]),
            (11, 1, 1, [5, 7], [1, 0, 0, 0]),
            (2, 3, 1, [1, 3], [1, 1, 1, 1]),
        ];
        for (ci, &(cin, kk, dil, [h, w], pad)) in cases.iter().enumerate() {
            let span = dil * (kk - 1) + 1;
            let product = Product {
                input: [cin, h, w],
                kernel: [kk, kk],
                output: [
                    h + pad[0] + pad[1] + 1 - span,
                    w + pad[2] + pad[3] + 1 - span,
                ],
                strides: [1, 1],
                dilations: [dil, dil],
                pad,
                cog: 8,
            };
            assert!(product.flat(), "case {ci} is not flat");
            let (k, oh) = (product.depth(), product.output[0]);
            let x = rand_vec(cin * h * w, ci as u64);
            for tiles in [1, 2, 3, oh] {
                let tiling = (0..tiles).map(|t| oh * t / tiles..oh * (t + 1) / tiles);
                for rows in tiling.filter(|r| !r.is_empty()) {
                    let n = rows.len() * w;
                    let mut buf = vec![0f32; product.panel_taps(n) * n];
                    let (mut want, mut got) = (vec![f32::NAN; panels_len(k, n)], vec![]);
                    got.clone_from(&want);
                    product.rows_panels(&x, rows.clone(), &mut want, &mut buf);
                    product.flat_panels(&x, rows.clone(), &mut got);
                    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&got), bits(&want), "case {ci} rows {rows:?}");
                }
            }
        }
    }
}
