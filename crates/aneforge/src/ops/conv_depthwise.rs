//! Direct depthwise convolution (one filter per channel: groups = Cin = Cout), with no im2col
//! buffer: each input plane is copied once into a zero-padded scratch plane whose columns are
//! split by phase (column mod stride), so every tap of an output row reads a contiguous run;
//! then branch-free loops over blocks of output columns apply all taps in registers.
//!
//! It reproduces the GEMM path bit for bit. There each channel is one `sgemm` with m = 1,
//! n = H'·W' (≥ 2) and k = kH·kW (≥ 3), which the `gemm` crate runs as a column-major GEMV:
//! acc = bias (or, without bias, the first tap's product x·w), then acc = fma(x, w, acc) for
//! each later tap in (ky, kx) order, a tap in the padding reading x = 0. This kernel performs
//! the same operations in the same order (padding taps included, since fma(0, w, −0) is +0).

use std::cell::RefCell;

use rayon::prelude::*;

use super::conv::gather_strided;
use super::conv_gemm::grow_scratch;
use super::depthwise_lanes;
use super::depthwise_reuse;
use super::depthwise_rows::{copy_rows, split_pairs};
use crate::error::Result;
use crate::limits::Limits;

/// Geometry of one depthwise conv: input planes [H, W], kernel [kH, kW], output planes [H', W'].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Depthwise {
    pub input: [usize; 2],
    pub kernel: [usize; 2],
    pub output: [usize; 2],
    pub strides: [usize; 2],
    pub dilations: [usize; 2],
    /// Padding (top, bottom, left, right).
    pub pad: [usize; 4],
}

/// Tap multiply-adds (outputs × kH·kW) from which a conv's planes are shared out over the
/// rayon pool: MobileNetV3's 5×5 convs on 7×7 and 14×14 planes have fewer than 2^15 outputs
/// but take 50–130 µs, far more than a join costs (BENCHMARKS.md, h-mnet6 round 16).
pub(super) const PAR_MIN_TAPS: usize = 1 << 17;

/// Output plane sizes (H'·W') up to which the lane kernel runs at stride 1.
const LANES_MAX_PLANE: usize = 256;

/// Output plane sizes up to which it runs when strided (measured up to 56×56 from 112×112; the
/// bound keeps its interleaved scratch, 32 bytes per padded input position, near 0.5 MiB).
const LANES_MAX_STRIDED: usize = 64 * 64;

/// Values after the padded scratch plane, so rows narrower than 8 outputs read one whole 8-lane
/// vector per tap (the lanes past the row are never kept).
const SLACK: usize = 8;

thread_local! {
    /// The padded scratch plane, reused across planes, convs and calls, and the geometry whose
    /// padding zeros it holds (the next plane of that geometry only rewrites the input columns).
    static PADDED: RefCell<(Vec<f32>, Option<Depthwise>)> = const { RefCell::new((Vec::new(), None)) };
}

/// Layout of the padded scratch plane: `rows` rows of `stride` phases of `width` columns; padded
/// column c (input column c − pad_left) lives at phase c mod stride, index c / stride.
#[derive(Clone, Copy)]
struct Padded {
    rows: usize,
    phases: usize,
    width: usize,
}

/// The columns of one phase of a padded row that read the input: `lo..hi`, reading input
/// columns `from`, `from + stride`, …; the others are padding zeros.
#[derive(Clone, Copy)]
struct Span {
    lo: usize,
    hi: usize,
    from: usize,
}

impl Padded {
    fn row_len(&self) -> usize {
        self.phases * self.width
    }
    fn len(&self) -> usize {
        self.rows * self.row_len()
    }
}

impl Depthwise {
    /// Whether the GEMM path would take the GEMV this kernel reproduces (k ≥ 3 taps, ≥ 2 outputs).
    pub fn matches_gemv(&self) -> bool {
        self.kernel[0] * self.kernel[1] >= 3 && self.output[0] * self.output[1] >= 2
    }

    /// Values per input plane, taps per filter, values per output plane.
    pub(super) fn sizes(&self) -> [usize; 3] {
        [self.input, self.kernel, self.output].map(|[a, b]| a * b)
    }

    /// The scratch layout: the padded rows and columns the outputs read (at most the padded input).
    fn padded(&self) -> Padded {
        let span = |a: usize| {
            (self.output[a] - 1) * self.strides[a] + (self.kernel[a] - 1) * self.dilations[a] + 1
        };
        Padded {
            rows: span(0),
            phases: self.strides[1],
            width: span(1).div_ceil(self.strides[1]),
        }
    }

