//! The packed conv path's operand B: the im2col columns of a tile written as the packed
//! kernel's [`NR`]-column panels `[n/NR][K][NR]` (zeros past n and in the padding), for
//! `conv_gemm`. The values are those of `Product::im2col`, so the GEMM's bits do not depend on
//! which writer ran.
//!
//! A phased geometry ([`Product::phased`]: the input W = sW·W') is written in one pass, panel
//! by panel, from its phase planes (input rows i·sH + py, columns j·sW + px, as planes of W'
//! columns; at stride 1 the input itself): tile column j of tap (c, ky, kx) then reads one phase
//! plane at j plus an offset of the tap, so each panel row is a run of NR plane values with the
//! lanes in the padding (or past n) zeroed. Other geometries go through the im2col rows and a
//! copy into panels.

use std::cell::RefCell;
use std::ops::Range;

use super::conv::gather_strided;
use super::conv_gemm::{with_scratch, Product};
use super::gemm_avx2::NR;
use crate::error::Result;

thread_local! {
    /// The phase planes of one product's input (every element read unmasked is written).
    static PHASES: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

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
    /// `gemm_packed`, in two passes: [`Product::panel_taps`] taps at a time are written as
    /// im2col rows into `buf` (at least that many times n values) and copied from there, still
    /// in L1, into their panels.
    pub(super) fn rows_panels(
        &self,
        xs: &[f32],
        rows: Range<usize>,
        panels: &mut [f32],
        buf: &mut [f32],
    ) {
        let (k, n) = (self.depth(), rows.len() * self.output[1]);
        let step = self.panel_taps(n);
        for first in (0..k).step_by(step) {
            let taps = step.min(k - first);
            let buf = &mut buf[..taps * n];
            self.im2col(xs, rows.clone(), first, buf, n, false);
            rows_to_panels(buf, n, n, first..first + taps, panels);
        }
    }

    /// Whether [`Product::phase_panels`] writes the panels: the input exactly sW·W' wide, at
    /// stride 1, or at a larger stride without dilation with every phase read (kernel ≥ stride).
    pub(super) fn phased(&self) -> bool {
        let ([_, _, w], [kh, kw], [_, ow], [sh, sw]) =
            (self.input, self.kernel, self.output, self.strides);
        let every_phase = self.dilations == [1, 1] && kh >= sh && kw >= sw;
        w == sw * ow && (self.strides == [1, 1] || every_phase)
    }

    /// Values of one phase plane: ⌈H/sH⌉ rows of W'.
    fn phase_len(&self) -> usize {
        self.input[1].div_ceil(self.strides[0]) * self.output[1]
    }

    /// Run `f` on the source of this product's panels from `xs` [Cin/g, H, W]: for a phased
    /// geometry its phase planes (`xs` itself at stride 1; else, when `packed()` says packed
    /// tiles will read them, split into the thread's scratch by [`Product::split_phases`]),
    /// else the im2col rows.
    pub(super) fn with_panel_source<R>(
        &self,
        xs: &[f32],
        packed: impl FnOnce() -> bool,
        f: impl FnOnce(PanelSource) -> R,
    ) -> Result<R> {
        if !self.phased() {
            return Ok(f(PanelSource::Rows));
        }
        if self.strides == [1, 1] {
            return Ok(f(PanelSource::Phases(xs)));
        }
        if !packed() {
            return Ok(f(PanelSource::Rows));
        }
        let [sh, sw] = self.strides;
        let len = self.input[0] * sh * sw * self.phase_len();
        with_scratch(&PHASES, len, "the phase planes", |planes| {
            self.split_phases(xs, planes);
            f(PanelSource::Phases(planes))
        })
    }

    /// Split `xs` [Cin/g, H, W] of a phased geometry into `planes` [Cin/g][sH][sW][⌈H/sH⌉][W']:
    /// plane (py, px) row i holds input row i·sH + py at columns px, px + sW, … (the rows past
    /// the input, where H is not a multiple of sH, keep what they held: never read unmasked).
    fn split_phases(&self, xs: &[f32], planes: &mut [f32]) {
        let ([_, h, w], [_, ow], [sh, sw]) = (self.input, self.output, self.strides);
        let plane = self.phase_len();
        for (c, phases) in planes.chunks_exact_mut(sh * sw * plane).enumerate() {
            for iy in 0..h {
                let row = &xs[(c * h + iy) * w..(c * h + iy + 1) * w];
                for px in 0..sw {
                    let at = (iy % sh * sw + px) * plane + iy / sh * ow;
                    // W = sW·W', so row[px..] holds (W' − 1)·sW + 1 values or more.
                    gather_strided(&row[px..], sw, &mut phases[at..at + ow]);
                }
            }
        }
    }

    /// The panels of [`Product::rows_panels`] for a phased geometry, in one pass from its
    /// phase `planes` ([`Product::with_panel_source`]): per panel, the runs of every tap
    /// (ky, kx) ([`TapRun`], the same for all channels), then each channel's K rows.
    pub(super) fn phase_panels(&self, planes: &[f32], rows: Range<usize>, panels: &mut [f32]) {
        let ([_, h, _], [kh, kw], [_, ow], [sh, sw]) =
            (self.input, self.kernel, self.output, self.strides);
        let ([dh, dw], [pt, _, pl, _]) = (self.dilations, self.pad);
        let (k, n, plane) = (self.depth(), rows.len() * ow, self.phase_len());
        // Tap offsets along H and W, each as (phase, shift in phase-plane rows or columns,
        // rows or columns of that phase).
        let split = |a: isize, s: usize, size: usize| {
            let (phase, shift) = (a.rem_euclid(s as isize) as usize, a.div_euclid(s as isize));
            (
                phase,
                shift,
                size.saturating_sub(phase).div_ceil(s) as isize,
            )
        };
        let along_h: Vec<_> = (0..kh)
            .map(|ky| split((ky * dh) as isize - pt as isize, sh, h))
            .collect();
        let w = sw * ow;
        let along_w: Vec<_> = (0..kw)
            .map(|kx| split((kx * dw) as isize - pl as isize, sw, w))
            .collect();
        let mut runs = vec![TapRun::EMPTY; kh * kw];
        // Lanes inside the plane along H per ky (and before n), along W per kx.
        let (mut row_masks, mut col_masks) = (vec![[0u32; NR]; kh], vec![[0u32; NR]; kw]);
        let lane_mask = |inside: bool| if inside { u32::MAX } else { 0 };
        for (jb, panel) in panels.chunks_exact_mut(k * NR).enumerate() {
            let j0 = jb * NR;
            // Output (row, column) of every lane.
            let (mut oy, mut ox) = (rows.start + j0 / ow, j0 % ow);
            let at: [(isize, isize); NR] = std::array::from_fn(|_| {
                let here = (oy as isize, ox as isize);
                (ox, oy) = if ox + 1 == ow {
                    (0, oy + 1)
                } else {
                    (ox + 1, oy)
                };
                here
            });
            for (mask, &(_, shift, size)) in row_masks.iter_mut().zip(&along_h) {
                for (l, m) in mask.iter_mut().enumerate() {
                    *m = lane_mask(j0 + l < n && (0..size).contains(&(at[l].0 + shift)));
                }
            }
            for (mask, &(_, shift, size)) in col_masks.iter_mut().zip(&along_w) {
                for (l, m) in mask.iter_mut().enumerate() {
                    *m = lane_mask((0..size).contains(&(at[l].1 + shift)));
                }
            }
            let row_taps = runs.chunks_exact_mut(kw).zip(&row_masks).zip(&along_h);
            for ((runs, row_mask), &(py, dy, _)) in row_taps {
                let first = (rows.start as isize + dy) * ow as isize + j0 as isize;
                for ((run, col_mask), &(px, dx, _)) in runs.iter_mut().zip(&col_masks).zip(&along_w)
                {
                    let mask = std::array::from_fn(|l| row_mask[l] & col_mask[l]);
                    *run = TapRun::new((py * sw + px) * plane, first + dx, mask, plane);
                }
            }
            let block = sh * sw * plane;
            for (c, taps) in panel.chunks_exact_mut(kh * kw * NR).enumerate() {
                let phases = &planes[c * block..(c + 1) * block];
                for (dst, run) in taps.chunks_exact_mut(NR).zip(&runs) {
                    run.write(phases, dst.try_into().expect("NR values"));
                }
            }
        }
    }
}

