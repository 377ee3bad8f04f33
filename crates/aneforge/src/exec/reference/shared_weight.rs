//! Dense fp16 matmul weights expanded to f32 once per process, in the layout the GEMM reads
//! without packing, and shared by every program built from the same constant (e.g. every
//! sequence bucket of a sentence encoder). A `matmul(x, W, transpose_y = true)` with W a rank-2
//! fp16 constant [N, K] keeps Wᵀ (K×N) instead of the program's own [N, K] slot: on x86 CPUs
//! with AVX2 or AVX-512 in the panels of the packed GEMM (`ops::gemm_packed`, which then runs
//! the product without packing anything per call, on `gemm_avx512`'s tile where there is
//! AVX-512); on other CPUs whose `gemm` kernel `ops::gemm_order` models, as column blocks
//! (`weight_blocks`) that the crate (computing Cᵀ = Wᵀᵀ·xᵀ with W as its left operand) reads
//! in place block by block; elsewhere as a row-major [K, N] array. All three reproduce the crate's per-element summation order (blocking by
//! (m, n, k) alone), so results are bit-identical to the [N, K] call. That holds on the crate's
//! blocked path only; shapes its small-matrix paths take (M or N < 2, K ≤ 2, M·N ≤ 256) keep
//! the ordinary dense matmul, except one row (M = 1, x [1, K]): a matrix-vector product that
//! `ops::gemv` runs in the crate's order straight from the constant's fp16 values (no f32
//! copy at all, half the bytes read per call). A 1×1 conv on one pixel (x [1, C, 1, 1], weight
//! an fp16 constant [S, C, 1, 1]: MobileNetV3's squeeze-excite FCs) is such a product too.
//! A conv of one group with an fp16 constant weight [Cout, Cin, kH, kW] whose product
//! `Product::prefers_blocks` (ResNet's 7×7 and 14×14 planes on AVX-512 CPUs) keeps Wᵀ
//! [K, Cout] as column blocks too, and runs on them transposed (`ops::conv_blocks`).

use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::sync::{Arc, Mutex, Weak};

use half::f16;

use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::ops::conv::Conv;
use crate::ops::conv_gemm::Product;
use crate::ops::gemm::sgemm;
use crate::ops::gemm_avx2;
use crate::ops::gemm_avx512;
use crate::ops::gemm_packed;
use crate::ops::gemv;
use crate::ops::io::Const;
use crate::ops::linear::MatMul;
use crate::ops::{Buf, Op};

use crate::ops::weight_blocks;

/// Smallest M·N the `gemm` crate runs on its blocked path for these strides (it multiplies
/// smaller products with a horizontal kernel whose order depends on the layout).
const MIN_OUTPUT: usize = 16 * 16 + 1;

/// Expanded weights alive in this process, by (content hash, N, K, layout).
type Cache = HashMap<(u64, usize, usize, Layout), Weak<[f32]>>;
static CACHE: Mutex<Option<Cache>> = Mutex::new(None);

/// Wᵀ of a rank-2 fp16 constant W [N, K] as f32 K×N (in its [`Layout`]), shared between programs; or W's own fp16 values for x [1, K].
#[derive(Clone, Debug)]
pub struct SharedWeight {
    wt: Arc<[f32]>,
    n: usize,
    k: usize,
    kind: Layout,
    /// W [N, K] itself (the constant's values), for matrix-vector products.
    half: Option<Arc<Vec<f16>>>,
    /// For a conv: how it runs (see [`ConvUse`]).
    conv: Option<ConvUse>,
}

/// The conv a shared weight computes, with whether it has a bias (its third input).
#[derive(Clone, Debug)]
enum ConvUse {
    /// A 1×1 conv on one pixel (W [N, K, 1, 1]), on the fp16 GEMV.
    Pixel { bias: bool },
    /// A conv of one group whose product runs on the weight blocks (`Product::run_blocks`).
    Blocks { product: Product, bias: bool },
}

/// How Wᵀ is stored: the packed GEMM's panels, column blocks (`weight_blocks`) or row-major.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Layout {
    Panels,
    Blocks,
    RowMajor,
}

