//! The channel-lane kernel of `conv_transpose`: each output pixel accumulates all the output
//! channels of a group at once (16 lanes, a pixel block of 6 or 4 along W when the block's taps
//! line up), reading the weight prepacked as [Cin][kH][kW][Cout/g]. Every output element still sums
//! its terms as separate products and sums in the order of the plane kernel (ci, then input row
//! ascending, then kernel column ascending), so the two give the same bits.

use rayon::prelude::*;

use crate::ops::gemm::PAR_MIN_MACS;

/// Output channels per lane block.
const LANES: usize = 16;

/// Output pixels along W computed together when their taps line up (the widest block that
/// does; 6 pixels keep 12 accumulators, the two weight vectors and a broadcast in registers).
const BLOCKS: [usize; 2] = [6, 4];

/// The widest pixel block.
const BLOCK: usize = BLOCKS[0];

/// Geometry of one transposed convolution.
pub(super) struct Geometry {
    /// x [N, Cin, H, W].
    pub x: [usize; 4],
    /// Output [Cout, H', W'] (per batch element).
    pub out: [usize; 3],
    pub kernel: [usize; 2],
    pub strides: [usize; 2],
    pub dilations: [usize; 2],
    /// Cropped padding (top, left).
    pub pad: [usize; 2],
    pub groups: usize,
}

/// For every output index along one axis, the (input index, tap) pairs landing on it, ordered
/// by input index (`by_input`) or by tap.
fn landing(
    inp: usize,
    k: usize,
    s: usize,
    d: usize,
    lo: usize,
    out: usize,
    by_input: bool,
) -> Vec<Vec<(usize, usize)>> {
    let mut v = vec![Vec::new(); out];
    let pairs: Vec<(usize, usize)> = if by_input {
        (0..inp).flat_map(|i| (0..k).map(move |t| (i, t))).collect()
    } else {
        (0..k).flat_map(|t| (0..inp).map(move |i| (i, t))).collect()
    };
    for (i, t) in pairs {
        if let Some(o) = (i * s + t * d).checked_sub(lo).filter(|&o| o < out) {
            v[o].push((i, t));
        }
    }
    v
}

/// Whether the conv suits the lane kernel (enough output channels per group to fill lanes).
pub(super) fn suits(cog: usize) -> bool {
    cog >= LANES / 2
}

/// y [N, Cout, H', W'] = conv_transpose(x, w) with w [Cin, Cout/g, kH, kW] (see the module doc).
pub(super) fn run(g: &Geometry, x: &[f32], w: &[f32], y: &mut [f32]) {
    let ([n, cin, h, wd], [cout, oh, ow], [kh, kw]) = (g.x, g.out, g.kernel);
    let (cig, cog) = (cin / g.groups, cout / g.groups);
    let blocks = cog.div_ceil(LANES);
    // wp[grp][blk][ci in group][ky][kx][LANES], zero lanes past cog.
    let mut wp = vec![0f32; g.groups * blocks * cig * kh * kw * LANES];
    for ci in 0..cin {
        let (grp, c) = (ci / cig, ci % cig);
        for j in 0..cog {
            for t in 0..kh * kw {
                let dst =
                    (((grp * blocks + j / LANES) * cig + c) * kh * kw + t) * LANES + j % LANES;
                wp[dst] = w[(ci * cog + j) * kh * kw + t];
            }
        }
    }
    let rows = landing(h, kh, g.strides[0], g.dilations[0], g.pad[0], oh, true);
    let cols = landing(wd, kw, g.strides[1], g.dilations[1], g.pad[1], ow, false);
    let spans = column_spans(&cols);
    let plan = Plan {
        g,
        cig,
        cog,
        blocks,
        wp: &wp,
        rows: &rows,
        cols: &cols,
        spans: &spans,
        #[cfg(target_arch = "x86_64")]
        avx2: std::arch::is_x86_feature_detected!("avx2"),
        #[cfg(not(target_arch = "x86_64"))]
        avx2: false,
    };
    let per_batch = cout * oh * ow;
    let macs = n * per_batch * cig * kh * kw;
    let sample =
        |(b, yb): (usize, &mut [f32])| plan.sample(&x[b * cin * h * wd..][..cin * h * wd], yb);
    if macs >= PAR_MIN_MACS && rayon::current_num_threads() > 1 {
        y.par_chunks_mut(per_batch).enumerate().for_each(sample);
    } else {
        y.chunks_mut(per_batch).enumerate().for_each(sample);
    }
}

