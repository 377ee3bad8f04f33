//! The GEMM path of a conv of small depth (a network's stem: K = Cin·kH·kW ≤ [`MAX_DEPTH`], e.g.
//! MobileNetV3's 3→16 3×3 stride-2 conv at 224×224, K = 27) without im2col panels: the input is
//! split once into zero-padded phase planes (padded input rows r·sH + py, columns j·sW + px), in
//! which tap (c, ky, kx) of output (oy, ox) is one value at a fixed offset of the tap plus
//! oy·(row stride) + ox. An AVX2 tile of up to 6 output channels × 16 columns of one output row
//! then loads each depth step's 16 values straight from there. Writing K·H'·W' panel values
//! cost more than the products themselves at K = 27 (BENCHMARKS.md, h-mnet6 round 16).
//!
//! Bits: each output is the packed kernel's chain (`gemm_avx2`, the `gemm` crate's order when
//! the product runs in one depth block): a fused multiply-add chain from +0 over p = 0..K in
//! (c, ky, kx) order, a padding tap reading +0, then C = acc, or C + acc when accumulating.

use std::cell::RefCell;

use rayon::prelude::*;

use super::conv::gather_strided;
use super::conv_gemm::{with_scratch, Product, SyncPtr};
use super::gemm::PAR_MIN_MACS;
use super::gemm_packed;
use crate::error::Result;

/// Deepest product that runs here: deeper ones amortise their panels over more multiply-adds.
const MAX_DEPTH: usize = 32;

/// Columns of one tile (two 8-lane vectors).
const COLS: usize = 16;

/// Values per `post` call at most (whole rows, at least one): the epilogue's pieces stay whole.
const POST_VALUES: usize = 256;

/// Values after the phase planes: a tile's last block of a row loads all [`COLS`] lanes.
const SLACK: usize = COLS;