/// Where a tile's panels are written from ([`Product::with_panel_source`]).
#[derive(Clone, Copy)]
pub(super) enum PanelSource<'a> {
    /// The phase planes of a phased geometry ([`Product::phase_panels`]).
    Phases(&'a [f32]),
    /// The input through im2col rows ([`Product::rows_panels`]).
    Rows,
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

/// One tap's row of a panel: lane l holds value `start` + l of a channel's phase planes where
/// `mask[l]` is all ones (the tap lies inside its phase plane), zero elsewhere.
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

    /// The run from index `start` of the phase plane of `len` values at `plane` whose lanes
    /// are read where `mask` is all ones (such lanes index inside that plane), classified once
    /// for all channels.
    fn new(plane: usize, start: isize, mask: [u32; NR], len: usize) -> TapRun {
        let lanes = match mask.iter().filter(|&&m| m != 0).count() {
            NR => Lanes::Full,
            0 => Lanes::Empty,
            _ if start >= 0 && start as usize + NR <= len => Lanes::Masked,
            _ => Lanes::Edge,
        };
        let start = start + plane as isize;
        TapRun { start, mask, lanes }
    }

    /// dst = the run's values of a channel's `phases` (zeros in the lanes outside).
    #[inline(always)]
    fn write(&self, phases: &[f32], dst: &mut [f32; NR]) {
        // In bounds for Full and Masked by construction ([`TapRun::new`]); checked anyway.
        let run = || -> &[f32; NR] {
            let s = self.start as usize;
            phases[s..s + NR].try_into().expect("NR values")
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
                        _ => phases[(self.start + l as isize) as usize],
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
    /// the panels start as NaN) on phased geometries: widths 7 to 224 (tiles ending mid-panel),
    /// padding 0, 1, 2, 3 and uneven, 1×1 to 7×7 kernels, dilation 2, strides 1, 2 and 3, odd
    /// heights at stride 2, channel counts not a multiple of 8, every tile of several tilings
    /// including the first and last rows.
    #[test]
    fn one_pass_panels_equal_the_two_pass_panels() {
        // (Cin, kernel, stride, dilation, [H, W], pad (top, bottom, left, right))
        let cases = [
            (3, 3, 1, 1, [7, 7], [1, 1, 1, 1]),
            (5, 3, 1, 1, [14, 14], [1, 1, 1, 1]),
            (9, 3, 1, 1, [28, 28], [1, 1, 1, 1]),
            (3, 3, 1, 1, [9, 56], [1, 1, 1, 1]),
            (7, 3, 1, 1, [6, 57], [1, 1, 1, 1]),
            (5, 3, 1, 1, [10, 14], [0, 0, 1, 1]),
            (6, 5, 1, 1, [9, 28], [2, 2, 2, 2]),
            (3, 5, 1, 2, [11, 57], [4, 4, 4, 4]),
            (4, 3, 1, 1, [8, 7], [2, 0, 1, 1]),
            (11, 1, 1, 1, [5, 7], [1, 0, 0, 0]),
            (2, 3, 1, 1, [1, 3], [1, 1, 1, 1]),
            (5, 3, 2, 1, [14, 14], [1, 1, 1, 1]),
            (3, 3, 2, 1, [56, 56], [1, 1, 1, 1]),
            (9, 3, 2, 1, [13, 28], [1, 1, 1, 1]),
            (6, 3, 2, 1, [15, 14], [0, 2, 1, 1]),
            (3, 7, 2, 1, [40, 224], [3, 3, 3, 3]),
            (4, 3, 3, 1, [10, 21], [1, 1, 1, 0]),
        ];
        for (ci, &(cin, kk, stride, dil, [h, w], pad)) in cases.iter().enumerate() {
            let span = dil * (kk - 1) + 1;
            let out = |size: usize, lo: usize, hi: usize| (size + lo + hi - span) / stride + 1;
            let product = Product {
                input: [cin, h, w],
                kernel: [kk, kk],
                output: [out(h, pad[0], pad[1]), out(w, pad[2], pad[3])],
                strides: [stride; 2],
                dilations: [dil, dil],
                pad,
                cog: 8,
            };
            assert!(product.phased(), "case {ci} is not phased");
            let (k, [oh, ow]) = (product.depth(), product.output);
            let x = rand_vec(cin * h * w, ci as u64);
            product
                .with_panel_source(
                    &x,
                    || true,
                    |source| {
                        let PanelSource::Phases(planes) = source else {
                            panic!("case {ci} read no phase planes");
                        };
                        for tiles in [1, 2, 3, oh] {
                            let tiling = (0..tiles).map(|t| oh * t / tiles..oh * (t + 1) / tiles);
                            for rows in tiling.filter(|r| !r.is_empty()) {
                                let n = rows.len() * ow;
                                let mut buf = vec![0f32; product.panel_taps(n) * n];
                                let mut want = vec![f32::NAN; panels_len(k, n)];
                                let mut got = want.clone();
                                product.rows_panels(&x, rows.clone(), &mut want, &mut buf);
                                product.phase_panels(planes, rows.clone(), &mut got);
                                let bits =
                                    |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                                assert_eq!(bits(&got), bits(&want), "case {ci} rows {rows:?}");
                            }
                        }
                    },
                )
                .unwrap();
        }
    }
}