/// The output columns as (first column, pixels) spans: from each column the widest of
/// [`BLOCKS`] whose columns all exist and read the same taps at input columns one apart, else 1.
fn column_spans(cols: &[Vec<(usize, usize)>]) -> Vec<(usize, usize)> {
    let lined_up = |ox: usize, q: usize| {
        let first = &cols[ox];
        ox + q <= cols.len()
            && (1..q).all(|p| {
                let c = &cols[ox + p];
                c.len() == first.len()
                    && c.iter()
                        .zip(first)
                        .all(|(a, b)| a.1 == b.1 && a.0 == b.0 + p)
            })
    };
    let mut spans = Vec::new();
    let mut ox = 0;
    while ox < cols.len() {
        let q = BLOCKS.into_iter().find(|&q| lined_up(ox, q)).unwrap_or(1);
        spans.push((ox, q));
        ox += q;
    }
    spans
}

/// The prepacked weight and the tap lists of one call.
struct Plan<'a> {
    g: &'a Geometry,
    cig: usize,
    cog: usize,
    blocks: usize,
    wp: &'a [f32],
    rows: &'a [Vec<(usize, usize)>],
    cols: &'a [Vec<(usize, usize)>],
    /// The output columns' pixel blocks (see [`column_spans`]).
    spans: &'a [(usize, usize)],
    /// Whether the CPU has AVX2 (the pixel-block update then uses its registers).
    avx2: bool,
}