    /// Run every plane: `x` [planes, H, W], `w` [C, kH, kW], optional `bias` [C], `out`
    /// [planes, H', W'] fully written; plane i uses filter i mod C. Panics on mismatched lengths;
    /// errors (Resource) when the scratch plane exceeds the memory limits.
    pub fn run(&self, x: &[f32], w: &[f32], bias: Option<&[f32]>, out: &mut [f32]) -> Result<()> {
        self.run_then(x, w, bias, out, |_, _| {})
    }

    /// [`Self::run`], then `post(i, planes)` on the output planes i.. (one or more whole
    /// planes, every plane once) right after they are written (while they are in cache),
    /// instead of one more pass over the whole output.
    pub fn run_then(
        &self,
        x: &[f32],
        w: &[f32],
        bias: Option<&[f32]>,
        out: &mut [f32],
        post: impl Fn(usize, &mut [f32]) + Sync,
    ) -> Result<()> {
        let [hw, taps, p] = self.sizes();
        let c = w.len() / taps;
        assert!(
            x.len() / hw == out.len() / p && c > 0 && (x.len() / hw).is_multiple_of(c),
            "depthwise: input, filter and output plane counts disagree"
        );
        if self.takes_lanes() {
            return depthwise_lanes::run_then(self, x, w, bias, out, &post);
        }
        self.run_planes(x, w, bias, out, post)
    }

    /// Whether the lane kernel (`depthwise_lanes`, eight channels per vector) computes this
    /// geometry, on AVX2 + FMA CPUs: small output planes, larger ones when strided (measured
    /// faster on MobileNetV3's, slower from 28×28 at stride 1: `throughput_per_shape`).
    fn takes_lanes(&self) -> bool {
        let (plane, strided) = (self.output[0] * self.output[1], self.strides != [1, 1]);
        let fits = plane <= LANES_MAX_PLANE || (strided && plane <= LANES_MAX_STRIDED);
        fits && depthwise_lanes::available()
    }

    /// Whether the per-plane kernel reuses input rows across output rows here
    /// (`depthwise_reuse`: stride 1, 3×3 or 5×5, rows of ≥ 8). The lane kernel still takes
    /// planes up to 16×16: on 14×14 the two measured even for 3×3 and 3–5 % apart for 5×5 in
    /// `throughput_per_shape`, but slower in MobileNetV3 with the conv epilogue run per plane.
    fn reuses_rows(&self) -> bool {
        depthwise_reuse::fits(self.kernel, [self.strides, self.dilations], self.output)
    }

    /// [`Self::run_then`] one plane at a time (`post` on each plane alone), plane counts
    /// checked by the caller.
    pub(super) fn run_planes(
        &self,
        x: &[f32],
        w: &[f32],
        bias: Option<&[f32]>,
        out: &mut [f32],
        post: impl Fn(usize, &mut [f32]) + Sync,
    ) -> Result<()> {
        let [hw, taps, p] = self.sizes();
        let c = w.len() / taps;
        let pad = self.padded();
        let len = pad.len() + SLACK;
        // The plane, its slack, then room for the even / odd split of an input plane.
        let room = len + if self.splits_pairs() { hw } else { 0 };
        let bytes = (room as u64).saturating_mul(4);
        Limits::current()?.bytes("conv", "the depthwise padded scratch plane", bytes)?;
        let (offsets, spans) = (self.tap_offsets(pad), self.spans(pad));
        let plane = |(i, o): (usize, &mut [f32])| {
            let k = i % c;
            let b = bias.map(|b| b[k]);
            let (xs, f) = (&x[i * hw..(i + 1) * hw], &w[k * taps..(k + 1) * taps]);
            PADDED.with_borrow_mut(|(s, zeroed)| {
                grow_scratch(s, room, "depthwise scratch")?;
                let padding = *zeroed != Some(*self);
                *zeroed = None;
                let (plane, split) = s.split_at_mut(len);
                self.fill(xs, pad, &spans, padding, &mut plane[..pad.len()], split);
                *zeroed = Some(*self);
                self.plane(&s[..len], pad, &offsets, f, b, o);
                post(i, o);
                Ok(())
            })
        };
        if out.len() * taps >= PAR_MIN_TAPS {
            out.par_chunks_mut(p).enumerate().try_for_each(plane)
        } else {
            out.chunks_mut(p).enumerate().try_for_each(plane)
        }
    }

    /// Offset in the scratch plane of tap (ky, kx) for output (0, 0), taps in (ky, kx) order.
    fn tap_offsets(&self, pad: Padded) -> Vec<usize> {
        let ([kh, kw], [dh, dw], sw) = (self.kernel, self.dilations, self.strides[1]);
        (0..kh * kw)
            .map(|t| {
                let c = (t % kw) * dw;
                (t / kw) * dh * pad.row_len() + (c % sw) * pad.width + c / sw
            })
            .collect()
    }