thread_local! {
    /// The padded phase planes of one product's input (every value read is written first).
    static PHASES: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Layout of the padded phase planes: [Cin][sH][sW] planes of `rows` rows of `cols` values.
#[derive(Clone, Copy)]
struct Phases {
    rows: usize,
    cols: usize,
}

impl Phases {
    /// Values of one phase plane.
    fn plane(&self) -> usize {
        self.rows * self.cols
    }
}

/// Whether `p` runs here: AVX2 + FMA (the packed kernel's CPUs), not a direct 1×1 product,
/// K ≤ [`MAX_DEPTH`], and the `gemm` crate runs the whole product in one depth block (so every
/// tile of the GEMM path is the chain this kernel computes).
pub(super) fn fits(p: &Product) -> bool {
    let (m, k, n) = (p.cog, p.depth(), p.output[0] * p.output[1]);
    let direct = p.kernel == [1, 1] && p.strides == [1, 1] && p.pad == [0; 4];
    !direct && k <= MAX_DEPTH && gemm_packed::depth_block(m, n, k).is_some_and(|kc| kc >= k)
}

/// out [Cout/g, H'·W'] (+)= weight `a` [Cout/g, K] × the im2col columns of `xs` [Cin/g, H, W]
/// (`accumulate`: out holds the bias) for a product that [`fits`], output rows shared out over
/// the rayon pool when the product is large. Errors (Resource) when the phase planes exceed
/// the memory limits.
pub(super) fn run(
    p: &Product,
    xs: &[f32],
    a: &[f32],
    out: &mut [f32],
    accumulate: bool,
) -> Result<()> {
    run_then(p, xs, a, out, accumulate, |_, _| {})
}

/// [`run`], then `post(at, rows)` on each channel's output rows (`out[at..]`, groups of whole
/// rows of up to [`POST_VALUES`] values, at least one row) right after they are written (while
/// they are in cache), on the thread that wrote them.
pub(super) fn run_then(
    p: &Product,
    xs: &[f32],
    a: &[f32],
    out: &mut [f32],
    accumulate: bool,
    post: impl Fn(usize, &mut [f32]) + Sync,
) -> Result<()> {
    let ([cin, _, _], [oh, ow], m, k) = (p.input, p.output, p.cog, p.depth());
    if oh * ow == 0 {
        return Ok(());
    }
    assert!(
        a.len() >= m * k && out.len() >= m * oh * ow,
        "conv_stem: short weight or output"
    );
    let lay = layout(p);
    let [sh, sw] = p.strides;
    let len = cin * sh * sw * lay.plane() + SLACK;
    let threads = rayon::current_num_threads();
    let parallel = threads > 1 && m * k * oh * ow >= PAR_MIN_MACS;
    let offsets = tap_offsets(p, lay);
    // The last tile's loads end at its row start + the last tap's offset + COLS.
    let last_tile = (oh - 1) * lay.cols + (ow - 1) / COLS * COLS;
    let reads = last_tile + offsets.iter().max().copied().unwrap_or(0) + COLS;
    assert!(reads <= len, "conv_stem: tiles read past the phase planes");
    with_scratch(&PHASES, len, "the padded phase planes", |planes| {
        let (body, slack) = planes.split_at_mut(len - SLACK);
        slack.fill(0.0);
        let fill = |(i, plane): (usize, &mut [f32])| fill_phase(p, lay, xs, i, plane);
        if parallel {
            body.par_chunks_mut(lay.plane()).enumerate().for_each(fill);
        } else {
            body.chunks_mut(lay.plane()).enumerate().for_each(fill);
        }
        let planes = &*planes;
        let c = SyncPtr(out.as_mut_ptr());
        let rows = |t: usize, parts: usize| {
            let rows = oh * t / parts..oh * (t + 1) / parts;
            // SAFETY: `out` holds m·H'·W' values (checked above) and the row ranges of the
            // calls are disjoint; every load ends within `reads` ≤ planes.len() (asserted).
            unsafe { tile_rows(p, (planes, &offsets), a, rows, (c.get(), accumulate), &post) }
        };
        if parallel {
            (0..threads).into_par_iter().for_each(|t| rows(t, threads));
        } else {
            rows(0, 1);
        }
    })
}

/// The phase plane layout of `p`: padded input rows r·sH + py for r < ⌈(H + pT + pB) / sH⌉,
/// columns j·sW + px for j < ⌈(W + pL + pR) / sW⌉.
fn layout(p: &Product) -> Phases {
    let ([_, h, w], [pt, pb, pl, pr], [sh, sw]) = (p.input, p.pad, p.strides);
    Phases {
        rows: (h + pt + pb).div_ceil(sh),
        cols: (w + pl + pr).div_ceil(sw),
    }
}

/// Write phase plane `i` = (c, py, px) of `xs` into `plane`: row r, column j holds input
/// (r·sH + py − pT, j·sW + px − pL), zero outside the input.
fn fill_phase(p: &Product, lay: Phases, xs: &[f32], i: usize, plane: &mut [f32]) {
    let ([_, h, w], [pt, _, pl, _], [sh, sw]) = (p.input, p.pad, p.strides);
    let (c, py, px) = (i / (sh * sw), i / sw % sh, i % sw);
    // Columns lo..hi read input columns from, from + sW, …
    let lo = pl.saturating_sub(px).div_ceil(sw).min(lay.cols);
    let hi = (w + pl).saturating_sub(px).div_ceil(sw).clamp(lo, lay.cols);
    let from = (lo * sw + px).saturating_sub(pl);
    for (r, row) in plane.chunks_mut(lay.cols).enumerate() {
        let iy = (r * sh + py).checked_sub(pt).filter(|&iy| iy < h);
        match iy {
            Some(iy) if hi > lo => {
                row[..lo].fill(0.0);
                let src = &xs[(c * h + iy) * w..(c * h + iy + 1) * w];
                gather_strided(&src[from..], sw, &mut row[lo..hi]);
                row[hi..].fill(0.0);
            }
            _ => row.fill(0.0),
        }
    }
}

/// Offset in the phase planes of tap p = (c, ky, kx) for output (0, 0), taps in (c, ky, kx)
/// order (the GEMM's depth order).
fn tap_offsets(p: &Product, lay: Phases) -> Vec<usize> {
    let ([cin, _, _], [kh, kw], [sh, sw], [dh, dw]) = (p.input, p.kernel, p.strides, p.dilations);
    (0..cin * kh * kw)
        .map(|t| {
            let (c, ky, kx) = (t / (kh * kw), t / kw % kh, t % kw);
            let (y, x) = (ky * dh, kx * dw);
            let plane = (c * sh + y % sh) * sw + x % sw;
            plane * lay.plane() + (y / sh) * lay.cols + x / sw
        })
        .collect()
}

/// Every tile of output rows `rows` (channel strips of up to 6, blocks of [`COLS`] columns)
/// from the phase `planes` and their tap `offsets`, groups of rows then passed to `post`
/// channel by channel (see [`run_then`]).
///
/// # Safety
/// `c` points at `out` [Cout/g, H'·W'] (checked long enough by [`run_then`]), whose elements in
/// `rows` no one else accesses meanwhile; `planes` holds every value the tiles load (the last
/// tile's row start + the largest tap offset + [`COLS`], asserted by [`run_then`]).
unsafe fn tile_rows(
    p: &Product,
    (planes, offsets): (&[f32], &[usize]),
    a: &[f32],
    rows: std::ops::Range<usize>,
    (c, accumulate): (*mut f32, bool),
    post: &(impl Fn(usize, &mut [f32]) + Sync),
) {
    let ([oh, ow], m, k) = (p.output, p.cog, p.depth());
    let lay = layout(p);
    let group = (POST_VALUES / ow).max(1);
    let mut first = rows.start;
    for oy in rows.clone() {
        for r0 in (0..m).step_by(x86::STRIP) {
            for ox in (0..ow).step_by(COLS) {
                let b = oy * lay.cols + ox;
                let tile = x86::Tile {
                    rows: (m - r0).min(x86::STRIP),
                    cols: (ow - ox).min(COLS),
                    overwrite: !accumulate,
                };
                let cp = c.add(r0 * oh * ow + oy * ow + ox);
                x86::tile(
                    tile,
                    k,
                    a.as_ptr().add(r0 * k),
                    planes.as_ptr().add(b),
                    offsets,
                    cp,
                    oh * ow,
                );
            }
        }
        if oy + 1 - first < group && oy + 1 < rows.end {
            continue;
        }
        for co in 0..m {
            let at = co * oh * ow + first * ow;
            let len = (oy + 1 - first) * ow;
            // SAFETY: rows first..=oy of channel co lie in `out` and are this call's alone.
            post(at, std::slice::from_raw_parts_mut(c.add(at), len));
        }
        first = oy + 1;
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// Output channels of one tile (12 accumulators, 2 loads and 6 broadcasts a depth step).
    pub(super) const STRIP: usize = 6;

    /// Extent of one tile: `rows` ≤ [`STRIP`] channels, `cols` ≤ 16 columns; `overwrite`
    /// stores the sum, else adds it to C.
    #[derive(Clone, Copy)]
    pub(super) struct Tile {
        pub rows: usize,
        pub cols: usize,
        pub overwrite: bool,
    }

    /// C[r, j] (+)= Σ_p A[r, p]·B[p, j] for one [`Tile`]: A[r, p] at `a[r·k + p]`, B[p, j] at
    /// `b[offsets[p] + j]`, C[r, j] at `c[r·c_rs + j]`; each sum a fused multiply-add chain from
    /// +0 in increasing p.
    ///
    /// # Safety
    /// AVX2 and FMA are available (`gemm_packed::depth_block` said so); A's rows of k values,
    /// 16 values at every b + offsets[p] (p < k) are readable; C's addressed elements are
    /// writable and accessed by no one else meanwhile.
    pub(super) unsafe fn tile(
        t: Tile,
        k: usize,
        a: *const f32,
        b: *const f32,
        offsets: &[usize],
        c: *mut f32,
        c_rs: usize,
    ) {
        match t.rows {
            5.. => chains::<6>(t, k, a, b, offsets, c, c_rs),
            _ => chains::<4>(t, k, a, b, offsets, c, c_rs),
        }
    }

    /// [`tile`] on `R` channel rows (rows past `t.rows` re-read the last row, not stored).
    ///
    /// # Safety
    /// As [`tile`].
    #[target_feature(enable = "avx2,fma")]
    unsafe fn chains<const R: usize>(
        t: Tile,
        k: usize,
        a: *const f32,
        b: *const f32,
        offsets: &[usize],
        c: *mut f32,
        c_rs: usize,
    ) {
        let ar: [*const f32; R] = std::array::from_fn(|r| a.add(r.min(t.rows - 1) * k));
        let mut acc = [[_mm256_setzero_ps(); 2]; R];
        for (p, &off) in offsets.iter().enumerate().take(k) {
            let bp = b.add(off);
            let bv = [_mm256_loadu_ps(bp), _mm256_loadu_ps(bp.add(8))];
            for (acc, ar) in acc.iter_mut().zip(&ar) {
                let x = _mm256_broadcast_ss(&*ar.add(p));
                acc[0] = _mm256_fmadd_ps(x, bv[0], acc[0]);
                acc[1] = _mm256_fmadd_ps(x, bv[1], acc[1]);
            }
        }
        let lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        let masks = [0, 8].map(|h| _mm256_cmpgt_epi32(_mm256_set1_epi32(t.cols as i32 - h), lane));
        for (r, acc) in acc.iter().enumerate().take(t.rows) {
            for (h, (&v, &mk)) in acc.iter().zip(&masks).enumerate() {
                store(t, c.add(r * c_rs + 8 * h), v, mk);
            }
        }
    }

    /// Store (or add, unless `t.overwrite`) the lanes of `v` that `mk` selects at `d`: whole
    /// tiles plainly, since masked stores are slow on AMD cores.
    ///
    /// # Safety
    /// As [`tile`]: the selected lanes at `d` are C elements of the tile.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn store(t: Tile, d: *mut f32, v: __m256, mk: __m256i) {
        if t.cols == 16 {
            let v = match t.overwrite {
                true => v,
                false => _mm256_add_ps(_mm256_loadu_ps(d), v),
            };
            return _mm256_storeu_ps(d, v);
        }
        let v = match t.overwrite {
            true => v,
            false => _mm256_add_ps(_mm256_maskload_ps(d, mk), v),
        };
        _mm256_maskstore_ps(d, mk, v);
    }
}

/// Never called off x86_64 ([`fits`] is false there: no packed kernel); keeps callers
/// arch-independent.
#[cfg(not(target_arch = "x86_64"))]
mod x86 {
    pub(super) const STRIP: usize = 6;

    #[derive(Clone, Copy)]
    pub(super) struct Tile {
        pub rows: usize,
        pub cols: usize,
        pub overwrite: bool,
    }

    /// Panics: there is no packed kernel off x86_64.
    ///
    /// # Safety
    /// None needed.
    pub(super) unsafe fn tile(
        _: Tile,
        _: usize,
        _: *const f32,
        _: *const f32,
        _: &[usize],
        _: *mut f32,
        _: usize,
    ) {
        unreachable!("the small-depth conv runs on x86_64 only")
    }
}

#[cfg(test)]
mod tests {
    use super::{fits, run};
    use crate::ops::conv_gemm::Product;
    use crate::ops::gemm::sgemm_with;
    use crate::ops::gemm::tests::rand_vec;

    /// A product of `cin` planes of `hw` through a `k` kernel with strides `s`, dilations `d`,
    /// pads (top, bottom, left, right) and `cout` output channels.
    fn product(
        cin: usize,
        hw: [usize; 2],
        k: [usize; 2],
        s: [usize; 2],
        d: [usize; 2],
        pad: [usize; 4],
        cout: usize,
    ) -> Product {
        let out =
            |a: usize| (hw[a] + pad[2 * a] + pad[2 * a + 1] - (k[a] - 1) * d[a] - 1) / s[a] + 1;
        Product {
            input: [cin, hw[0], hw[1]],
            kernel: k,
            output: [out(0), out(1)],
            strides: s,
            dilations: d,
            pad,
            cog: cout,
        }
    }

    /// The GEMM path's result: the whole product's im2col columns through the `gemm` crate.
    fn via_crate(p: &Product, x: &[f32], w: &[f32], c: &mut [f32], accumulate: bool) {
        let (m, k, n) = (p.cog, p.depth(), p.output[0] * p.output[1]);
        let mut col = vec![0f32; k * n];
        p.im2col(x, 0..p.output[0], 0, &mut col, n, false);
        sgemm_with(false, m, n, k, w, k, 1, &col, n, 1, c, n, accumulate);
    }

    /// Input values with every 7th a zero of alternating sign (signed zero sums exercised).
    fn input(len: usize) -> Vec<f32> {
        let mut x = rand_vec(len, 51);
        for (i, v) in x.iter_mut().enumerate().filter(|(i, _)| i % 7 == 0) {
            *v = if i % 2 == 0 { 0.0 } else { -0.0 };
        }
        x
    }

    /// The bit patterns of `v`.
    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// The small-depth path gives the GEMM path's bits on MobileNetV3-small's stems (224 and
    /// 96) and odd geometries: 1–3 input planes, 1×1 strided / padded, 3×3, 5×5 and 3×5
    /// kernels, strides 1–3, dilation, asymmetric and wide padding, output widths 1, 7, 8,
    /// 12, 17, 32, 33, 48, 112 (partial last column blocks), channel counts 2, 5, 6, 7, 13,
    /// 16, 24, 40 (partial last strips), overwriting and accumulating onto a bias already in C.
    #[test]
    fn small_depth_products_match_the_gemm_path_bit_for_bit() {
        let cases = [
            product(3, [224, 224], [3, 3], [2, 2], [1, 1], [1, 1, 1, 1], 16),
            product(3, [96, 96], [3, 3], [2, 2], [1, 1], [1, 1, 1, 1], 16),
            product(3, [35, 33], [3, 3], [1, 1], [1, 1], [1, 1, 1, 1], 13),
            product(1, [20, 17], [5, 5], [1, 1], [1, 1], [2, 2, 2, 2], 7),
            product(2, [19, 23], [3, 5], [2, 3], [1, 1], [0, 2, 3, 1], 6),
            product(3, [30, 14], [3, 3], [2, 2], [2, 2], [2, 1, 2, 2], 24),
            product(3, [30, 30], [3, 3], [3, 3], [1, 1], [4, 4, 4, 4], 5),
            product(3, [80, 1], [3, 3], [1, 1], [1, 1], [1, 1, 1, 1], 16),
            product(3, [64, 64], [1, 1], [2, 2], [1, 1], [0, 0, 0, 0], 40),
            product(2, [25, 66], [3, 3], [2, 2], [1, 1], [1, 1, 1, 1], 2),
        ];
        for p in cases {
            assert!(fits(&p), "{:?} {:?} m {}", p.input, p.kernel, p.cog);
            let (m, k, n) = (p.cog, p.depth(), p.output[0] * p.output[1]);
            let (x, w) = (input(p.input.iter().product()), rand_vec(m * k, 52));
            for accumulate in [false, true] {
                let bias = rand_vec(m * n, 53);
                let (mut want, mut got) = (bias.clone(), bias);
                via_crate(&p, &x, &w, &mut want, accumulate);
                run(&p, &x, &w, &mut got, accumulate).unwrap();
                let what = format!(
                    "{:?} k {:?} s {:?} pad {:?} m {m} acc {accumulate}",
                    p.input, p.kernel, p.strides, p.pad
                );
                assert_eq!(bits(&got), bits(&want), "{what}");
            }
        }
    }

    /// The stem's rows shared out over 1, 2 and 3 threads give the same bits.
    #[test]
    fn thread_counts_change_no_bit() {
        let p = product(3, [224, 224], [3, 3], [2, 2], [1, 1], [1, 1, 1, 1], 16);
        let (m, k, n) = (p.cog, p.depth(), p.output[0] * p.output[1]);
        let (x, w) = (input(3 * 224 * 224), rand_vec(m * k, 54));
        let at = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let mut c = vec![0f32; m * n];
            pool.install(|| run(&p, &x, &w, &mut c, false)).unwrap();
            bits(&c)
        };
        let one = at(1);
        assert_eq!(at(2), one);
        assert_eq!(at(3), one);
    }

    /// Deeper products, direct 1×1 products and products the crate runs on a small-size path
    /// keep the GEMM path.
    #[test]
    fn only_small_depth_blocked_products_fit() {
        let stem = product(3, [224, 224], [3, 3], [2, 2], [1, 1], [1, 1, 1, 1], 16);
        assert!(fits(&stem));
        assert!(!fits(&product(
            4,
            [56, 56],
            [3, 3],
            [1, 1],
            [1, 1],
            [1, 1, 1, 1],
            16
        )));
        assert!(!fits(&product(
            16,
            [56, 56],
            [1, 1],
            [1, 1],
            [1, 1],
            [0, 0, 0, 0],
            16
        )));
        assert!(!fits(&product(
            3,
            [8, 8],
            [3, 3],
            [2, 2],
            [1, 1],
            [1, 1, 1, 1],
            16
        )));
        assert!(!fits(&product(
            3,
            [56, 56],
            [3, 3],
            [2, 2],
            [1, 1],
            [1, 1, 1, 1],
            1
        )));
    }
}