impl Plan<'_> {
    /// One batch element: x [Cin, H, W] → y [Cout, H', W'].
    fn sample(&self, x: &[f32], y: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU feature the function enables was just detected.
            unsafe { self.sample_avx2(x, y) };
            return;
        }
        self.sample_any(x, y);
    }

    /// [`Plan::sample`] compiled for AVX2 (separate multiplies and adds: the same bits).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn sample_avx2(&self, x: &[f32], y: &mut [f32]) {
        self.sample_any(x, y);
    }

    #[inline(always)]
    fn sample_any(&self, x: &[f32], y: &mut [f32]) {
        let [_, oh, ow] = self.g.out;
        for grp in 0..self.g.groups {
            for blk in 0..self.blocks {
                for oy in 0..oh {
                    for &(ox, q) in self.spans {
                        let acc = self.pixels(x, grp, blk, oy, ox, q);
                        let j0 = blk * LANES;
                        for (j, co) in (j0..self.cog.min(j0 + LANES)).enumerate() {
                            let plane = &mut y[((grp * self.cog + co) * oh + oy) * ow..][..ow];
                            for (p, a) in acc[..q].iter().enumerate() {
                                plane[ox + p] = a[j];
                            }
                        }
                    }
                }
            }
        }
    }

    /// Lanes `blk` of group `grp` at output row `oy`, columns ox..ox+q (q = 1 or one of [`BLOCKS`]).
    #[inline(always)]
    fn pixels(
        &self,
        x: &[f32],
        grp: usize,
        blk: usize,
        oy: usize,
        ox: usize,
        q: usize,
    ) -> [[f32; LANES]; BLOCK] {
        #[cfg(target_arch = "x86_64")]
        if self.avx2 {
            // SAFETY: `avx2` is set only when the CPU has AVX2.
            return unsafe {
                match q {
                    6 => self.pixels_avx2::<6>(x, grp, blk, oy, ox),
                    4 => self.pixels_avx2::<4>(x, grp, blk, oy, ox),
                    _ => self.pixels_avx2::<1>(x, grp, blk, oy, ox),
                }
            };
        }
        let [_, _, h, wd] = self.g.x;
        let [kh, kw] = self.g.kernel;
        let mut acc = [[0f32; LANES]; BLOCK];
        let wb = &self.wp[(grp * self.blocks + blk) * self.cig * kh * kw * LANES..]
            [..self.cig * kh * kw * LANES];
        for c in 0..self.cig {
            let plane = &x[(grp * self.cig + c) * h * wd..][..h * wd];
            let wc = &wb[c * kh * kw * LANES..][..kh * kw * LANES];
            for &(iy, ky) in &self.rows[oy] {
                let row = &plane[iy * wd..][..wd];
                for &(ix, kx) in &self.cols[ox] {
                    let t: &[f32; LANES] = wc[(ky * kw + kx) * LANES..][..LANES]
                        .try_into()
                        .expect("LANES elements");
                    if q > 1 {
                        for (a, &v) in acc.iter_mut().zip(&row[ix..][..q]) {
                            for (s, &tw) in a.iter_mut().zip(t) {
                                *s += v * tw;
                            }
                        }
                    } else {
                        let v = row[ix];
                        for (s, &tw) in acc[0].iter_mut().zip(t) {
                            *s += v * tw;
                        }
                    }
                }
            }
        }
        acc
    }

    /// [`Plan::pixels`] for Q (1 or one of [`BLOCKS`]) pixels with the accumulators in AVX2 registers (a
    /// multiply then an add per term, like the portable loop: the same bits).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn pixels_avx2<const Q: usize>(
        &self,
        x: &[f32],
        grp: usize,
        blk: usize,
        oy: usize,
        ox: usize,
    ) -> [[f32; LANES]; BLOCK] {
        use std::arch::x86_64::{
            __m256, _mm256_add_ps, _mm256_loadu_ps, _mm256_mul_ps, _mm256_set1_ps,
            _mm256_setzero_ps, _mm256_storeu_ps,
        };
        let [_, _, h, wd] = self.g.x;
        let [kh, kw] = self.g.kernel;
        let mut acc: [[__m256; 2]; Q] = [[_mm256_setzero_ps(); 2]; Q];
        let wb = &self.wp[(grp * self.blocks + blk) * self.cig * kh * kw * LANES..]
            [..self.cig * kh * kw * LANES];
        for c in 0..self.cig {
            let plane = &x[(grp * self.cig + c) * h * wd..][..h * wd];
            let wc = &wb[c * kh * kw * LANES..][..kh * kw * LANES];
            for &(iy, ky) in &self.rows[oy] {
                let row = &plane[iy * wd..][..wd];
                for &(ix, kx) in &self.cols[ox] {
                    let t = &wc[(ky * kw + kx) * LANES..][..LANES];
                    let xs = &row[ix..][..Q];
                    let (t0, t1) = (
                        _mm256_loadu_ps(t.as_ptr()),
                        _mm256_loadu_ps(t[8..].as_ptr()),
                    );
                    for (a, &v) in acc.iter_mut().zip(xs) {
                        let xv = _mm256_set1_ps(v);
                        a[0] = _mm256_add_ps(a[0], _mm256_mul_ps(xv, t0));
                        a[1] = _mm256_add_ps(a[1], _mm256_mul_ps(xv, t1));
                    }
                }
            }
        }
        let mut out = [[0f32; LANES]; BLOCK];
        for (o, a) in out.iter_mut().zip(&acc) {
            _mm256_storeu_ps(o.as_mut_ptr(), a[0]);
            _mm256_storeu_ps(o[8..].as_mut_ptr(), a[1]);
        }
        out
    }
}