    /// Per phase of a padded row, which of its columns read the input (see [`Span`]).
    fn spans(&self, pad: Padded) -> Vec<Span> {
        let (w, pl, sw) = (self.input[1], self.pad[2], self.strides[1]);
        (0..pad.phases)
            .map(|ph| {
                // Padded column j·sw + ph reads input column j·sw + ph − pl, inside the input
                // for j in lo..hi.
                let lo = pl.saturating_sub(ph).div_ceil(sw).min(pad.width);
                let hi = (w + pl)
                    .saturating_sub(ph)
                    .div_ceil(sw)
                    .clamp(lo, pad.width);
                let from = if hi > lo { lo * sw + ph - pl } else { 0 };
                Span { lo, hi, from }
            })
            .collect()
    }

    /// Whether a plane is filled from its even and odd columns split apart first (stride 2,
    /// even width), which turns every phase row into a contiguous copy.
    fn splits_pairs(&self) -> bool {
        self.strides[1] == 2 && self.input[1].is_multiple_of(2)
    }

    /// Copy input plane `xs` [H, W] into the scratch plane `s`, zeroing all of `s` first when
    /// `padding` (else its padding zeros are there from the previous plane); `spans` from
    /// [`Self::spans`]; `split` is room for H·W values when [`Self::splits_pairs`].
    fn fill(
        &self,
        xs: &[f32],
        pad: Padded,
        spans: &[Span],
        padding: bool,
        s: &mut [f32],
        split: &mut [f32],
    ) {
        if padding {
            s.fill(0.0);
        }
        let ([h, w], pt, sw, step) = (self.input, self.pad[0], self.strides[1], pad.row_len());
        // Input rows 0..rows land in padded rows pt.. (the rest of them are read by no output).
        let rows = h.min(pad.rows.saturating_sub(pt));
        if rows == 0 {
            return;
        }
        let s = &mut s[pt * step..];
        let split = &mut split[..if self.splits_pairs() { rows * w } else { 0 }];
        if !split.is_empty() {
            split_pairs(&xs[..rows * w], split);
        }
        let half = w / 2;
        for (ph, sp) in spans.iter().enumerate() {
            let (n, dst) = (sp.hi - sp.lo, &mut s[ph * pad.width + sp.lo..]);
            if n == 0 {
                continue;
            }
            match sw {
                1 => copy_rows(&xs[sp.from..], w, dst, step, [rows, n]),
                // Input column `from` + 2j is column (from / 2) + j of the even or odd half.
                2 if !split.is_empty() => {
                    let (evens, odds) = split.split_at(rows * half);
                    let src = if sp.from % 2 == 0 { evens } else { odds };
                    copy_rows(&src[sp.from / 2..], half, dst, step, [rows, n]);
                }
                _ => {
                    for (iy, row) in xs.chunks_exact(w).take(rows).enumerate() {
                        gather_strided(&row[sp.from..], sw, &mut dst[iy * step..][..n]);
                    }
                }
            }
        }
    }

    /// One channel from its scratch plane `s` (the padded plane, then [`SLACK`] values) through
    /// filter `f` [kH, kW] into `o` [H', W'].
    fn plane(
        &self,
        s: &[f32],
        pad: Padded,
        offsets: &[usize],
        f: &[f32],
        bias: Option<f32>,
        o: &mut [f32],
    ) {
        let (ow, step) = (self.output[1], self.strides[0] * pad.row_len());
        // The farthest read is s[(H'−1)·step + max offset + max(W', 8) − 1]: every read is in
        // bounds.
        let far = offsets.iter().max().copied().unwrap_or(0);
        let last = (self.output[0] - 1) * step + far + ow.max(SLACK) - 1;
        assert!(
            last < s.len() && offsets.len() == f.len(),
            "depthwise: scratch too small"
        );
        if self.reuses_rows() {
            // SAFETY: `fits` holds; at stride and dilation 1, offsets[ky·K + kx] = ky·step + kx,
            // so every read is one of those checked above.
            return unsafe { depthwise_reuse::output_plane(s.as_ptr(), step, f, bias, o, ow) };
        }
        // SAFETY: s[oy·step + offsets[t] + ox] for oy < H', ox < max(W', 8) is at most `last`,
        // checked above.
        unsafe { output_plane(s.as_ptr(), step, offsets, f, bias, o, ow) };
    }
}

