//! The GEMM path of `conv`: per (batch, group) one product weight [Cout/g, K] × columns
//! [K, H'·W'] (K = Cin/g·kH·kW), cut into tiles of whole output rows. A tile's im2col columns
//! are written into a reused scratch and read by its GEMM while still in cache, and tiles run
//! on the rayon pool (each GEMM on one thread) when the conv is large enough. Small products
//! (a weight gradient's 3×3 correlation outputs) of several batch elements share one GEMM.
//!
//! On AVX2 CPUs without AVX-512 a tile runs on the packed kernel (`gemm_packed`) where it
//! knows the crate's order: the im2col writes the columns straight into its NR-column panels
//! (`conv_panels`; a 1×1 conv's input is read in place where `conv_pointwise::in_place` says
//! so, else copied into them up to [`DIRECT_PANEL_COLS`] columns), so nothing is packed per
//! call, and each element is the crate's chain (same bits, [`Product::packed_block`]).
//!
//! On AVX-512 CPUs the packed kernel takes only small products (`gemm_packed::depth_block`),
//! and large 3×3-like products of small depth run without im2col on the lane kernel
//! (`conv_lanes`, output channels in the vector lanes).
//!
//! Bits: a tile is a column block of the same product, and the `gemm` crate computes every
//! output element as one fused multiply-add chain over K in depth blocks whose size depends only
//! on K, unless the call takes one of its small-size paths (m or n ≤ 1, k ≤ 2, or m and n both
//! ≤ 64). [`tile_rows`] cuts only when every tile takes the same path as the whole product,
//! and [`Product::batch`] joins only products that keep it, so the result is the same bit for
//! bit whatever the tiling, the batching and the thread count.

use std::cell::RefCell;
use std::ops::Range;

use rayon::prelude::*;

use super::conv::{tap, window_row};
use super::conv_panels::{rows_to_panels, PanelSource};
use super::conv_pointwise;
use super::gemm::{sgemm_raw, sgemm_with, PAR_MIN_MACS};
use super::gemm_avx2::NR;
use super::gemm_packed::{self, panels_len};
use super::kernel::PAR_MIN_ELEMS;
use crate::error::Result;

/// im2col elements per tile aimed at (512 KiB of f32: a tile's columns stay in L2).
const TILE_ELEMS: usize = 1 << 17;

/// Fewest output columns per tile (smaller ones re-pack the weight too often per multiply-add).
const MIN_TILE_COLS: usize = 128;

/// The `gemm` crate's bound below which it may pick a different depth blocking (m, n ≤ 64).
const GEMM_SMALL: usize = 64;

/// Widest output whose im2col takes the narrow path ([`Product::narrow_taps`]).
const NARROW: usize = 8;

/// Most padded input columns one output row of a narrow im2col reads (its window on the stack).
const WINDOW: usize = 64;

/// Widest direct (1×1, stride 1) tile whose input is copied into panels for the packed kernel
/// when it is not read in place (`conv_pointwise::in_place`): wider ones gain nothing over the
/// crate's own packing (BENCHMARKS.md, h-im2p round 12).
const DIRECT_PANEL_COLS: usize = 256;

/// Multiply-adds from which a pointwise product ([`Product::direct`]) is split over the
/// threads: MobileNetV3-small's 1×1 convs of 0.8–2.7 M multiply-adds (24 to 576 channels at
/// 28×28 to 7×7, 25–110 µs) ran 2–50 % slower on 2 threads than on 1 with the general
/// [`PAR_MIN_MACS`] (a woken worker starts its half 20–40 µs late here), its 3.6 M one at
/// 56×56 no slower (mnet9 results).
const PAR_MIN_MACS_DIRECT: usize = 3 << 20;

/// Depth up to which the `gemm` crate runs a product in one depth block (its depth block is at
/// least min(K, 512) on every path and CPU).
const ONE_DEPTH_BLOCK: usize = 512;