impl Layout {
    /// The layout a conv's weight blocks (`Product::prefers_blocks`) and, on CPUs without
    /// AVX-512, a matmul read fastest here with the dense call's bits.
    fn here() -> Layout {
        if gemm_avx2::available() {
            Layout::Panels
        } else if weight_blocks::usable() {
            Layout::Blocks
        } else {
            Layout::RowMajor
        }
    }

    /// The layout of a matmul's weight: panels on AVX-512 CPUs too (`gemm_avx512`'s tile),
    /// else [`Layout::here`].
    fn matmul() -> Layout {
        match gemm_avx512::available() {
            true => Layout::Panels,
            false => Layout::here(),
        }
    }
}

/// Position of Wᵀ[p, j] in the expansion, and the expansion's length.
fn layout(kind: Layout, n: usize, k: usize) -> (impl Fn(usize, usize) -> usize, usize) {
    let len = match kind {
        Layout::Panels => gemm_packed::panels_len(k, n),
        _ => n * k,
    };
    let at = move |p, j| match kind {
        Layout::Panels => gemm_packed::panel_index(k, p, j),
        Layout::Blocks => weight_blocks::index(n, k, p, j),
        Layout::RowMajor => p * n + j,
    };
    (at, len)
}

/// FNV-1a 64 over the fp16 bit patterns.
fn content_hash(values: &[f16]) -> u64 {
    values.iter().fold(0xcbf2_9ce4_8422_2325, |h, v| {
        (h ^ v.to_bits() as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Whether `wt` is exactly Wᵀ of `values` in its layout (guards the cache against a hash
/// collision).
fn is_transpose_of(wt: &[f32], values: &[f16], n: usize, k: usize, kind: Layout) -> bool {
    let (at, len) = layout(kind, n, k);
    wt.len() == len
        && (0..n)
            .all(|j| (0..k).all(|p| wt[at(p, j)].to_bits() == values[j * k + p].to_f32().to_bits()))
}

impl SharedWeight {
    /// The process-wide expansion of `c` (shape [N, K], or [N, ...] with K the product of the
    /// rest) in layout `kind`, made now if no live program holds it.
    fn of(c: &Const, kind: Layout) -> SharedWeight {
        let (n, k) = (c.shape[0], c.shape[1..].iter().product());
        let key = (content_hash(&c.values), n, k, kind);
        let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
        let cache = cache.get_or_insert_with(HashMap::new);
        if let Some(wt) = cache.get(&key).and_then(Weak::upgrade) {
            if is_transpose_of(&wt, &c.values, n, k, kind) {
                return SharedWeight {
                    wt,
                    n,
                    k,
                    kind,
                    half: None,
                    conv: None,
                };
            }
        }
        let (at, len) = layout(kind, n, k);
        // Written in place in its shared allocation (a Vec turned into an Arc would be copied,
        // holding the weight twice at load).
        let mut wt = Arc::<[f32]>::new_uninit_slice(len);
        let slots = Arc::get_mut(&mut wt).expect("a new Arc has one owner");
        slots.fill(MaybeUninit::new(0.0));
        for (j, row) in c.values.chunks_exact(k).enumerate() {
            for (p, v) in row.iter().enumerate() {
                slots[at(p, j)] = MaybeUninit::new(v.to_f32());
            }
        }
        // SAFETY: the fill above initialised every element.
        let wt: Arc<[f32]> = unsafe { wt.assume_init() };
        cache.retain(|_, w| w.strong_count() > 0);
        cache.insert(key, Arc::downgrade(&wt));
        SharedWeight {
            wt,
            n,
            k,
            kind,
            half: None,
            conv: None,
        }
    }

    /// `c` (shape [N, K], or [N, K, 1, 1] for a one-pixel conv) read in place by the
    /// matrix-vector kernel.
    fn half(c: &Const, conv: Option<ConvUse>) -> SharedWeight {
        SharedWeight {
            wt: Arc::new([]),
            n: c.shape[0],
            k: c.shape[1],
            kind: Layout::RowMajor,
            half: Some(c.values.clone()),
            conv,
        }
    }

    /// The step's output from its inputs `bufs[ins[..]]` (the node's own first): a matmul's
    /// [`SharedWeight::matmul`] of the first, a conv's [`SharedWeight::conv_pixel`] or
    /// [`SharedWeight::conv_blocks`].
    pub fn run(&self, bufs: &[Buf], ins: &[usize], y: &mut [f32]) -> Result<()> {
        let bias = |with: bool| with.then(|| &bufs[ins[2]].data[..]);
        match &self.conv {
            Some(ConvUse::Pixel { bias: b }) => self.conv_pixel(&bufs[ins[0]], bias(*b), y),
            Some(ConvUse::Blocks { product, bias: b }) => {
                self.conv_blocks(product, &bufs[ins[0]], bias(*b), y)
            }
            None => self.matmul(&bufs[ins[0]], y),
        }
    }

    /// y [B, Cout, H', W'] = bias + conv(x) for x [B, Cin, H, W] of `product`'s geometry, each
    /// batch element on the weight blocks (`Product::run_blocks`: the dense conv's bits).
    fn conv_blocks(
        &self,
        product: &Product,
        x: &Buf,
        bias: Option<&[f32]>,
        y: &mut [f32],
    ) -> Result<()> {
        let ([cin, h, w], m) = (product.input, product.cog);
        let (plane, out) = (cin * h * w, m * product.output[0] * product.output[1]);
        let fits = matches!(x.shape[..], [b, c, xh, xw] if [c, xh, xw] == [cin, h, w] && y.len() == b * out);
        if !fits || bias.is_some_and(|b| b.len() != m) {
            let what = format!("x {:?} does not fit the weight [{m}, {cin}, ..]", x.shape);
            return Err(Error::shape("conv", what));
        }
        (x.data.chunks_exact(plane).zip(y.chunks_exact_mut(out)))
            .try_for_each(|(xs, ys)| product.run_blocks(xs, &self.wt, bias, ys))
    }

    /// y [N] = bias + W·x for a 1×1 conv on one pixel, x [1, K, 1, 1], with the bits of the
    /// conv's dense `sgemm(N, 1, K)` call (C initialised with the bias, then accumulated onto).
    fn conv_pixel(&self, x: &Buf, bias: Option<&[f32]>, y: &mut [f32]) -> Result<()> {
        let (n, k) = (self.n, self.k);
        let (Some(w), Some(g)) = (&self.half, conv_plan(n, k)) else {
            return Err(Error::shape(
                "conv",
                "no fp16 GEMV for this conv on this CPU",
            ));
        };
        if x.shape[..] != [1, k, 1, 1] || y.len() != n || bias.is_some_and(|b| b.len() != n) {
            let what = format!("x {:?} does not fit the weight [{n}, {k}, 1, 1]", x.shape);
            return Err(Error::shape("conv", what));
        }
        if let Some(b) = bias {
            y.copy_from_slice(b);
        }
        gemv::run(&g, k, w, &x.data, y, bias.is_some(), true);
        Ok(())
    }

    /// Bytes of the f32 expansion (counted by every program that uses it).
    pub fn bytes(&self) -> u64 {
        4 * self.wt.len() as u64 + self.half.as_ref().map_or(0, |h| 2 * h.len() as u64)
    }

    /// y [M, N] = x [M, K] @ Wᵀ (f32 accumulation; the caller rounds to fp16). A shape that
    /// does not fit the weight is a shape error.
    pub fn matmul(&self, x: &Buf, y: &mut [f32]) -> Result<()> {
        let (n, k) = (self.n, self.k);
        let m = match x.shape[..] {
            [m, kx] if kx == k && y.len() == m * n => m,
            _ => {
                return Err(Error::shape(
                    "matmul",
                    format!("x {:?} does not fit the weight [{n}, {k}]", x.shape),
                ))
            }
        };
        if let Some(w) = &self.half {
            let g = gemv::plan((m, n, k), (k, 1), (1, k), n).filter(|_| m == 1);
            let g = g.ok_or_else(|| {
                Error::shape(
                    "matmul",
                    format!("x {:?} is not the one row of this fp16 GEMV", x.shape),
                )
            })?;
            gemv::run(&g, k, w, &x.data, y, false, true);
            return Ok(());
        }
        match self.kind {
            Layout::RowMajor => {
                sgemm(m, n, k, &x.data, k, 1, &self.wt, n, 1, y, n, false);
                return Ok(());
            }
            Layout::Blocks => {
                weight_blocks::matmul(&self.wt, (m, n, k), &x.data, y);
                return Ok(());
            }
            Layout::Panels => {}
        }
        let kc = gemm_packed::depth_block_wide(m, n, k).ok_or_else(|| {
            Error::shape(
                "matmul",
                format!("x {:?} is below the shared weight's GEMM size", x.shape),
            )
        })?;
        gemm_packed::gemm(kc, true, (m, n, k), &x.data, k, &self.wt, y, n);
        Ok(())
    }
}

/// The GEMV the `gemm` crate runs for a 1×1 conv on one pixel, C [N, 1] = W [N, K]·x [K, 1]
/// (the conv's `sgemm` strides), if `ops::gemv` reproduces it here.
fn conv_plan(n: usize, k: usize) -> Option<gemv::Plan> {
    gemv::plan((n, 1, k), (k, 1), (1, 1), 1)
}

/// For each node of `g`, the shared weight when it is a matmul or conv this module runs: a
/// matmul with `x` rank 2 [M, K], `transpose_x` false, `transpose_y` true, `y` a rank-2 fp16
/// constant [N, K], with M ≥ 2, N ≥ 2, K ≥ 3 and M·N > 256 (the `gemm` crate's blocked path,
/// see the module doc), or M = 1 where the crate's dense call is a GEMV that `ops::gemv`
/// reproduces; a conv of one group and no padding on x [1, K, 1, 1] with an fp16 constant
/// weight [N, K, 1, 1] whose GEMV `ops::gemv` reproduces.
pub fn shared_weights(g: &Graph) -> Vec<Option<SharedWeight>> {
    g.nodes
        .iter()
        .map(|nd| {
            if let Op::Conv(c) = &nd.op {
                return one_pixel_conv(g, nd, c).or_else(|| blocks_conv(g, nd, c));
            }
            let Op::MatMul(MatMul {
                transpose_x: false,
                transpose_y: true,
            }) = nd.op
            else {
                return None;
            };
            let (x, y) = (nd.inputs.first()?, nd.inputs.get(1)?);
            let Op::Const(c) = &g.nodes[y.node].op else {
                return None;
            };
            match (&g.ty(*x).shape[..], &c.shape[..]) {
                (&[m, k], &[n, kw])
                    if k == kw && m >= 2 && n >= 2 && k >= 3 && m * n >= MIN_OUTPUT =>
                {
                    Some(SharedWeight::of(c, Layout::matmul()))
                }
                (&[1, k], &[n, kw])
                    if k == kw && gemv::plan((1, n, k), (k, 1), (1, k), n).is_some() =>
                {
                    Some(SharedWeight::half(c, None))
                }
                _ => None,
            }
        })
        .collect()
}

/// The fp16 weight of conv node `nd` when it is a 1×1 conv on one pixel (see [`shared_weights`]).
fn one_pixel_conv(g: &Graph, nd: &crate::graph::Node, c: &Conv) -> Option<SharedWeight> {
    let (x, w) = (nd.inputs.first()?, nd.inputs.get(1)?);
    let Op::Const(wc) = &g.nodes[w.node].op else {
        return None;
    };
    let (&[1, k, 1, 1], &[n, kw, 1, 1]) = (&g.ty(*x).shape[..], &wc.shape[..]) else {
        return None;
    };
    let plain = c.groups == 1 && c.pad == [0; 4] && nd.inputs.len() <= 3;
    let bias = nd.inputs.len() == 3;
    (plain && k == kw && conv_plan(n, k).is_some())
        .then(|| SharedWeight::half(wc, Some(ConvUse::Pixel { bias })))
}

/// The weight blocks of conv node `nd` when its product prefers them (`Product::prefers_blocks`,
/// which holds only where this CPU's [`Layout`] is blocks; one group, an fp16 constant weight).
fn blocks_conv(g: &Graph, nd: &crate::graph::Node, c: &Conv) -> Option<SharedWeight> {
    let (x, w) = (nd.inputs.first()?, nd.inputs.get(1)?);
    let Op::Const(wc) = &g.nodes[w.node].op else {
        return None;
    };
    let product = c.single_product(&g.ty(*x).shape, &wc.shape)?;
    if !product.prefers_blocks() || nd.inputs.len() > 3 {
        return None;
    }
    let bias = nd.inputs.len() == 3;
    Some(SharedWeight {
        conv: Some(ConvUse::Blocks { product, bias }),
        ..SharedWeight::of(wc, Layout::here())
    })
}

/// Nodes of `g` that are constants whose every use is the weight (input 1) of a node `i` with
/// `weight_step[i]` (a packed or shared matmul) and that are not graph outputs: their dense
/// value is never needed.
pub fn only_weight_uses(g: &Graph, weight_step: &[bool]) -> Vec<bool> {
    let mut other_use = vec![false; g.nodes.len()];
    for (i, nd) in g.nodes.iter().enumerate() {
        for (slot, v) in nd.inputs.iter().enumerate() {
            if !weight_step[i] || slot != 1 {
                other_use[v.node] = true;
            }
        }
    }
    for (_, v) in &g.outputs {
        other_use[v.node] = true;
    }
    (0..g.nodes.len())
        .map(|i| matches!(g.nodes[i].op, Op::Constexpr(_) | Op::Const(_)) && !other_use[i])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::gemm::tests::rand_vec;

    fn fp16_const(shape: [usize; 2], seed: u64) -> Const {
        let values = rand_vec(shape[0] * shape[1], seed)
            .iter()
            .map(|&v| f16::from_f32(v * 3.0))
            .collect();
        Const {
            shape: shape.to_vec(),
            values: Arc::new(values),
        }
    }

    /// The shared [K, N] weight gives the bits of the dense [N, K] `sgemm` call it replaces
    /// (blocked-path shapes: square, tall, wide, K past one cache block, odd edges), and an
    /// independent f64 dot product agrees to f32 accuracy.
    #[test]
    fn shared_layout_is_bit_identical_to_the_dense_call() {
        for (m, n, k) in [
            (128, 384, 384),
            (128, 1536, 384),
            (77, 384, 1536),
            (2, 129, 3),
            (17, 33, 700),
            (300, 5, 64),
        ] {
            let c = fp16_const([n, k], 7 + m as u64);
            let w: Vec<f32> = c.values.iter().map(|v| v.to_f32()).collect();
            let x = Buf {
                shape: vec![m, k],
                data: rand_vec(m * k, 3),
            };
            let mut dense = vec![0f32; m * n];
            sgemm(m, n, k, &x.data, k, 1, &w, 1, k, &mut dense, n, false);
            let mut got = vec![f32::NAN; m * n];
            SharedWeight::of(&c, Layout::matmul())
                .matmul(&x, &mut got)
                .unwrap();
            for (i, (g, d)) in got.iter().zip(&dense).enumerate() {
                assert_eq!(g.to_bits(), d.to_bits(), "({m}, {n}, {k}) element {i}");
                let (r, j) = (i / n, i % n);
                let want: f64 = (0..k)
                    .map(|p| x.data[r * k + p] as f64 * w[j * k + p] as f64)
                    .sum();
                assert!((*g as f64 - want).abs() <= 1e-4 * want.abs().max(1.0));
            }
        }
    }

    /// One row (x [1, K]) runs the fp16 GEMV: every bit of the dense [N, K] `sgemm` call
    /// (the crate's horizontal kernel for N ≤ 256, its row-major GEMV above; MobileNetV3's
    /// classifier shapes), an independent f64 dot product agrees, and an x of two rows is an
    /// error naming its shape.
    #[test]
    fn one_row_reads_the_fp16_weight_with_the_dense_bits() {
        for (n, k) in [(1024, 576), (1000, 1024), (64, 240), (257, 33), (3, 1030)] {
            // Where `ops::gemv` does not reproduce the crate (AVX-512 CPUs), no step takes the
            // fp16 weight (`shared_weights` asks the same plan).
            if gemv::plan((1, n, k), (k, 1), (1, k), n).is_none() {
                continue;
            }
            let c = fp16_const([n, k], 11 + n as u64);
            let w: Vec<f32> = c.values.iter().map(|v| v.to_f32()).collect();
            let x = Buf {
                shape: vec![1, k],
                data: rand_vec(k, 5),
            };
            let mut dense = vec![0f32; n];
            sgemm(1, n, k, &x.data, k, 1, &w, 1, k, &mut dense, n, false);
            let shared = SharedWeight::half(&c, None);
            assert_eq!(shared.bytes(), 2 * (n * k) as u64);
            let mut got = vec![f32::NAN; n];
            shared.matmul(&x, &mut got).unwrap();
            for (j, (g, d)) in got.iter().zip(&dense).enumerate() {
                assert_eq!(g.to_bits(), d.to_bits(), "({n}, {k}) element {j}");
                let want: f64 = (0..k).map(|p| x.data[p] as f64 * w[j * k + p] as f64).sum();
                assert!((*g as f64 - want).abs() <= 1e-4 * want.abs().max(1.0));
            }
            let two = Buf {
                shape: vec![2, k],
                data: rand_vec(2 * k, 6),
            };
            let err = shared.matmul(&two, &mut vec![0.0; 2 * n]).unwrap_err();
            assert!(err.to_string().contains(&format!("{:?}", [2, k])), "{err}");
        }
    }

    /// A 1×1 conv on one pixel (MobileNetV3's squeeze-excite shapes, both sides of the crate's
    /// horizontal bound N = 256, with and without bias) runs the fp16 GEMV with every bit of
    /// the dense conv; an x of another shape is an error.
    #[test]
    fn one_pixel_conv_reads_the_fp16_weight_with_the_dense_bits() {
        use crate::ops::Family;
        if conv_plan(576, 144).is_none() {
            return;
        }
        let conv = Conv {
            strides: [1, 1],
            pad: [0; 4],
            dilations: [1, 1],
            groups: 1,
        };
        for (n, k) in [
            (8, 16),
            (24, 96),
            (144, 576),
            (576, 144),
            (300, 40),
            (3, 1030),
        ] {
            let mut c = fp16_const([n, k], 13 + n as u64);
            c.shape = vec![n, k, 1, 1];
            let buf = |shape: &[usize], data: Vec<f32>| Buf {
                shape: shape.to_vec(),
                data,
            };
            let w = buf(&c.shape, c.values.iter().map(|v| v.to_f32()).collect());
            let (x, b) = (
                buf(&[1, k, 1, 1], rand_vec(k, 8)),
                buf(&[n], rand_vec(n, 9)),
            );
            for with_bias in [false, true] {
                let ins: Vec<&Buf> = [&x, &w, &b][..2 + with_bias as usize].to_vec();
                let mut dense = [Buf::zeros(&[1, n, 1, 1])];
                conv.eval(&ins, &mut dense).unwrap();
                let mut got = vec![f32::NAN; n];
                let shared = SharedWeight::half(&c, Some(ConvUse::Pixel { bias: with_bias }));
                let bufs = [x.clone(), w.clone(), b.clone()];
                shared.run(&bufs, &[0, 1, 2], &mut got).unwrap();
                for (j, (g, d)) in got.iter().zip(&dense[0].data).enumerate() {
                    assert_eq!(g.to_bits(), d.to_bits(), "({n}, {k}) bias {with_bias} {j}");
                }
                let wrong = buf(&[1, k, 2, 1], rand_vec(2 * k, 8));
                let bufs = [wrong, w.clone(), b.clone()];
                assert!(shared.run(&bufs, &[0, 1, 2], &mut got).is_err());
            }
        }
    }

    /// Two constants with the same values share one expansion; different values do not; a
    /// wrong x shape is an error, not a panic.
    #[test]
    fn equal_constants_share_one_expansion() {
        let (a, b, other) = (
            fp16_const([40, 24], 1),
            fp16_const([40, 24], 1),
            fp16_const([40, 24], 2),
        );
        let (wa, wb, wo) = (
            SharedWeight::of(&a, Layout::matmul()),
            SharedWeight::of(&b, Layout::matmul()),
            SharedWeight::of(&other, Layout::matmul()),
        );
        assert!(Arc::ptr_eq(&wa.wt, &wb.wt));
        assert!(!Arc::ptr_eq(&wa.wt, &wo.wt));
        let padded = if Layout::matmul() == Layout::Panels {
            48
        } else {
            40
        };
        assert_eq!(wa.bytes(), 4 * padded * 24);
        let x = Buf::zeros(&[3, 23]);
        assert!(wa.matmul(&x, &mut [0.0; 3 * 40]).is_err());
    }
}