/// Output plane `o` [rows, n]: row oy as [`output_row_scalar`] computes it from
/// `base.add(oy · step)`.
///
/// # Safety
/// `base.add(oy · step + offsets[t] + ox)` must be readable for every tap t, row oy and
/// ox < max(n, [`SLACK`]) (the vector kernel reads rows narrower than 8 as 8 lanes).
unsafe fn output_plane(
    base: *const f32,
    step: usize,
    offsets: &[usize],
    f: &[f32],
    bias: Option<f32>,
    o: &mut [f32],
    n: usize,
) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("fma") && std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the features the function is compiled for were just detected; reads as above.
        return unsafe { x86::output_plane(base, step, offsets, f, bias, o, n) };
    }
    for (oy, row) in o.chunks_mut(n).enumerate() {
        // SAFETY: as above.
        unsafe { output_row_scalar(base.add(oy * step), offsets, f, bias, row) };
    }
}

/// Output row `row`: row[ox] = (bias or first product) then fma over the taps of
/// `base[offsets[t] + ox]`, one column at a time (`mul_add` rounds once, like the vector fma).
///
/// # Safety
/// `base.add(offsets[t] + ox)` must be readable for every tap t and ox < row.len().
pub(super) unsafe fn output_row_scalar(
    base: *const f32,
    offsets: &[usize],
    f: &[f32],
    bias: Option<f32>,
    row: &mut [f32],
) {
    for (ox, o) in row.iter_mut().enumerate() {
        let x = |t: usize| unsafe { *base.add(offsets[t] + ox) };
        let (mut acc, first) = match bias {
            Some(b) => (b, 0),
            None => (x(0) * f[0], 1),
        };
        for (t, &w) in f.iter().enumerate().skip(first) {
            acc = x(t).mul_add(w, acc);
        }
        *o = acc;
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// Output columns per block of a lone row: 4 vectors of 8, four independent fma chains.
    const BLOCK: usize = 32;

    /// Output rows computed together: 4 rows of 2 vectors give eight independent fma chains
    /// even when rows are narrow (7 or 14 columns).
    const ROWS: usize = 4;

    /// Output rows computed together when rows are narrower than 8 columns: one vector each,
    /// eight independent fma chains.
    const NARROW_ROWS: usize = 8;

    /// [`super::output_plane`] with AVX2 + FMA: groups of [`ROWS`] rows, then the 2 or 3 rows
    /// left as one group, a lone last row by [`output_row`]; rows narrower than 8 by
    /// [`narrow_plane`].
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA; reads as in [`super::output_plane`].
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn output_plane(
        base: *const f32,
        step: usize,
        offsets: &[usize],
        f: &[f32],
        bias: Option<f32>,
        o: &mut [f32],
        n: usize,
    ) {
        if n < 8 {
            return narrow_plane(base, step, offsets, f, bias, o, n);
        }
        let rows = o.len() / n;
        let out = o.as_mut_ptr();
        let at = |oy: usize| (base.add(oy * step), out.add(oy * n));
        // Values of the plane from row oy on (a narrow row's 8-lane store may spill into them).
        let room = |oy: usize| (rows - oy) * n;
        let mut oy = 0;
        while oy + ROWS <= rows {
            row_group::<ROWS>(at(oy), step, offsets, f, bias, [n, room(oy)]);
            oy += ROWS;
        }
        match rows - oy {
            3 => row_group::<3>(at(oy), step, offsets, f, bias, [n, room(oy)]),
            2 => row_group::<2>(at(oy), step, offsets, f, bias, [n, room(oy)]),
            1 => {
                let row = std::slice::from_raw_parts_mut(out.add(oy * n), n);
                output_row(base.add(oy * step), offsets, f, bias, row);
            }
            _ => {}
        }
    }

    /// [`output_plane`] for rows narrower than 8 columns: groups of [`NARROW_ROWS`] rows, then
    /// the rows left as one group.
    ///
    /// # Safety
    /// As [`output_plane`]; n < 8.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn narrow_plane(
        base: *const f32,
        step: usize,
        offsets: &[usize],
        f: &[f32],
        bias: Option<f32>,
        o: &mut [f32],
        n: usize,
    ) {
        let rows = o.len() / n;
        let out = o.as_mut_ptr();
        // Row oy's input and output, and the values of the plane from row oy on (a narrow
        // row's 8-lane store may spill into them).
        let at = |oy: usize| ((base.add(oy * step), out.add(oy * n)), [n, (rows - oy) * n]);
        let mut oy = 0;
        while oy + NARROW_ROWS <= rows {
            let (g, room) = at(oy);
            narrow_group::<NARROW_ROWS>(g, step, offsets, f, bias, room);
            oy += NARROW_ROWS;
        }
        let (g, room) = at(oy);
        match rows - oy {
            7 => narrow_group::<7>(g, step, offsets, f, bias, room),
            6 => narrow_group::<6>(g, step, offsets, f, bias, room),
            5 => narrow_group::<5>(g, step, offsets, f, bias, room),
            4 => narrow_group::<4>(g, step, offsets, f, bias, room),
            3 => narrow_group::<3>(g, step, offsets, f, bias, room),
            2 => narrow_group::<2>(g, step, offsets, f, bias, room),
            1 => narrow_group::<1>(g, step, offsets, f, bias, room),
            _ => {}
        }
    }

    /// R consecutive output rows of n < 8 columns as in [`row_group`]: one 8-lane block each,
    /// the lanes past a row landing in later rows (written after it), and only a store that
    /// would leave `room` masked.
    ///
    /// # Safety
    /// As [`row_group`]; n < 8.
    #[inline(always)]
    unsafe fn narrow_group<const R: usize>(
        (base, out): (*const f32, *mut f32),
        step: usize,
        offsets: &[usize],
        f: &[f32],
        bias: Option<f32>,
        [n, room]: [usize; 2],
    ) {
        let bases = std::array::from_fn(|r| base.add(r * step));
        let outs = std::array::from_fn(|r| out.add(r * n));
        let masks = std::array::from_fn(|r| (r * n + 8 > room).then(|| tail_mask(n)));
        block::<R, 1>(bases, [0], offsets, f, bias, outs, masks);
    }

    /// R consecutive output rows of `n` columns starting at `(base, out)` (row r reads from
    /// `base + r·step`, writes at `out + r·n`; `room` values are writable from `out`): blocks
    /// of 16 columns, then the 9 to 15 columns left as one two-vector block whose second vector
    /// ends at column n (2·R independent chains, as the 16-column blocks), or up to 8 left as
    /// one 8-column block ending at column n (recomputed columns get the same bits), no masks.
    /// Rows narrower than 8 take one 8-lane block each: the lanes past a row land in later
    /// rows, which are written after it, and only a store that would leave `room` is masked.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA; reads as in [`super::output_plane`]; r·n + n ≤ `room` for r < R.
    #[inline(always)]
    unsafe fn row_group<const R: usize>(
        (base, out): (*const f32, *mut f32),
        step: usize,
        offsets: &[usize],
        f: &[f32],
        bias: Option<f32>,
        [n, room]: [usize; 2],
    ) {
        let bases: [*const f32; R] = std::array::from_fn(|r| base.add(r * step));
        let outs: [*mut f32; R] = std::array::from_fn(|r| out.add(r * n));
        let at = |ox: usize| (bases.map(|b| b.add(ox)), outs.map(|p| p.add(ox)));
        if n < 8 {
            return narrow_group::<R>((base, out), step, offsets, f, bias, [n, room]);
        }
        let mut ox = 0;
        while ox + 16 <= n {
            let (b, o) = at(ox);
            block::<R, 2>(b, [0, 8], offsets, f, bias, o, [None; R]);
            ox += 16;
        }
        if n - ox > 8 {
            let (b, o) = at(ox);
            block::<R, 2>(b, [0, n - 8 - ox], offsets, f, bias, o, [None; R]);
        } else if ox < n {
            let (b, o) = at(n - 8);
            block::<R, 1>(b, [0], offsets, f, bias, o, [None; R]);
        }
    }

    /// Lanes 0..left on (left < 8).
    #[inline(always)]
    unsafe fn tail_mask(left: usize) -> __m256i {
        let left = _mm256_set1_epi32(left as i32);
        _mm256_cmpgt_epi32(left, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))
    }

    /// [`super::output_row_scalar`] with AVX2 + FMA: blocks of 32 columns, then 8, then one
    /// 8-column block ending at the row's end (a masked store for rows narrower than 8).
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA; reads as in [`super::output_row_scalar`].
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn output_row(
        base: *const f32,
        offsets: &[usize],
        f: &[f32],
        bias: Option<f32>,
        row: &mut [f32],
    ) {
        let n = row.len();
        let out = row.as_mut_ptr();
        if n < 8 {
            return block::<1, 1>([base], [0], offsets, f, bias, [out], [Some(tail_mask(n))]);
        }
        let mut ox = 0;
        while ox + BLOCK <= n {
            block::<1, 4>(
                [base.add(ox)],
                [0, 8, 16, 24],
                offsets,
                f,
                bias,
                [out.add(ox)],
                [None],
            );
            ox += BLOCK;
        }
        while ox + 8 <= n {
            block::<1, 1>([base.add(ox)], [0], offsets, f, bias, [out.add(ox)], [None]);
            ox += 8;
        }
        if ox < n {
            block::<1, 1>(
                [base.add(n - 8)],
                [0],
                offsets,
                f,
                bias,
                [out.add(n - 8)],
                [None],
            );
        }
    }

    /// V vectors of 8 outputs in each of R rows, vector v at column `cols[v]` (row r reads 8
    /// values from `bases[r] + cols[v]` at each tap, writes at `outs[r] + cols[v]`, only the
    /// lanes on in `masks[r]` when it is given). Overlapping vectors compute the same bits.
    #[inline(always)]
    unsafe fn block<const R: usize, const V: usize>(
        bases: [*const f32; R],
        cols: [usize; V],
        offsets: &[usize],
        f: &[f32],
        bias: Option<f32>,
        outs: [*mut f32; R],
        masks: [Option<__m256i>; R],
    ) {
        let load =
            |r: usize, t: usize, v: usize| _mm256_loadu_ps(bases[r].add(offsets[t] + cols[v]));
        let mut acc = [[_mm256_setzero_ps(); V]; R];
        let first = match bias {
            Some(b) => {
                acc = [[_mm256_set1_ps(b); V]; R];
                0
            }
            None => {
                let w = _mm256_set1_ps(f[0]);
                for (r, row) in acc.iter_mut().enumerate() {
                    for (v, a) in row.iter_mut().enumerate() {
                        *a = _mm256_mul_ps(load(r, 0, v), w);
                    }
                }
                1
            }
        };
        for (t, &wt) in f.iter().enumerate().skip(first) {
            let w = _mm256_set1_ps(wt);
            for (r, row) in acc.iter_mut().enumerate() {
                for (v, a) in row.iter_mut().enumerate() {
                    *a = _mm256_fmadd_ps(load(r, t, v), w, *a);
                }
            }
        }
        // In row order: a narrow row's spilled lanes are overwritten by the rows after it.
        for (r, row) in acc.iter().enumerate() {
            for (v, a) in row.iter().enumerate() {
                match masks[r] {
                    Some(mask) => _mm256_maskstore_ps(outs[r].add(cols[v]), mask, *a),
                    None => _mm256_storeu_ps(outs[r].add(cols[v]), *a),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{output_plane, output_row_scalar};
    use crate::ops::conv::Conv;
    use crate::ops::gemm::tests::{assert_close, rand_vec};
    use crate::ops::{Buf, Family};

    /// The direct kernel against the im2col + GEMM path, bit for bit, on awkward geometries
    /// (padding wider than the kernel, strides up to 3, dilation, 1-wide outputs, every block
    /// width of the vector loop and its tails, no bias), with
    /// zeros and signed zeros in the input so the sign of zero sums is exercised.
    #[test]
    fn direct_depthwise_is_bit_identical_to_the_gemm_path() {
        // (x shape, kernel, strides, pad, dilations, bias)
        type Case = (
            [usize; 4],
            [usize; 2],
            [usize; 2],
            [usize; 4],
            [usize; 2],
            bool,
        );
        let cases: [Case; 32] = [
            ([1, 8, 9, 9], [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], true),
            ([2, 5, 12, 7], [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], false),
            ([1, 6, 15, 15], [5, 5], [2, 2], [2, 2, 2, 2], [1, 1], true),
            ([1, 3, 9, 11], [3, 5], [1, 2], [0, 3, 4, 1], [2, 1], false),
            ([1, 4, 7, 1], [3, 1], [1, 1], [1, 1, 0, 0], [1, 1], true),
            ([1, 4, 2, 2], [3, 3], [1, 1], [3, 3, 3, 3], [1, 1], false),
            ([1, 64, 40, 40], [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], false),
            // Three column phases with dilation; a 60-wide output (blocks of 32, 8 and a tail).
            ([1, 3, 20, 23], [3, 3], [3, 3], [2, 1, 0, 2], [2, 3], true),
            ([1, 2, 120, 121], [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], true),
            // MobileNetV3's narrow planes: 7 and 14 columns, row counts not a multiple of 4.
            ([1, 5, 14, 14], [5, 5], [2, 2], [2, 2, 2, 2], [1, 1], true),
            ([1, 3, 14, 14], [5, 5], [1, 1], [2, 2, 2, 2], [1, 1], false),
            // A geometry again after another: its padding zeros are rewritten, not assumed.
            ([1, 6, 15, 15], [5, 5], [2, 2], [2, 2, 2, 2], [1, 1], false),
            // MobileNetV3-small's depthwise geometries (fewer channels; stride-2 planes of even
            // width are split into even / odd columns first).
            ([1, 3, 112, 112], [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], true),
            ([1, 3, 56, 56], [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], true),
            ([1, 3, 28, 28], [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], true),
            ([1, 3, 28, 28], [5, 5], [2, 2], [2, 2, 2, 2], [1, 1], true),
            ([1, 3, 14, 14], [5, 5], [1, 1], [2, 2, 2, 2], [1, 1], true),
            ([1, 3, 14, 14], [5, 5], [2, 2], [2, 2, 2, 2], [1, 1], true),
            ([1, 9, 7, 7], [5, 5], [1, 1], [2, 2, 2, 2], [1, 1], true),
            // Even widths at stride 2: left pad 0, 1 and 3 (both column parities first), the
            // last input columns read by no output, dilation, 1-column outputs, odd heights.
            ([1, 3, 11, 10], [3, 3], [2, 2], [0, 1, 1, 0], [1, 1], false),
            ([2, 2, 9, 16], [3, 3], [2, 2], [1, 0, 0, 0], [1, 1], true),
            ([1, 2, 8, 8], [5, 5], [2, 2], [3, 0, 3, 2], [1, 1], false),
            ([1, 2, 13, 12], [3, 3], [2, 2], [2, 2, 2, 2], [2, 2], true),
            ([1, 3, 6, 2], [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], false),
            ([1, 2, 5, 4], [3, 3], [3, 2], [1, 1, 0, 0], [1, 1], true),
            // Narrow rows at stride 1: 1 to 7 columns, row counts around the group of 8.
            ([1, 4, 9, 3], [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], true),
            ([1, 4, 17, 6], [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], false),
            ([1, 4, 16, 1], [5, 1], [1, 1], [2, 2, 0, 0], [1, 1], true),
            // Rows of 9, 31, 24 and 17 columns: the 1 to 15 columns after the 16-column blocks
            // as one two-vector block (9 to 15) or one vector (up to 8).
            ([1, 3, 6, 9], [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], true),
            ([1, 2, 7, 31], [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], false),
            ([1, 2, 5, 24], [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], true),
            ([1, 2, 6, 17], [5, 5], [1, 1], [2, 2, 2, 2], [1, 1], false),
        ];
        for (xs, k, strides, pad, dilations, with_bias) in cases {
            let c = xs[1];
            let mut xd = rand_vec(xs.iter().product(), 31);
            // Every 5th input a zero, of alternating sign.
            for (i, v) in xd.iter_mut().enumerate() {
                if i % 5 == 0 {
                    *v = if i % 2 == 0 { 0.0 } else { -0.0 };
                }
            }
            let x = Buf {
                shape: xs.to_vec(),
                data: xd,
            };
            let w = Buf {
                shape: vec![c, 1, k[0], k[1]],
                data: rand_vec(c * k[0] * k[1], 32),
            };
            let b = Buf {
                shape: vec![c],
                data: rand_vec(c, 33),
            };
            let conv = Conv {
                strides,
                pad,
                dilations,
                groups: c,
            };
            let mut ins = vec![&x, &w];
            if with_bias {
                ins.push(&b);
            }
            let types: Vec<_> = ins
                .iter()
                .map(|b| crate::ops::TensorType::fp16(b.shape.clone()))
                .collect();
            let shape = conv.infer(&types).unwrap().remove(0).shape;
            let mut via_gemm = [Buf::zeros(&shape)];
            conv.eval_im2col(&ins, &mut via_gemm).unwrap();
            let mut direct = [Buf::zeros(&shape)];
            conv.eval(&ins, &mut direct).unwrap();
            let bits = |b: &Buf| b.data.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&direct[0]),
                bits(&via_gemm[0]),
                "{xs:?} k {k:?} s {strides:?} pad {pad:?} d {dilations:?}"
            );
        }
    }

    /// The scalar fallback gives the vector path's bits (with and without bias, every width
    /// from one column to two 32-column blocks), against an f64 oracle within fp32 rounding.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn scalar_fallback_matches_the_vector_path() {
        if !(std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma"))
        {
            return;
        }
        let s = rand_vec(400, 41);
        let f = rand_vec(9, 42);
        let offsets: Vec<usize> = (0..9).map(|t| (t / 3) * 100 + t % 3).collect();
        for width in [1, 7, 8, 31, 32, 45, 64] {
            for bias in [None, Some(0.25f32)] {
                let (mut v, mut c) = (vec![0f32; width], vec![0f32; width]);
                // SAFETY: the largest read is 2·100 + 2 + 63 < 400; AVX2 and FMA were detected.
                unsafe {
                    super::x86::output_row(s.as_ptr(), &offsets, &f, bias, &mut v);
                    output_row_scalar(s.as_ptr(), &offsets, &f, bias, &mut c);
                }
                let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&v), bits(&c), "width {width} bias {bias:?}");
                let want: Vec<f64> = (0..width)
                    .map(|ox| {
                        let taps = offsets.iter().zip(&f);
                        let sum: f64 = taps.map(|(&o, &w)| s[o + ox] as f64 * w as f64).sum();
                        sum + bias.unwrap_or(0.0) as f64
                    })
                    .collect();
                assert_close(&c, &want, 1e-5);
            }
        }
    }

    /// A whole plane (rows grouped by four, then by three or two, blocks of 16, 8, a last block
    /// overlapping the one before, a lone last row; rows narrower than 8 grouped by eight and
    /// every smaller group left, spilling into the next) gives the bits of the scalar rows,
    /// for every row count from 1 to 17, and writes nothing past the plane.
    #[test]
    fn plane_rows_match_the_scalar_rows() {
        let (step, s) = (70, rand_vec(70 * 20, 43));
        let f = rand_vec(9, 44);
        let offsets: Vec<usize> = (0..9).map(|t| (t / 3) * step + t % 3).collect();
        for width in [1, 2, 5, 7, 8, 14, 16, 23, 56] {
            for rows in 1..=17 {
                for bias in [None, Some(-0.5f32)] {
                    // The plane, then 8 guard values no store may touch.
                    let len = width * rows;
                    let (mut v, mut c) = (vec![7.5f32; len + 8], vec![0f32; len]);
                    let plane = &mut v[..len];
                    // SAFETY: the largest read is 16·70 + 2·70 + 2 + 55 < 1400.
                    unsafe { output_plane(s.as_ptr(), step, &offsets, &f, bias, plane, width) };
                    assert!(
                        v[len..].iter().all(|&g| g == 7.5),
                        "width {width} rows {rows}"
                    );
                    v.truncate(len);
                    for (oy, row) in c.chunks_mut(width).enumerate() {
                        // SAFETY: as above.
                        unsafe {
                            output_row_scalar(s[oy * step..].as_ptr(), &offsets, &f, bias, row)
                        };
                    }
                    let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                    assert_eq!(
                        bits(&v),
                        bits(&c),
                        "width {width} rows {rows} bias {bias:?}"
                    );
                }
            }
        }
    }
    /// Process CPU µs per call (median of 201) of MobileNetV3-small's depthwise convs, whole
    /// (fills + kernel, with bias) per plane, the fills alone, and by the lane kernel: a benchmark, run with
    /// `--ignored --nocapture`.
    #[test]
    #[ignore]
    fn throughput_per_shape() {
        use super::{Depthwise, PADDED};
        // (channels, input size, kernel, stride)
        let shapes = [
            (16, 112, 3, 2),
            (72, 56, 3, 2),
            (88, 28, 3, 1),
            (96, 28, 5, 2),
            (240, 14, 5, 1),
            (120, 14, 5, 1),
            (144, 14, 5, 1),
            (288, 14, 5, 2),
            (576, 7, 5, 1),
            // Larger planes at stride 1 (MobileNetV2's first blocks), for the lane rule.
            (32, 112, 3, 1),
            (96, 112, 3, 2),
            (144, 56, 3, 1),
            (192, 28, 3, 1),
            (16, 224, 3, 1),
            (96, 14, 3, 1),
            (256, 7, 3, 1),
            (88, 14, 3, 1),
            (64, 20, 5, 1),
        ];
        let clock = || crate::exec::clock::process_cpu_us().unwrap();
        let median = |mut t: Vec<f64>| {
            t.sort_by(f64::total_cmp);
            t[t.len() / 2]
        };
        // One pool thread, the calls made on it (no cross-thread wake-ups in the times).
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        pool.install(|| {
            for (c, size, k, stride) in shapes {
                let out = (size + 2 * (k / 2) - k) / stride + 1;
                let dw = Depthwise {
                    input: [size, size],
                    kernel: [k, k],
                    output: [out, out],
                    strides: [stride; 2],
                    dilations: [1, 1],
                    pad: [k / 2; 4],
                };
                let hw = size * size;
                let (x, w, b) = (rand_vec(c * hw, 1), rand_vec(c * k * k, 2), rand_vec(c, 3));
                let mut o = vec![0f32; c * out * out];
                let pad = dw.padded();
                let spans = dw.spans(pad);
                let (mut s, mut split) = (vec![0f32; pad.len()], vec![0f32; hw]);
                let (mut whole, mut fills, mut lanes) = (Vec::new(), Vec::new(), Vec::new());
                for _ in 0..201 {
                    let t = clock();
                    dw.run_planes(&x, &w, Some(&b), &mut o, |_, _| {}).unwrap();
                    whole.push(clock() - t);
                    if super::depthwise_lanes::available() {
                        let t = clock();
                        super::depthwise_lanes::run_then(&dw, &x, &w, Some(&b), &mut o, &|_, _| {})
                            .unwrap();
                        lanes.push(clock() - t);
                    }
                    let t = clock();
                    for xs in x.chunks(hw) {
                        dw.fill(xs, pad, &spans, false, &mut s, &mut split);
                    }
                    fills.push(clock() - t);
                }
                PADDED.with_borrow_mut(|p| p.1 = None);
                println!(
                "{c}@{size} k{k} s{stride}: planes {:.1} µs, their fills {:.1} µs, lanes {:.1} µs",
                median(whole),
                median(fills),
                median(lanes)
            );
            }
        });
    }
}