thread_local! {
    /// im2col columns of one tile, reused across tiles, convs and calls (every element read is
    /// written first).
    pub(super) static COLS: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    /// The im2col panels of one tile for the packed kernel (every element read is written).
    static PANELS: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// One conv product: geometry, strides, dilations and padding.
#[derive(Clone, Debug)]
pub struct Product {
    /// Input planes [Cin/g, H, W] of one (batch, group).
    pub input: [usize; 3],
    pub kernel: [usize; 2],
    pub output: [usize; 2],
    pub strides: [usize; 2],
    pub dilations: [usize; 2],
    /// Padding (top, bottom, left, right).
    pub pad: [usize; 4],
    /// Output channels of one group (the GEMM's m).
    pub cog: usize,
}

impl Product {
    /// Whether the input is the GEMM operand itself (1×1 kernel, stride 1, no padding).
    pub(super) fn direct(&self) -> bool {
        self.kernel == [1, 1] && self.strides == [1, 1] && self.pad == [0; 4]
    }

    /// K, the GEMM depth.
    pub(super) fn depth(&self) -> usize {
        self.input[0] * self.kernel[0] * self.kernel[1]
    }

    /// Whether the product is split over `threads` threads: more than one, and at least
    /// [`PAR_MIN_MACS`] multiply-adds ([`PAR_MIN_MACS_DIRECT`] for a pointwise product).
    fn parallel(&self, threads: usize) -> bool {
        let [oh, ow] = self.output;
        let least = match self.direct() {
            true => PAR_MIN_MACS_DIRECT,
            false => PAR_MIN_MACS,
        };
        threads > 1 && self.cog * self.depth() * oh * ow >= least
    }

    /// Output rows of each tile for `threads` threads: one tile (the whole product) unless
    /// every tile takes the same `gemm` path as the whole (see the module doc); on one thread
    /// the rows split for the fewest kernel vectors ([`lane_aligned_tiles`]).
    pub(super) fn tile_rows(&self, threads: usize) -> Vec<Range<usize>> {
        let ([oh, ow], m, k) = (self.output, self.cog, self.depth());
        let cols = |rows: usize| rows * ow;
        let whole = std::iter::once(0..oh).collect();
        let parallel = self.parallel(threads);
        // Sequential direct products gain nothing from tiles (no im2col to keep in cache).
        if m < 2 || k <= 2 || (self.direct() && !parallel) {
            return whole;
        }
        let want = (TILE_ELEMS / k).max(MIN_TILE_COLS).div_ceil(ow.max(1));
        let mut n = oh.div_ceil(want.max(1));
        if parallel {
            n = n.max(threads).div_ceil(threads) * threads;
        }
        // A tile of `rows` rows keeps the whole product's `gemm` path.
        let fits = |rows: usize| {
            let c = cols(rows);
            c >= 2 && (m > GEMM_SMALL || c > GEMM_SMALL)
        };
        // Fewest rows in a tile of n balanced tiles is ⌊oh / n⌋; shrink n until those fit.
        while n > 1 && !fits(oh / n) {
            n -= 1;
        }
        if parallel {
            // Tiles run side by side: balanced rows keep the threads' shares equal.
            return (0..n).map(|t| oh * t / n..oh * (t + 1) / n).collect();
        }
        lane_aligned_tiles([oh, ow], n, fits)
    }

    /// Whether every GEMM of [`Product::run`] computes each element as one fused multiply-add
    /// chain written once (the `gemm` crate's blocked path, m, n ≥ 2, k ≥ 3, m·n > 256, with
    /// K ≤ [`ONE_DEPTH_BLOCK`]; see `ops::gemm_order`), so accumulating onto the bias,
    /// bias + acc, and adding the bias afterwards, acc + bias, round the same sum.
    pub fn bias_commutes(&self) -> bool {
        let (m, k, ow) = (self.cog, self.depth(), self.output[1]);
        let tiles = self.tile_rows(rayon::current_num_threads());
        (3..=ONE_DEPTH_BLOCK).contains(&k)
            && m >= 2
            && tiles
                .iter()
                .all(|r| r.len() * ow >= 2 && m * r.len() * ow > 256)
    }

    /// Write the im2col columns of output rows `rows` from `xs` [Cin/g, H, W] into the first
    /// rows·W' values of each row of `col` (rows `ld` apart; zeros in the padding), row t
    /// holding tap `first` + t (`first` a multiple of kW), on the rayon pool when `par` and the
    /// tile is large.
    pub(super) fn im2col(
        &self,
        xs: &[f32],
        rows: Range<usize>,
        first: usize,
        col: &mut [f32],
        ld: usize,
        par: bool,
    ) {
        let ([_, h, w], [kh, kw], [_, ow]) = (self.input, self.kernel, self.output);
        let ([sh, sw], [dh, dw], [pt, _, pl, _]) = (self.strides, self.dilations, self.pad);
        let n = rows.len() * ow;
        let par = par && col.len() >= PAR_MIN_ELEMS;
        let flat = self.flat();
        if !flat && ow <= NARROW && self.window() <= WINDOW {
            let taps = |(g, t): (usize, &mut [f32])| {
                self.narrow_taps(xs, first / kw + g, rows.clone(), t, ld)
            };
            return if par {
                col.par_chunks_mut(kw * ld).enumerate().for_each(taps)
            } else {
                col.chunks_mut(kw * ld).enumerate().for_each(taps)
            };
        }
        let fill = |(r, crow): (usize, &mut [f32])| {
            let r = first + r;
            let (c, ky, kx) = (r / (kh * kw), r / kw % kh, r % kw);
            let plane = &xs[c * h * w..(c + 1) * h * w];
            let crow = &mut crow[..n];
            if flat {
                let shift = (kx * dw) as isize - pl as isize;
                return tap_rows(plane, [h, w], rows.clone(), ky * dh, pt, shift, crow);
            }
            for (oy, orow) in rows.clone().zip(crow.chunks_mut(ow)) {
                match tap(oy, ky, sh, dh, pt, h) {
                    Some(iy) => {
                        window_row(&plane[iy * w..(iy + 1) * w], [kx * dw, sw, pl], 0.0, orow)
                    }
                    None => orow.fill(0.0),
                }
            }
        };
        if par {
            col.par_chunks_mut(ld).enumerate().for_each(fill);
        } else {
            col.chunks_mut(ld).enumerate().for_each(fill);
        }
    }

    /// The im2col columns of `xs` [Cin/g, H, W] as rows: `rows` [H'·W', K], row (oy, ox) holding
    /// tap (c, ky, kx) at c·kH·kW + ky·kW + kx (zeros in the padding), each (c, ky) one run of
    /// an input row.
    fn im2col_transposed(&self, xs: &[f32], rows: &mut [f32]) {
        let ([_, h, w], [kh, kw], [_, ow]) = (self.input, self.kernel, self.output);
        let ([sh, sw], [dh, dw], [pt, _, pl, _]) = (self.strides, self.dilations, self.pad);
        for (o, row) in rows.chunks_mut(self.depth()).enumerate() {
            let (oy, ox) = (o / ow, o % ow);
            for (g, run) in row.chunks_mut(kw).enumerate() {
                let (c, ky) = (g / kh, g % kh);
                match tap(oy, ky, sh, dh, pt, h) {
                    Some(iy) => {
                        let src = &xs[(c * h + iy) * w..(c * h + iy + 1) * w];
                        window_row(src, [ox * sw, dw, pl], 0.0, run)
                    }
                    None => run.fill(0.0),
                }
            }
        }
    }

    /// The depth block with which a tile of n columns runs on the packed kernel
    /// (`gemm_packed`, the `gemm` crate's per-element sequence) instead of the crate, `None`
    /// where it does not: direct products wider than [`DIRECT_PANEL_COLS`] not read in place
    /// (the crate packs their input as fast), products the crate threads itself (`par` on
    /// several threads), and where `gemm_packed::depth_block` (`depth_block_wide` for kernels
    /// larger than 1×1: on AVX-512 CPUs their im2col panels run faster on `gemm_avx512`'s tile
    /// than in the crate, `throughput_per_conv`) does not know the crate's order.
    fn packed_block(&self, n: usize, par: bool) -> Option<usize> {
        let copied = self.direct() && !conv_pointwise::in_place(self.cog, self.depth());
        if (copied && n > DIRECT_PANEL_COLS) || (par && rayon::current_num_threads() > 1) {
            return None;
        }
        let (m, k) = (self.cog, self.depth());
        match self.kernel == [1, 1] {
            true => gemm_packed::depth_block(m, n, k),
            false => gemm_packed::depth_block_wide(m, n, k),
        }
    }

    /// Whether a tap's rows are one run of the plane: stride 1, the output as wide as the
    /// input, and every tap's column shift less than W.
    fn flat(&self) -> bool {
        let ([_, _, w], [_, kw], [_, ow]) = (self.input, self.kernel, self.output);
        let ([_, dw], pl) = (self.dilations, self.pad[2]);
        self.strides == [1, 1] && ow == w && pl < w && dw * (kw - 1) < w + pl
    }

    /// Padded input columns one output row reads: (W' − 1)·sW + (kW − 1)·dW + 1.
    fn window(&self) -> usize {
        let ([_, ow], [_, kw]) = (self.output, self.kernel);
        (ow.max(1) - 1) * self.strides[1] + (kw - 1) * self.dilations[1] + 1
    }

    /// [`Product::im2col`] for a narrow output: the kW rows of taps (c, ky, 0..kW) in `taps`
    /// (rows `ld` apart), `group` = c·kH + ky. Each input row they read is copied once into the
    /// zero-padded window of [`Product::window`] columns, from which every tap takes its W'.
    fn narrow_taps(
        &self,
        xs: &[f32],
        group: usize,
        rows: Range<usize>,
        taps: &mut [f32],
        ld: usize,
    ) {
        let ([_, h, w], [kh, kw], [_, ow]) = (self.input, self.kernel, self.output);
        let ([sh, sw], [dh, dw], [pt, _, pl, _]) = (self.strides, self.dilations, self.pad);
        let (c, ky) = (group / kh, group % kh);
        let plane = &xs[c * h * w..(c + 1) * h * w];
        let mut win = [0f32; WINDOW];
        let win = &mut win[..self.window()];
        for (t, oy) in rows.enumerate() {
            let iy = tap(oy, ky, sh, dh, pt, h);
            if let Some(iy) = iy {
                window_row(&plane[iy * w..(iy + 1) * w], [0, 1, pl], 0.0, win);
            }
            for kx in 0..kw {
                let dst = &mut taps[kx * ld + t * ow..kx * ld + (t + 1) * ow];
                match iy {
                    Some(_) => {
                        (dst.iter_mut().enumerate()).for_each(|(ox, d)| *d = win[ox * sw + kx * dw])
                    }
                    None => dst.fill(0.0),
                }
            }
        }
    }

    /// out [Cout/g, H'·W'] (+)= weight × columns of `xs` for group `gi` (`accumulate`: out holds
    /// the bias), tile by tile, each tile's GEMM writing its columns of `out` in place.
    pub fn run(
        &self,
        xs: &[f32],
        w: &[f32],
        gi: usize,
        out: &mut [f32],
        accumulate: bool,
    ) -> Result<()> {
        self.run_on((xs, w, gi), out, accumulate, true)
    }

    /// [`Product::run`] of (input, weight, group), when `packed` on the direct path
    /// (`conv_direct`) or the lane kernel (`conv_lanes`, where [`Product::prefers_lanes`]) if
    /// they take it, else with tiles on the packed kernel where [`Product::packed_block`]
    /// allows; else every tile through the `gemm` crate (the same bits).
    pub(super) fn run_on(
        &self,
        (xs, w, gi): (&[f32], &[f32], usize),
        out: &mut [f32],
        accumulate: bool,
        packed: bool,
    ) -> Result<()> {
        let ([_, h, wd], [_, ow], m, k) = (self.input, self.output, self.cog, self.depth());
        let p = self.output[0] * ow;
        // The weight of group gi [m, k], the GEMM's A.
        let a = &w[gi * m * k..(gi + 1) * m * k];
        if packed
            && (self.run_direct((xs, a), out, accumulate)?
                || (self.prefers_lanes() && self.run_lanes((xs, a), out, accumulate)?))
        {
            return Ok(());
        }
        let threads = rayon::current_num_threads();
        let tiles = self.tile_rows(threads);
        let (c, len) = (SyncPtr(out.as_mut_ptr()), out.len());
        // A single tile is left to the `gemm` crate's own threads only when it is large enough
        // to split; a smaller one stays on the packed kernel (same bits, no per-call packing).
        let par = tiles.len() == 1 && self.parallel(threads);
        let any_packed = || {
            packed
                && !self.direct()
                && (tiles.iter()).any(|r| self.packed_block(r.len() * ow, par).is_some())
        };
        self.with_panel_source(xs, any_packed, |source| {
            // SAFETY (for the caller): `c`, `len` describe `out`, and no other call of `tile`
            // at the same time writes the columns of `rows`.
            let tile = |rows: &Range<usize>, par: bool| {
                let (n, start) = (rows.len() * ow, rows.start * ow);
                // C [m, n] with row stride p, starting at column `start` of `out`.
                let c = (c.get().wrapping_add(start), len.saturating_sub(start));
                if let Some(kc) = self.packed_block(n, par).filter(|_| packed) {
                    if self.direct() && conv_pointwise::in_place(m, k) {
                        let (dims, b) = ((m, n, k), (&xs[start..], h * wd));
                        // SAFETY: see the closure's contract; the operands' checks run inside.
                        return unsafe { conv_pointwise::run(kc, dims, a, b, c, p, accumulate) };
                    }
                    return with_scratch(&PANELS, panels_len(k, n), "the GEMM panels", |panels| {
                        match source {
                            _ if self.direct() => {
                                rows_to_panels(&xs[start..], h * wd, n, 0..k, panels)
                            }
                            PanelSource::Phases(planes) => {
                                self.phase_panels(planes, rows.clone(), panels)
                            }
                            PanelSource::Rows => {
                                let buf_len = self.panel_taps(n) * n;
                                with_scratch(&COLS, buf_len, "the im2col scratch", |buf| {
                                    self.rows_panels(xs, rows.clone(), panels, buf)
                                })?
                            }
                        }
                        let a = (a, k);
                        // SAFETY: see the closure's contract; C's checks run inside.
                        unsafe {
                            gemm_packed::gemm_raw(kc, false, (m, n, k), a, panels, c, p, accumulate)
                        };
                        Ok(())
                    })?;
                }
                if self.direct() {
                    let b = &xs[start..];
                    // SAFETY: see the closure's contract; C's checks run inside.
                    unsafe { sgemm_raw(par, m, n, k, a, k, 1, b, h * wd, 1, c, p, accumulate) };
                    return Ok(());
                }
                with_scratch(&COLS, k * n, "the im2col scratch", |col| {
                    self.im2col(xs, rows.clone(), 0, col, n, par);
                    // SAFETY: as above.
                    unsafe { sgemm_raw(par, m, n, k, a, k, 1, col, n, 1, c, p, accumulate) };
                })
            };
            if tiles.len() == 1 || !self.parallel(threads) {
                // One thread per product (tiles in order), or the whole product at once with
                // the `gemm` crate's own threads.
                return tiles.iter().try_for_each(|rows| tile(rows, par));
            }
            // Tiles in parallel: disjoint row ranges write disjoint columns of every channel.
            tiles.par_iter().try_for_each(|rows| tile(rows, false))
        })?
    }

    /// Batch elements whose products share one GEMM (see [`Product::run_batched`]): as many as
    /// keep its n ≤ 64 when every product is small and im2col'd (m ≤ 64, 2 ≤ H'·W' ≤ 32, K ≥ 3),
    /// else 1. The crate then runs both on its blocked path (B's row stride is n ≥ 2) with the
    /// depth block min(K, 512), so each element is the same fused multiply-add chain.
    pub fn batch(&self, n: usize) -> usize {
        let (m, p) = (self.cog, self.output[0] * self.output[1]);
        let small = (2..=GEMM_SMALL).contains(&m) && (2..=GEMM_SMALL / 2).contains(&p);
        if self.direct() || self.depth() < 3 || !small {
            return 1;
        }
        (GEMM_SMALL / p).min(n)
    }

    /// out (+)= weight × columns for every (batch, group) of `x` [N, Cin, H, W] into `out`
    /// [N, Cout, H', W'] (`accumulate`: out holds the bias), [`Product::batch`] elements of one
    /// group per GEMM: their im2col columns side by side in B [K, b·H'·W'], C [m, b·H'·W']
    /// scattered back to their planes. GEMMs run in parallel when there are several and the
    /// work is large; results are the same bits as one [`Product::run`] per element.
    pub fn run_batched(
        &self,
        x: &[f32],
        w: &[f32],
        out: &mut [f32],
        [n, groups]: [usize; 2],
        accumulate: bool,
    ) -> Result<()> {
        let ([cg, h, wd], m, k) = (self.input, self.cog, self.depth());
        let p = self.output[0] * self.output[1];
        let chunks = n.div_ceil(self.batch(n).max(1));
        // (x planes, out planes) of each (batch, group), in (batch, group) order.
        let mut planes: Vec<Option<_>> = (x.chunks(cg * h * wd).zip(out.chunks_mut(m * p)))
            .map(Some)
            .collect();
        let jobs: Vec<(usize, Vec<Planes>)> = (0..groups)
            .flat_map(|gi| (0..chunks).map(move |t| (gi, n * t / chunks..n * (t + 1) / chunks)))
            .map(|(gi, batch)| {
                let mine = batch.map(|b| planes[b * groups + gi].take().expect("each plane once"));
                (gi, mine.collect())
            })
            .collect();
        let gemm = |(gi, mut mine): (usize, Vec<Planes>), par: bool| {
            let ld = mine.len() * p;
            let a = &w[gi * m * k..(gi + 1) * m * k];
            let mut c = vec![0f32; m * ld];
            if accumulate {
                for (j, (_, o)) in mine.iter().enumerate() {
                    for (crow, orow) in c.chunks_mut(ld).zip(o.chunks(p)) {
                        crow[j * p..(j + 1) * p].copy_from_slice(orow);
                    }
                }
            }
            with_scratch(&COLS, k * ld, "the im2col scratch", |col| {
                // Above 256 outputs the crate takes its blocked path for either layout of B,
                // so B is stored transposed, [b·H'·W', K], whose rows are runs of the input.
                let b_strides = if m * ld > 256 {
                    for (xs, rows) in mine.iter().map(|t| t.0).zip(col.chunks_mut(p * k)) {
                        self.im2col_transposed(xs, rows);
                    }
                    [1, k]
                } else {
                    for (j, (xs, _)) in mine.iter().enumerate() {
                        self.im2col(xs, 0..self.output[0], 0, &mut col[j * p..], ld, par);
                    }
                    [ld, 1]
                };
                let [rs, cs] = b_strides;
                sgemm_with(par, m, ld, k, a, k, 1, col, rs, cs, &mut c, ld, accumulate);
            })?;
            for (j, (_, o)) in mine.iter_mut().enumerate() {
                for (crow, orow) in c.chunks(ld).zip(o.chunks_mut(p)) {
                    orow.copy_from_slice(&crow[j * p..(j + 1) * p]);
                }
            }
            Ok(())
        };
        let threads = rayon::current_num_threads();
        if jobs.len() == 1 || threads == 1 || n * groups * m * k * p < PAR_MIN_MACS {
            let par = jobs.len() == 1;
            return jobs.into_iter().try_for_each(|job| gemm(job, par));
        }
        jobs.into_par_iter().try_for_each(|job| gemm(job, false))
    }
}

/// Lanes of one vector of the packed kernel: a tile of c columns costs ⌈c / 8⌉ multiply-adds
/// per row and depth step (`gemm_avx2`).
const KERNEL_LANES: usize = NR / 2;

/// `n` tiles of consecutive rows covering `oh` output rows of `ow` columns, each within one row
/// of the balanced ⌊oh / n⌋..=⌈oh / n⌉ and accepted by `fits`, with the fewest kernel vectors
/// Σ ⌈rows·ow / [`KERNEL_LANES`]⌉ (e.g. 14×14 outputs as 8 + 6 rows, 112 + 84 columns: 25
/// vectors a row instead of 2 · 13 for 7 + 7), the most balanced such split on ties, and the
/// balanced split itself when W' is a multiple of the lanes or no split within bounds fits.
fn lane_aligned_tiles(
    [oh, ow]: [usize; 2],
    n: usize,
    fits: impl Fn(usize) -> bool,
) -> Vec<Range<usize>> {
    let balanced = || (0..n).map(|t| oh * t / n..oh * (t + 1) / n).collect();
    if ow % KERNEL_LANES == 0 {
        // Every split costs the same vectors.
        return balanced();
    }
    let (lo, hi) = ((oh / n).saturating_sub(1).max(1), oh.div_ceil(n) + 1);
    let sizes: Vec<usize> = (lo..=hi).filter(|&r| fits(r)).collect();
    // best[t][s]: (vectors, Σ rows², last tile's rows) of the cheapest t tiles covering s rows.
    let mut best = vec![vec![None::<(usize, usize, usize)>; oh + 1]; n + 1];
    best[0][0] = Some((0, 0, 0));
    for t in 1..=n {
        for s in 1..=oh {
            best[t][s] = (sizes.iter().filter(|&&r| r <= s))
                .filter_map(|&r| {
                    let (v, sq, _) = best[t - 1][s - r]?;
                    Some((v + (r * ow).div_ceil(KERNEL_LANES), sq + r * r, r))
                })
                .min();
        }
    }
    if best[n][oh].is_none() {
        return balanced();
    }
    let (mut tiles, mut end) = (Vec::with_capacity(n), oh);
    for t in (1..=n).rev() {
        let rows = best[t][end].expect("a split was found").2;
        tiles.push(end - rows..end);
        end -= rows;
    }
    tiles.reverse();
    tiles
}

/// The input planes of one (batch, group) and its output planes.
type Planes<'a> = (&'a [f32], &'a mut [f32]);

/// The im2col row of one tap for output rows `rows` of a stride-1 conv whose output is as wide
/// as its input `[h, w]`: output (oy, ox) reads input (oy + `dy` − `pt`, ox + `shift`), zero
/// outside the plane. The rows inside are one copy of the plane's run (shifted by `shift`,
/// |shift| < w), after which the few columns that wrapped into a neighbouring row are zeroed.
fn tap_rows(
    plane: &[f32],
    [h, w]: [usize; 2],
    rows: Range<usize>,
    dy: usize,
    pt: usize,
    shift: isize,
    crow: &mut [f32],
) {
    // Output rows [lo, hi) read input rows lo + dy − pt ≥ 0 up to < h.
    let lo = pt.saturating_sub(dy).clamp(rows.start, rows.end);
    let hi = (h + pt).saturating_sub(dy).clamp(lo, rows.end);
    let at = |oy: usize| (oy - rows.start) * w;
    crow[..at(lo)].fill(0.0);
    crow[at(hi)..].fill(0.0);
    if lo == hi {
        return;
    }
    let dst = &mut crow[at(lo)..at(hi)];
    // dst[t] = plane[first + t], clipped to the plane (the clipped ends are wrapped columns).
    let first = ((lo + dy - pt) * w) as isize + shift;
    let skip = (-first).max(0) as usize;
    let end = (first + dst.len() as isize).min(plane.len() as isize);
    let take = (end - first) as usize - skip;
    let from = (first + skip as isize) as usize;
    dst[skip..skip + take].copy_from_slice(&plane[from..from + take]);
    // Columns whose input column ox + shift lies outside [0, w).
    let edge = if shift < 0 {
        0..(-shift) as usize
    } else {
        w - shift as usize..w
    };
    for row in dst.chunks_mut(w) {
        row[edge.clone()].fill(0.0);
    }
}

/// `out`'s pointer shared by the tiles of one product, which write disjoint columns of it
/// (also the packed GEMM's column blocks).
#[derive(Clone, Copy)]
pub(crate) struct SyncPtr(pub(crate) *mut f32);

impl SyncPtr {
    /// The pointer (a method, so closures capture the whole `Send + Sync` wrapper).
    pub(crate) fn get(self) -> *mut f32 {
        self.0
    }
}

// SAFETY: the tiles that share the pointer write disjoint elements (see `Product::run`).
unsafe impl Send for SyncPtr {}
// SAFETY: as above.
unsafe impl Sync for SyncPtr {}

/// Run `f` on the first `len` elements of the thread's scratch `cell`, grown (capped by the
/// limits and allocated fallibly: a typed error, not an abort) when too short.
pub(super) fn with_scratch<R>(
    cell: &'static std::thread::LocalKey<RefCell<Vec<f32>>>,
    len: usize,
    what: &str,
    f: impl FnOnce(&mut [f32]) -> R,
) -> Result<R> {
    cell.with_borrow_mut(|v| {
        if v.len() < len {
            let bytes = (len as u64).saturating_mul(4);
            crate::limits::Limits::current()?.bytes(super::conv::MIL_NAME, what, bytes)?;
            grow_scratch(v, len, what)?;
        }
        Ok(f(&mut v[..len]))
    })
}

/// Grow `v` to at least `len` zero-initialised f32 (allocated fallibly: a Resource error naming
/// `what`, not an abort); the caller checks the memory limits.
pub(super) fn grow_scratch(v: &mut Vec<f32>, len: usize, what: &str) -> Result<()> {
    if v.len() < len {
        v.try_reserve_exact(len - v.len()).map_err(|_| {
            let bytes = (len as u64).saturating_mul(4);
            crate::limits::exceeded(
                super::conv::MIL_NAME,
                format!("cannot allocate {bytes} bytes of {what}"),
            )
        })?;
        v.resize(len, 0.0);
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ops::conv::Conv;
    use crate::ops::gemm::sgemm;
    use crate::ops::gemm::tests::rand_vec;
    use crate::ops::{Buf, Family, TensorType};

    /// The product of a conv on [cin, h, w] with this kernel, stride `s` on both axes,
    /// padding [top, bottom, left, right] and `cog` output channels (dilation 1).
    pub(crate) fn case_product(
        cin: usize,
        kernel: [usize; 2],
        [h, w]: [usize; 2],
        s: usize,
        pad: [usize; 4],
        cog: usize,
    ) -> Product {
        let [pt, pb, pl, pr] = pad;
        Product {
            input: [cin, h, w],
            kernel,
            output: [
                (h + pt + pb - kernel[0]) / s + 1,
                (w + pl + pr - kernel[1]) / s + 1,
            ],
            strides: [s; 2],
            dilations: [1, 1],
            pad,
            cog,
        }
    }

    /// The untiled product: the whole im2col matrix (built here, directly from the definition)
    /// times the weight in one `sgemm` call per (batch, group), as before tiling.
    fn whole(c: &Conv, x: &Buf, w: &Buf, bias: Option<&Buf>, out: &mut [f32]) {
        let ([n, cin, h, wd], [cout, cg, kh, kw]) = (
            <[usize; 4]>::try_from(&x.shape[..]).unwrap(),
            <[usize; 4]>::try_from(&w.shape[..]).unwrap(),
        );
        let ([sh, sw], [dh, dw], [pt, _, pl, _]) = (c.strides, c.dilations, c.pad);
        let (oh, ow) = (
            (h + c.pad[0] + c.pad[1] - dh * (kh - 1) - 1) / sh + 1,
            (wd + c.pad[2] + c.pad[3] - dw * (kw - 1) - 1) / sw + 1,
        );
        let (p, k, cog) = (oh * ow, cg * kh * kw, cout / c.groups);
        if let Some(b) = bias {
            for (plane, &v) in out.chunks_mut(p).zip(b.data.iter().cycle()) {
                plane.fill(v);
            }
        }
        for b in 0..n {
            for gi in 0..c.groups {
                let mut col = vec![0f32; k * p];
                for (r, row) in col.chunks_mut(p).enumerate() {
                    let (ci, ky, kx) = (gi * cg + r / (kh * kw), r / kw % kh, r % kw);
                    for (j, v) in row.iter_mut().enumerate() {
                        let iy = (j / ow * sh + ky * dh).checked_sub(pt).filter(|&i| i < h);
                        let ix = (j % ow * sw + kx * dw).checked_sub(pl).filter(|&i| i < wd);
                        if let (Some(iy), Some(ix)) = (iy, ix) {
                            *v = x.data[((b * cin + ci) * h + iy) * wd + ix];
                        }
                    }
                }
                let o = (b * cout + gi * cog) * p;
                let a = &w.data[gi * cog * k..];
                sgemm(
                    cog,
                    p,
                    k,
                    a,
                    k,
                    1,
                    &col,
                    p,
                    1,
                    &mut out[o..o + cog * p],
                    p,
                    bias.is_some(),
                );
            }
        }
    }

    /// Tiled products, in order on one thread and in parallel on two, and batched ones give
    /// every bit of one untiled product per element: narrow (m ≤ 64) and wide products, 1×1
    /// direct ones, strides, padding, dilation, groups, batches, with and without bias.
    #[test]
    fn tiles_and_threads_change_no_bit() {
        // (x shape, weight shape, strides, pad, dilations, groups, bias)
        type Case = (
            [usize; 4],
            [usize; 4],
            [usize; 2],
            [usize; 4],
            [usize; 2],
            usize,
            bool,
        );
        let cases: [Case; 11] = [
            (
                [1, 16, 40, 40],
                [32, 16, 3, 3],
                [1, 1],
                [1, 1, 1, 1],
                [1, 1],
                1,
                true,
            ),
            (
                [2, 8, 33, 29],
                [96, 8, 3, 3],
                [2, 2],
                [1, 0, 2, 1],
                [1, 1],
                1,
                false,
            ),
            (
                [1, 64, 30, 30],
                [80, 64, 1, 1],
                [1, 1],
                [0; 4],
                [1, 1],
                1,
                true,
            ),
            (
                [1, 12, 24, 24],
                [24, 6, 3, 3],
                [1, 1],
                [2, 2, 2, 2],
                [2, 2],
                2,
                true,
            ),
            (
                [1, 128, 9, 9],
                [130, 128, 3, 3],
                [1, 1],
                [1, 1, 1, 1],
                [1, 1],
                1,
                false,
            ),
            (
                [1, 3, 70, 70],
                [16, 3, 7, 7],
                [2, 2],
                [3, 3, 3, 3],
                [1, 1],
                1,
                true,
            ),
            // Two tiles of unequal rows on one thread (8 + 6 of 14, m ≤ 64).
            (
                [1, 128, 14, 14],
                [24, 128, 3, 3],
                [1, 1],
                [1, 1, 1, 1],
                [1, 1],
                1,
                true,
            ),
            // A weight gradient's correlation: 3×3 outputs, batch 16 in GEMMs of ≤ 7, K > 512.
            (
                [16, 64, 14, 14],
                [32, 64, 14, 14],
                [1, 1],
                [1, 1, 1, 1],
                [1, 1],
                1,
                false,
            ),
            // Batched with groups and bias, narrow strided im2col (4×4 outputs).
            (
                [5, 6, 7, 7],
                [8, 3, 3, 3],
                [2, 2],
                [1, 1, 1, 1],
                [1, 1],
                2,
                true,
            ),
            // Narrow im2col with dilation and uneven padding, batch 3 in one GEMM.
            (
                [3, 4, 11, 10],
                [6, 4, 3, 3],
                [2, 3],
                [2, 0, 1, 2],
                [2, 2],
                1,
                true,
            ),
            // One element, narrow wide-kernel im2col (5×5 outputs of an 18×15 kernel).
            (
                [1, 8, 20, 17],
                [4, 8, 18, 15],
                [1, 1],
                [1, 1, 1, 1],
                [1, 1],
                1,
                false,
            ),
        ];
        for (xs, ws, strides, pad, dilations, groups, with_bias) in cases {
            let c = Conv {
                strides,
                pad,
                dilations,
                groups,
            };
            let x = Buf {
                shape: xs.to_vec(),
                data: rand_vec(xs.iter().product(), 51),
            };
            let w = Buf {
                shape: ws.to_vec(),
                data: rand_vec(ws.iter().product(), 52),
            };
            let b = Buf {
                shape: vec![ws[0]],
                data: rand_vec(ws[0], 53),
            };
            let mut ins = vec![&x, &w];
            if with_bias {
                ins.push(&b);
            }
            let types: Vec<_> = ins
                .iter()
                .map(|b| TensorType::fp16(b.shape.clone()))
                .collect();
            let shape = c.infer(&types).unwrap().remove(0).shape;
            let mut want = Buf::zeros(&shape);
            whole(&c, &x, &w, with_bias.then_some(&b), &mut want.data);
            for threads in [1, 2] {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap();
                let mut got = [Buf::zeros(&shape)];
                pool.install(|| c.eval_im2col(&ins, &mut got)).unwrap();
                let bits = |b: &Buf| b.data.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                assert_eq!(
                    bits(&got[0]),
                    bits(&want),
                    "{xs:?} {ws:?} threads {threads}"
                );
            }
        }
    }

    /// The product of a k×k conv, stride 1, "same" padding, Cin → Cout on an out×out plane.
    fn square(cin: usize, k: usize, out: usize, cog: usize) -> Product {
        Product {
            input: [cin, out, out],
            kernel: [k, k],
            output: [out, out],
            strides: [1, 1],
            dilations: [1, 1],
            pad: [k / 2; 4],
            cog,
        }
    }

    /// The tile plan: several tiles for a large im2col product, a multiple of the threads when
    /// parallel, never a tile the `gemm` crate would run on another path, one tile when small.
    #[test]
    fn tile_plan_respects_the_gemm_paths() {
        // One tile covering all `oh` rows.
        let one_tile = |t: Vec<Range<usize>>, oh: usize| t.len() == 1 && t[0] == (0..oh);
        let big = square(64, 3, 56, 64).tile_rows(1);
        assert!(big.len() > 4, "{big:?}");
        assert_eq!(big.iter().map(Range::len).sum::<usize>(), 56);
        assert_eq!(square(64, 3, 56, 64).tile_rows(2).len() % 2, 0);
        // m = 64: every tile keeps more than 64 columns, and a 64-column product stays whole.
        for rows in square(64, 3, 12, 64).tile_rows(2) {
            assert!(rows.len() * 12 > GEMM_SMALL, "{rows:?}");
        }
        assert!(one_tile(square(64, 3, 8, 64).tile_rows(2), 8));
        // m > 64: 7×7 outputs split for two threads, not for one.
        assert_eq!(square(512, 3, 7, 512).tile_rows(2).len(), 2);
        assert!(one_tile(square(512, 3, 7, 512).tile_rows(1), 7));
        // 14×14 outputs in two tiles on one thread: 8 + 6 rows (112 + 84 columns, 25 kernel
        // vectors a row) rather than 7 + 7 (2 · 13); balanced when the tiles run in parallel.
        assert_eq!(square(128, 3, 14, 24).tile_rows(1), [0..8, 8..14]);
        assert_eq!(square(128, 3, 14, 24).tile_rows(2), [0..7, 7..14]);
        // 28×28 outputs of a depth-1152 product in six tiles: 4 rows (112 columns) or 6, not 5.
        let six = square(128, 3, 28, 128).tile_rows(1);
        let vectors: usize = six.iter().map(|r| (r.len() * 28).div_ceil(8)).sum();
        assert_eq!((six.len(), vectors), (6, 98), "{six:?}");
        // 1×1 direct: one tile on one thread.
        assert!(one_tile(square(64, 1, 56, 256).tile_rows(1), 56));
        assert!(one_tile(square(1, 3, 56, 1).tile_rows(2), 56));
    }

    /// Pointwise products split over threads from [`PAR_MIN_MACS_DIRECT`], others from
    /// [`PAR_MIN_MACS`]: MobileNetV3-small's 1×1 convs below it stay whole on 2 threads, its
    /// 16→72 at 56×56, ResNet-50's 64→256 at 56×56 and a 3×3 product of 1.8 M split.
    #[test]
    fn pointwise_products_split_from_their_own_threshold() {
        // (Cin, kernel, output size, Cout, split on 2 threads)
        let cases = [
            (72, 1, 28, 24, false),
            (88, 1, 28, 24, false),
            (24, 1, 28, 96, false),
            (40, 1, 14, 240, false),
            (96, 1, 7, 576, false),
            (576, 1, 7, 96, false),
            (16, 1, 56, 72, true),
            (64, 1, 56, 256, true),
            (16, 3, 28, 16, true),
        ];
        for (cin, k, out, cog, split) in cases {
            let p = square(cin, k, out, cog);
            let tag = format!("{cin}→{cog} k{k} at {out}×{out}");
            assert_eq!(p.parallel(2), split, "{tag}");
            assert!(!p.parallel(1), "{tag}");
            assert_eq!(p.tile_rows(2).len() > 1, split, "{tag}");
        }
    }

    /// The packed path (im2col written as panels, edge half panels, 1×1 inputs read in place
    /// or copied into panels) gives every bit of the crate path on awkward shapes: Cout 1, 5, 6, 7, 64, 130;
    /// output widths giving 1 to 196 columns per tile; depth one below, at and above the
    /// crate's depth block; strides 1 and 2, padding, dilation, a second group; with and
    /// without bias; 1 and 2 threads.
    #[test]
    fn packed_path_matches_the_crate_bit_for_bit() {
        // (Cin/g, kernel, input [H, W], stride, pad, dilation, Cout/g)
        let mut cases = vec![
            (3, 3, [9, 9], 1, 1, 1, 1),
            (4, 3, [3, 7], 1, 1, 1, 5),
            (5, 3, [5, 15], 1, 1, 1, 6),
            (6, 3, [4, 16], 1, 1, 1, 7),
            (7, 3, [9, 17], 1, 1, 1, 64),
            (16, 3, [14, 14], 2, 1, 1, 64),
            (8, 3, [7, 7], 1, 1, 1, 130),
            (9, 5, [13, 11], 1, 2, 2, 33),
            (64, 1, [14, 14], 1, 0, 1, 64),
            (64, 1, [7, 7], 1, 0, 1, 130),
            (24, 1, [28, 28], 1, 0, 1, 88),
            (40, 1, [14, 14], 1, 0, 1, 200),
            (300, 1, [7, 7], 1, 0, 1, 16),
            (3, 7, [30, 30], 2, 3, 1, 64),
        ];
        // 1×1 stride-2 convs whose depth is the crate's depth block ± 1 and past two blocks.
        if let Some(kc) = gemm_packed::depth_block(256, 49, 4096) {
            assert!(kc < 4096, "depth block {kc}");
            cases.extend([kc - 1, kc, kc + 1, 2 * kc + 1].map(|k| (k, 1, [13, 13], 2, 0, 1, 256)));
        }
        // 3×3 convs whose depth passes one and two of the crate's depth blocks (AVX-512 tile).
        if let Some(kc) = gemm_packed::depth_block_wide(70, 81, 4096) {
            cases.extend([kc / 9 + 1, 2 * kc / 9 + 1].map(|c| (c, 3, [9, 9], 1, 1, 1, 70)));
        }
        let mut ran_packed = false;
        for (ci, &(cin, kk, [h, w], stride, pad, dil, cog)) in cases.iter().enumerate() {
            let span = dil * (kk - 1) + 1;
            let out = [
                (h + 2 * pad - span) / stride + 1,
                (w + 2 * pad - span) / stride + 1,
            ];
            let product = Product {
                input: [cin, h, w],
                kernel: [kk, kk],
                output: out,
                strides: [stride; 2],
                dilations: [dil; 2],
                pad: [pad; 4],
                cog,
            };
            for threads in [1, 2] {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap();
                ran_packed |= pool.install(|| {
                    let tiles = product.tile_rows(threads);
                    let n = tiles[0].len() * out[1];
                    product.packed_block(n, tiles.len() == 1).is_some()
                });
            }
            assert_packed_matches_crate(&product, 10 * ci as u64, &[1, 2], &format!("case {ci}"));
        }
        let packed_here =
            crate::ops::gemm_avx2::available() || crate::ops::gemm_avx512::available();
        assert!(ran_packed || !packed_here);
    }

    /// `run_on` on the packed kernel (and the direct path) gives the bits of the `gemm` crate's
    /// product for group 1 of a two-group weight, writing or accumulating onto a bias, on each
    /// of `threads` (random operands from `seed`).
    pub(crate) fn assert_packed_matches_crate(
        product: &Product,
        seed: u64,
        threads: &[usize],
        tag: &str,
    ) {
        let ([cin, h, w], [oh, ow], cog, k) =
            (product.input, product.output, product.cog, product.depth());
        let (x, wt) = (rand_vec(cin * h * w, seed), rand_vec(2 * cog * k, seed + 1));
        let bias = rand_vec(cog * oh * ow, seed + 2);
        for &threads in threads {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            for accumulate in [false, true] {
                let (mut want, mut got) = (bias.clone(), bias.clone());
                pool.install(|| {
                    product.run_on((&x, &wt, 1), &mut want, accumulate, false)?;
                    product.run_on((&x, &wt, 1), &mut got, accumulate, true)
                })
                .unwrap();
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                let tag = format!("{tag} threads {threads} accumulate {accumulate}");
                assert_eq!(bits(&got), bits(&want), "{tag}");
            }
        }
    }

    /// Achieved throughput of ResNet-18/50 and MobileNetV3-small conv products (batch 1, one
    /// group) on one thread: `Product::run` through the `gemm` crate and through the packed
    /// kernel (1×1 convs: `conv_pointwise` where it reads in place), alternating; for im2col
    /// products also the packed path's two
    /// phases timed apart per tile (panel writing, kernel). A benchmark, not a test: run with
    /// `--ignored --nocapture` in release; no timing is asserted, only that all give the same
    /// bits.
    #[test]
    #[ignore]
    fn throughput_per_conv() {
        // (Cin, kernel, input size, stride, Cout)
        let shapes = [
            (3, 7, 224, 2, 64),
            (3, 3, 224, 2, 16),
            (64, 3, 56, 1, 64),
            (64, 3, 56, 2, 128),
            (128, 3, 28, 1, 128),
            (64, 1, 56, 2, 128),
            (128, 3, 28, 2, 256),
            (256, 3, 14, 1, 256),
            (256, 3, 14, 2, 512),
            (512, 3, 7, 1, 512),
            (256, 1, 14, 2, 512),
            (64, 1, 56, 1, 256),
            (256, 1, 56, 1, 64),
            (512, 1, 28, 1, 128),
            (1024, 1, 14, 1, 256),
            (2048, 1, 7, 1, 512),
            (16, 1, 56, 1, 72),
            (24, 1, 28, 1, 88),
            (88, 1, 28, 1, 24),
            (40, 1, 14, 1, 240),
            (240, 1, 14, 1, 40),
            (96, 1, 7, 1, 576),
            (576, 1, 7, 1, 96),
        ];
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let median = |mut t: Vec<f64>| {
            t.sort_by(f64::total_cmp);
            t[t.len() / 2]
        };
        for (cin, kk, size, stride, cout) in shapes {
            let pad = kk / 2;
            let out = (size + 2 * pad - kk) / stride + 1;
            let product = Product {
                input: [cin, size, size],
                kernel: [kk, kk],
                output: [out, out],
                strides: [stride; 2],
                dilations: [1, 1],
                pad: [pad; 4],
                cog: cout,
            };
            let (m, k, p) = (cout, product.depth(), out * out);
            let (x, w) = (rand_vec(cin * size * size, 1), rand_vec(m * k, 2));
            let (mut c, mut c2) = (vec![0f32; m * p], vec![0f32; m * p]);
            let tiles = product.tile_rows(1);
            let mut packed = || product.run_on((&x, &w, 0), &mut c2, false, true).unwrap();
            let mut crate_path = || product.run_on((&x, &w, 0), &mut c, false, false).unwrap();
            let mut c4 = vec![0f32; m * p];
            let mut lanes = || product.run_lanes((&x, &w), &mut c4, false).unwrap();
            let clock = || crate::exec::clock::process_cpu_us().unwrap();
            // The packed path of an im2col product in its two phases, timed apart per tile:
            // (panel writing µs with the input's phase split, kernel µs).
            let (mut c3, mut panels3) = (vec![0f32; m * p], vec![0f32; panels_len(k, p)]);
            let mut buf = vec![0f32; k * p];
            let mut phases = || {
                let t_split = clock();
                let timed = product.with_panel_source(
                    &x,
                    || !product.direct(),
                    |source| {
                        let mut sum = (clock() - t_split, 0.0);
                        for rows in tiles.iter().filter(|_| !product.direct()) {
                            let (n, start) = (rows.len() * out, rows.start * out);
                            let Some(kc) = gemm_packed::depth_block(m, n, k) else {
                                continue;
                            };
                            let panels = &mut panels3[..panels_len(k, n)];
                            let t0 = clock();
                            match source {
                                PanelSource::Phases(planes) => {
                                    product.phase_panels(planes, rows.clone(), panels)
                                }
                                PanelSource::Rows => {
                                    product.rows_panels(&x, rows.clone(), panels, &mut buf)
                                }
                            }
                            let t1 = clock();
                            let dst = &mut c3[start..];
                            // SAFETY: `dst` is borrowed mutably; the operand checks run inside.
                            unsafe {
                                let c = (dst.as_mut_ptr(), dst.len());
                                let a = (&w[..], k);
                                gemm_packed::gemm_raw(kc, false, (m, n, k), a, panels, c, p, false)
                            };
                            sum = (sum.0 + t1 - t0, sum.1 + clock() - t1);
                        }
                        sum
                    },
                );
                timed.unwrap()
            };
            let (mut t_crate, mut t_packed, mut t_phases) = (vec![], vec![], vec![]);
            let mut t_lanes = vec![];
            pool.install(|| {
                for _ in 0..15 {
                    let t0 = clock();
                    (0..5).for_each(|_| crate_path());
                    let t1 = clock();
                    (0..5).for_each(|_| packed());
                    t_crate.push((t1 - t0) / 5.0);
                    t_packed.push((clock() - t1) / 5.0);
                    let five = (0..5).map(|_| phases());
                    t_phases.push(five.fold((0.0, 0.0), |s, t| (s.0 + t.0 / 5.0, s.1 + t.1 / 5.0)));
                    let t2 = clock();
                    let ran = (0..5).all(|_| lanes());
                    t_lanes.push(ran.then(|| (clock() - t2) / 5.0));
                }
            });
            let gflops = |t: f64| 2.0 * (m * k * p) as f64 / t / 1e3;
            let phase = |f: fn(&(f64, f64)) -> f64| median(t_phases.iter().map(f).collect());
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            let (t_crate, t_packed) = (median(t_crate), median(t_packed));
            let (t_panels, t_kernel) = (phase(|t| t.0), phase(|t| t.1));
            let t_lanes: Option<Vec<f64>> = t_lanes.into_iter().collect();
            let lanes = match t_lanes.map(median) {
                Some(t) => {
                    assert_eq!(
                        bits(&c),
                        bits(&c4),
                        "lanes {cin} {kk} {size} {stride} {cout}"
                    );
                    format!("{t:.0} µs ({:.1}) | {:.3}", gflops(t), t / t_crate)
                }
                None => "— | —".into(),
            };
            assert_eq!(bits(&c), bits(&c2), "{cin} {kk} {size} {stride} {cout}");
            if t_kernel > 0.0 {
                assert_eq!(
                    bits(&c),
                    bits(&c3),
                    "phases {cin} {kk} {size} {stride} {cout}"
                );
            }
            let phases = match t_kernel > 0.0 {
                true => format!(
                    "{t_panels:.0} µs | {t_kernel:.0} µs ({:.1})",
                    gflops(t_kernel)
                ),
                false => "— | —".into(),
            };
            println!(
                "| ({m}, {p}, {k}) {kk}×{kk}/{stride} | {} × {} | {t_crate:.0} µs ({:.1}) | {t_packed:.0} µs ({:.1}) | {:.3} | {phases} | {lanes} |",
                tiles.len(),
                tiles[0].len() * out,
                gflops(t_crate),
                gflops(t_packed),
                t_packed / t_crate,
            );
        }
    }
}
