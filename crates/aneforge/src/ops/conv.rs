//! 2-D convolution (NCHW): stride, explicit padding (t, b, l, r), dilation, groups, optional bias;
//! the weight is baked (`conv2d`) or a graph tensor (`dynamic_conv`, batch 1).
//! Also the sliding-window helpers (output size, input taps, MIL window parameters) shared with pooling.

use super::conv_depthwise::Depthwise;
use super::conv_gemm::Product;
use super::io::expect_fp16;
use super::{Buf, Family, Op, TensorType};
use crate::error::{Error, Result};
use crate::mil::{Literal, MilArgs, MilOp};

/// Widest kernel the ANE accepts.
pub const MAX_KERNEL_WIDTH: usize = 15;

/// The MIL op name of [`Conv`].
pub const MIL_NAME: &str = "conv";

/// MIL ops this family prints.
pub const MIL_OPS: &[&str] = &[MIL_NAME];

/// MIL `conv(x, weight, bias?, strides, pad_type = "custom", pad, dilations, groups)`.
/// Inputs: x [N, Cin, H, W], weight [Cout, Cin/groups, kH, kW], optional bias [Cout].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conv {
    pub strides: [usize; 2],
    /// Padding (top, bottom, left, right).
    pub pad: [usize; 4],
    pub dilations: [usize; 2],
    pub groups: usize,
}

/// Builder options for [`conv2d`]: stride [sH, sW], pad [t, b, l, r], dilation [dH, dW], groups.
#[derive(Clone, Copy, Debug)]
pub struct ConvOptions {
    pub stride: [usize; 2],
    pub pad: [usize; 4],
    pub dilation: [usize; 2],
    pub groups: usize,
}

impl Default for ConvOptions {
    /// Stride 1, no padding, dilation 1, one group.
    fn default() -> Self {
        ConvOptions {
            stride: [1, 1],
            pad: [0; 4],
            dilation: [1, 1],
            groups: 1,
        }
    }
}

/// Output [H', W'] of a 2-D sliding window over `input` [H, W] with padding [t, b, l, r]; errors
/// (naming `op`) for a zero kernel, stride or dilation, or a window larger than the padded input.
pub fn window_output(
    op: &str,
    input: [usize; 2],
    kernel: [usize; 2],
    strides: [usize; 2],
    dilations: [usize; 2],
    pad: [usize; 4],
) -> Result<[usize; 2]> {
    if kernel.contains(&0) || strides.contains(&0) || dilations.contains(&0) {
        return Err(Error::shape(op, format!("kernel {kernel:?}, strides {strides:?} and dilations {dilations:?} must all be >= 1")));
    }
    check_int32(
        op,
        &[
            ("strides", &strides),
            ("dilations", &dilations),
            ("pad", &pad),
        ],
    )?;
    let mut out = [0; 2];
    for a in 0..2 {
        let span = dilations[a].saturating_mul(kernel[a] - 1).saturating_add(1);
        let padded = input[a]
            .saturating_add(pad[2 * a])
            .saturating_add(pad[2 * a + 1]);
        if span > padded {
            let what = format!("kernel {kernel:?} with dilations {dilations:?}");
            return Err(Error::shape(op, format!("{what} spans {span} along {}, more than the padded input {input:?} + pad {pad:?}", ["H", "W"][a])));
        }
        out[a] = (padded - span) / strides[a] + 1;
    }
    Ok(out)
}

/// Errors (naming `op`, the parameter and its values) unless every value fits the int32 that
/// MIL stores window parameters in, so the program written is the one that ran.
pub fn check_int32(op: &str, params: &[(&str, &[usize])]) -> Result<()> {
    for (name, v) in params {
        if v.iter().any(|&x| x > i32::MAX as usize) {
            return Err(Error::value(
                op,
                format!("{name} {v:?} must each be at most {} (MIL int32)", i32::MAX),
            ));
        }
    }
    Ok(())
}

/// Input index read by output position `o` at kernel tap `k` along one axis, or `None` in the padding.
pub fn tap(
    o: usize,
    k: usize,
    stride: usize,
    dilation: usize,
    pad_lo: usize,
    size: usize,
) -> Option<usize> {
    (o * stride + k * dilation)
        .checked_sub(pad_lo)
        .filter(|&i| i < size)
}

/// A MIL int32 vector of window parameters (validated extents always fit in i32).
pub fn ints(v: &[usize]) -> Literal {
    Literal::Ints(v.iter().map(|&x| x as i32).collect())
}

/// Take a window parameter of exactly `N` non-negative ints.
pub fn take_sizes<const N: usize>(args: &mut MilArgs, name: &str) -> Result<[usize; N]> {
    let v = args.sizes(name)?;
    v.as_slice().try_into().map_err(|_| {
        args.error(format!(
            "parameter '{name}' must have {N} values, got {v:?}"
        ))
    })
}

/// Take `pad_type`, which must be "custom" (the only spelling the printer emits).
pub fn take_custom_pad(args: &mut MilArgs) -> Result<()> {
    match args.string("pad_type")?.as_str() {
        "custom" => Ok(()),
        other => Err(args.error(format!("pad_type '{other}' is not supported (only custom)"))),
    }
}

/// Fill `dst` (one output row) with input row `src` read at column ox·`stride` + `offset` −
/// `pad_lo` for each output column ox, and `fill` where that column falls outside the row.
pub fn window_row(src: &[f32], [offset, stride, pad_lo]: [usize; 3], fill: f32, dst: &mut [f32]) {
    let (w, ow) = (src.len(), dst.len());
    // Output columns ox whose input column lies inside [0, W).
    let shift = offset as isize - pad_lo as isize;
    let lo = if shift >= 0 {
        0
    } else {
        (-shift as usize).div_ceil(stride)
    }
    .min(ow);
    let hi = if shift >= w as isize {
        0
    } else {
        (w as isize - shift) as usize
    }
    .div_ceil(stride)
    .clamp(lo, ow);
    dst[..lo].fill(fill);
    dst[hi..].fill(fill);
    if lo == hi {
        return; // this tap reads only padding along W (e.g. wide dilation or pad)
    }
    let first = (lo as isize * stride as isize + shift) as usize;
    gather_strided(&src[first..], stride, &mut dst[lo..hi]);
}

/// dst[i] = src[i·`stride`] for every i < dst.len() (src holds at least (len − 1)·stride + 1
/// values): a copy for stride 1, AVX2 de-interleaving for stride 2 when the CPU has it.
pub fn gather_strided(src: &[f32], stride: usize, dst: &mut [f32]) {
    if stride == 1 {
        return dst.copy_from_slice(&src[..dst.len()]);
    }
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if stride == 2 && std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the feature the function is compiled for was just detected.
        done = unsafe { gather_even_avx2(src, dst) };
    }
    let rest = src.iter().skip(done * stride).step_by(stride);
    dst[done..].iter_mut().zip(rest).for_each(|(v, &s)| *v = s);
}

/// The first 8·⌊min(dst.len(), src.len() / 2) / 8⌋ values of [`gather_strided`] at stride 2
/// (two loads, one shuffle, one lane permute per 8 outputs); returns how many it wrote.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn gather_even_avx2(src: &[f32], dst: &mut [f32]) -> usize {
    use std::arch::x86_64::*;
    let blocks = dst.len().min(src.len() / 2) / 8;
    for j in 0..blocks {
        // In bounds: 16·j + 16 ≤ src.len() and 8·j + 8 ≤ dst.len().
        let s = src.as_ptr().add(16 * j);
        let (a, b) = (_mm256_loadu_ps(s), _mm256_loadu_ps(s.add(8)));
        // Per 128-bit lane (a0 a2 b0 b2 | a4 a6 b4 b6), then 64-bit pairs in order 0, 2, 1, 3.
        let even = _mm256_castps_pd(_mm256_shuffle_ps(a, b, 0b10_00_10_00));
        let even = _mm256_castpd_ps(_mm256_permute4x64_pd(even, 0b11_01_10_00));
        _mm256_storeu_ps(dst.as_mut_ptr().add(8 * j), even);
    }
    8 * blocks
}

/// Validated conv geometry.
struct Geom {
    n: usize,
    cin: usize,
    h: usize,
    w: usize,
    cout: usize,
    kh: usize,
    kw: usize,
    oh: usize,
    ow: usize,
}

impl Conv {
    /// Check x and weight shapes against the parameters; errors name the shapes.
    fn geometry(&self, xs: &[usize], ws: &[usize]) -> Result<Geom> {
        let err = |msg: String| {
            Err(Error::shape(
                MIL_NAME,
                format!("x {xs:?}, weight {ws:?}: {msg}"),
            ))
        };
        let (&[n, cin, h, w], &[cout, cg, kh, kw]) = (xs, ws) else {
            return err(
                "x must be rank 4 [N, Cin, H, W] and weight rank 4 [Cout, Cin/groups, kH, kW]"
                    .into(),
            );
        };
        let g = self.groups;
        if g == 0 {
            return err("groups must be >= 1".into());
        }
        if cg.checked_mul(g) != Some(cin) {
            return err(format!(
                "Cin = {cin} but weight has {cg} input channels per group x {g} groups"
            ));
        }
        if cout % g != 0 {
            return err(format!("Cout = {cout} is not divisible by groups = {g}"));
        }
        if kw > MAX_KERNEL_WIDTH {
            return err(format!(
                "kernel width {kw} exceeds the ANE limit of {MAX_KERNEL_WIDTH}"
            ));
        }
        let [oh, ow] = window_output(
            MIL_NAME,
            [h, w],
            [kh, kw],
            self.strides,
            self.dilations,
            self.pad,
        )?;
        Ok(Geom {
            n,
            cin,
            h,
            w,
            cout,
            kh,
            kw,
            oh,
            ow,
        })
    }
}

impl Family for Conv {
    fn name(&self) -> &'static str {
        MIL_NAME
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        if !(2..=3).contains(&inputs.len()) {
            return Err(Error::shape(
                MIL_NAME,
                format!(
                    "expects 2 or 3 inputs (x, weight, bias?), got {}",
                    inputs.len()
                ),
            ));
        }
        expect_fp16(MIL_NAME, inputs)?;
        let g = self.geometry(&inputs[0].shape, &inputs[1].shape)?;
        if let Some(b) = inputs.get(2).filter(|b| b.shape != [g.cout]) {
            return Err(Error::shape(
                MIL_NAME,
                format!(
                    "bias must have shape [{}] (Cout of weight {:?}), got {:?}",
                    g.cout, inputs[1].shape, b.shape
                ),
            ));
        }
        Ok(vec![TensorType::fp16(vec![g.n, g.cout, g.oh, g.ow])])
    }
    fn mil(&self) -> MilOp {
        conv_params(
            MilOp::new(MIL_NAME, &["x", "weight", "bias"]),
            self.strides,
            self.pad,
            self.dilations,
            self.groups,
        )
    }
    fn eval(&self, ins: &[&Buf], out: &mut [Buf]) -> Result<()> {
        let g = self.geometry(&ins[0].shape, &ins[1].shape)?;
        if let Some(dw) = self.depthwise(&g) {
            let bias = ins.get(2).map(|b| &b.data[..]);
            return dw.run(&ins[0].data, &ins[1].data, bias, &mut out[0].data);
        }
        self.eval_im2col(ins, out)
    }
}

impl Conv {
    /// The direct depthwise kernel for this geometry, when it computes it.
    fn depthwise(&self, g: &Geom) -> Option<Depthwise> {
        let dw = Depthwise {
            input: [g.h, g.w],
            kernel: [g.kh, g.kw],
            output: [g.oh, g.ow],
            strides: self.strides,
            dilations: self.dilations,
            pad: self.pad,
        };
        (self.groups == g.cin && g.cout == g.cin && dw.matches_gemv()).then_some(dw)
    }

    /// The GEMM product of one (batch, group).
    fn product(&self, g: &Geom) -> Product {
        Product {
            input: [g.cin / self.groups, g.h, g.w],
            kernel: [g.kh, g.kw],
            output: [g.oh, g.ow],
            strides: self.strides,
            dilations: self.dilations,
            pad: self.pad,
            cog: g.cout / self.groups,
        }
    }

    /// The GEMM product of one batch element of this conv on x of shape `x` with a weight of
    /// shape `w`, when the conv has one group and the shapes are valid.
    pub(crate) fn single_product(&self, x: &[usize], w: &[usize]) -> Option<Product> {
        let g = self.geometry(x, w).ok()?;
        (self.groups == 1).then(|| self.product(&g))
    }

    /// [`Family::eval`] without the bias when adding it afterwards, `out + bias[channel]`, gives
    /// the same bits (see [`Product::bias_commutes`]); returns whether the caller must add it.
    pub(crate) fn eval_bias_later(&self, ins: &[&Buf], out: &mut [Buf]) -> Result<bool> {
        let g = self.geometry(&ins[0].shape, &ins[1].shape)?;
        if ins.len() == 3 && self.depthwise(&g).is_none() && self.product(&g).bias_commutes() {
            self.eval_im2col(&ins[..2], out)?;
            return Ok(true);
        }
        self.eval(ins, out).map(|()| false)
    }

    /// [`Family::eval`] with `post(i, planes)` on the output planes i.. (whole planes, each
    /// once) right after the direct depthwise kernel writes them, when this conv is one it
    /// computes; else nothing is done and the result is false.
    pub(crate) fn eval_depthwise_then(
        &self,
        ins: &[&Buf],
        out: &mut [Buf],
        post: impl Fn(usize, &mut [f32]) + Sync,
    ) -> Result<bool> {
        let g = self.geometry(&ins[0].shape, &ins[1].shape)?;
        let Some(dw) = self.depthwise(&g) else {
            return Ok(false);
        };
        let bias = ins.get(2).map(|b| &b.data[..]);
        dw.run_then(&ins[0].data, &ins[1].data, bias, &mut out[0].data, post)?;
        Ok(true)
    }

    /// [`Family::eval`] through im2col + one GEMM per (batch, group); every conv but the
    /// depthwise ones that [`Depthwise`] computes directly (with the same bits).
    pub(crate) fn eval_im2col(&self, ins: &[&Buf], out: &mut [Buf]) -> Result<()> {
        let (x, w) = (ins[0], &ins[1].data);
        let g = self.geometry(&x.shape, &ins[1].shape)?;
        let product = self.product(&g);
        let ([cg, _, _], cog, p, hw) = (product.input, product.cog, g.oh * g.ow, g.h * g.w);
        let od = &mut out[0].data;
        // The bias initialises each output plane; the GEMM then accumulates onto it.
        if let Some(b) = ins.get(2) {
            od.chunks_mut(p)
                .zip(b.data.iter().cycle())
                .for_each(|(plane, &v)| plane.fill(v));
        }
        if product.batch(g.n) > 1 {
            return product.run_batched(&x.data, w, od, [g.n, self.groups], ins.len() == 3);
        }
        for b in 0..g.n {
            for gi in 0..self.groups {
                let xo = (b * g.cin + gi * cg) * hw;
                let oo = (b * g.cout + gi * cog) * p;
                let (xs, os) = (&x.data[xo..xo + cg * hw], &mut od[oo..oo + cog * p]);
                product.run(xs, w, gi, os, ins.len() == 3)?;
            }
        }
        Ok(())
    }
}

/// Parse `conv`.
pub fn from_mil(op: &str, args: &mut MilArgs) -> Option<Result<Op>> {
    if op != MIL_NAME {
        return None;
    }
    Some(take_conv_params(args).map(|o| {
        Op::Conv(Conv {
            strides: o.stride,
            pad: o.pad,
            dilations: o.dilation,
            groups: o.groups,
        })
    }))
}

/// Add the parameters `conv` and `conv_transpose` share, in alphabetical order.
pub fn conv_params(
    m: MilOp,
    strides: [usize; 2],
    pad: [usize; 4],
    dilations: [usize; 2],
    groups: usize,
) -> MilOp {
    m.param("dilations", ints(&dilations))
        .param("groups", Literal::Int32(groups as i32))
        .param("pad", ints(&pad))
        .param("pad_type", Literal::Str("custom".into()))
        .param("strides", ints(&strides))
}

/// Take the parameters `conv` and `conv_transpose` share: `pad_type = "custom"`, strides, pad, dilations, groups.
pub fn take_conv_params(args: &mut MilArgs) -> Result<ConvOptions> {
    take_custom_pad(args)?;
    let g = args.int("groups")?;
    let groups = usize::try_from(g)
        .map_err(|_| args.error(format!("groups must be non-negative, got {g}")))?;
    Ok(ConvOptions {
        stride: take_sizes(args, "strides")?,
        pad: take_sizes(args, "pad")?,
        dilation: take_sizes(args, "dilations")?,
        groups,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::graph::build::conv::*;
    use crate::ops::gemm::tests::{assert_close, rand_vec};
    use crate::ops::io::HostArray;

    /// Strided gathers give src[i·stride] at every position: strides 1–3, lengths around the
    /// 8-output AVX2 blocks of stride 2 (0, 1, 7, 8, 9, 16, 17, 40), with the source exactly as
    /// long as needed or longer.
    #[test]
    fn gather_strided_picks_every_stride_th_value() {
        for stride in 1..=3 {
            for len in [0, 1, 7, 8, 9, 16, 17, 40] {
                for extra in [0, 1, 5] {
                    let n = if len == 0 {
                        extra
                    } else {
                        (len - 1) * stride + 1 + extra
                    };
                    let src: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 3.0).collect();
                    let mut dst = vec![f32::NAN; len];
                    gather_strided(&src, stride, &mut dst);
                    let want: Vec<f32> =
                        (0..len).map(|i| (i * stride) as f32 * 0.5 - 3.0).collect();
                    assert_eq!(dst, want, "stride {stride} len {len} extra {extra}");
                }
            }
        }
    }

    /// Assert `op` prints alphabetically ordered params and `parse(print(op)) == op`, consuming every param.
    pub(crate) fn mil_roundtrip(op: Op, parse: fn(&str, &mut MilArgs) -> Option<Result<Op>>) {
        let m = op.family().mil();
        assert!(
            m.params.windows(2).all(|p| p[0].0 < p[1].0),
            "{}: params not in alphabetical order",
            m.op
        );
        let params = m
            .params
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        let mut args = MilArgs::new("model.mil", "s", params);
        assert_eq!(
            parse(m.op, &mut args).expect("op not recognised").unwrap(),
            op
        );
        assert!(args.params.is_empty(), "unclaimed params {:?}", args.params);
    }

    fn conv(strides: [usize; 2], pad: [usize; 4], dilations: [usize; 2], groups: usize) -> Conv {
        Conv {
            strides,
            pad,
            dilations,
            groups,
        }
    }

    /// Direct-loop convolution in f64.
    fn naive(
        c: &Conv,
        xs: [usize; 4],
        x: &[f32],
        ws: [usize; 4],
        w: &[f32],
        bias: Option<&[f32]>,
    ) -> Vec<f64> {
        let ([n, cin, h, wd], [cout, cg, kh, kw]) = (xs, ws);
        let ([sh, sw], [dh, dw], [pt, pb, pl, pr]) = (c.strides, c.dilations, c.pad);
        let oh = (h + pt + pb - dh * (kh - 1) - 1) / sh + 1;
        let ow = (wd + pl + pr - dw * (kw - 1) - 1) / sw + 1;
        let cog = cout / c.groups;
        let mut out = Vec::new();
        for b in 0..n {
            for co in 0..cout {
                for oy in 0..oh {
                    for ox in 0..ow {
                        let mut s = bias.map_or(0.0, |bv| bv[co] as f64);
                        for ci in 0..cg {
                            for ky in 0..kh {
                                for kx in 0..kw {
                                    let iy = (oy * sh + ky * dh) as isize - pt as isize;
                                    let ix = (ox * sw + kx * dw) as isize - pl as isize;
                                    if iy < 0 || ix < 0 || iy >= h as isize || ix >= wd as isize {
                                        continue;
                                    }
                                    let xc = (co / cog) * cg + ci;
                                    let xv = x
                                        [((b * cin + xc) * h + iy as usize) * wd + ix as usize]
                                        as f64;
                                    s += xv * w[((co * cg + ci) * kh + ky) * kw + kx] as f64;
                                }
                            }
                        }
                        out.push(s);
                    }
                }
            }
        }
        out
    }

    fn check(c: Conv, xs: [usize; 4], ws: [usize; 4], with_bias: bool) {
        let x = Buf {
            shape: xs.to_vec(),
            data: rand_vec(xs.iter().product(), 21),
        };
        let w = Buf {
            shape: ws.to_vec(),
            data: rand_vec(ws.iter().product(), 22),
        };
        let b = Buf {
            shape: vec![ws[0]],
            data: rand_vec(ws[0], 23),
        };
        let mut types = vec![TensorType::fp16(xs.to_vec()), TensorType::fp16(ws.to_vec())];
        let mut ins = vec![&x, &w];
        if with_bias {
            types.push(TensorType::fp16(vec![ws[0]]));
            ins.push(&b);
        }
        let want = naive(
            &c,
            xs,
            &x.data,
            ws,
            &w.data,
            with_bias.then_some(&b.data[..]),
        );
        let shape = c.infer(&types).unwrap().remove(0).shape;
        assert_eq!(
            shape.iter().product::<usize>(),
            want.len(),
            "{c:?} {xs:?} {ws:?}: output {shape:?}"
        );
        let mut out = [Buf::zeros(&shape)];
        c.eval(&ins, &mut out).unwrap();
        assert_close(&out[0].data, &want, 1e-5);
    }

    /// A conv whose products each take one depth block leaves its bias out, and out + bias is
    /// every bit of the conv with the bias (at 1 thread and the default pool); deeper, tiny
    /// and depthwise ones keep it in.
    #[test]
    fn bias_added_later_keeps_every_bit() {
        let cases = [
            (
                conv([1, 1], [0; 4], [1, 1], 1),
                [1, 64, 20, 20],
                [32, 64, 1, 1],
                true,
            ),
            (
                conv([2, 2], [0; 4], [1, 1], 1),
                [2, 32, 16, 16],
                [64, 32, 1, 1],
                true,
            ),
            (
                conv([1, 1], [1; 4], [1, 1], 2),
                [1, 8, 16, 16],
                [8, 4, 3, 3],
                true,
            ),
            (
                conv([1, 1], [1; 4], [1, 1], 1),
                [1, 56, 30, 30],
                [16, 56, 3, 3],
                true,
            ),
            (
                conv([1, 1], [1; 4], [1, 1], 1),
                [1, 64, 30, 30],
                [16, 64, 3, 3],
                false,
            ),
            (
                conv([1, 1], [0; 4], [1, 1], 1),
                [1, 4, 3, 3],
                [2, 4, 1, 1],
                false,
            ),
            (
                conv([1, 1], [1; 4], [1, 1], 8),
                [1, 8, 20, 20],
                [8, 1, 3, 3],
                false,
            ),
        ];
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        for (c, xs, ws, later) in cases {
            let buf = |shape: &[usize], seed| Buf {
                shape: shape.to_vec(),
                data: rand_vec(shape.iter().product(), seed),
            };
            let (x, w, b) = (buf(&xs, 31), buf(&ws, 32), buf(&ws[..1], 33));
            let types: Vec<TensorType> = [&x, &w, &b]
                .iter()
                .map(|b| TensorType::fp16(b.shape.clone()))
                .collect();
            let shape = c.infer(&types).unwrap().remove(0).shape;
            for pool in [None, Some(&one)] {
                let run = |f: &(dyn Fn() -> (Vec<f32>, bool) + Sync)| match pool {
                    Some(p) => p.install(f),
                    None => f(),
                };
                let (want, _) = run(&|| {
                    let mut out = [Buf::zeros(&shape)];
                    c.eval(&[&x, &w, &b], &mut out).unwrap();
                    (out[0].data.clone(), true)
                });
                let (mut got, deferred) = run(&|| {
                    let mut out = [Buf::zeros(&shape)];
                    let d = c.eval_bias_later(&[&x, &w, &b], &mut out).unwrap();
                    (out.into_iter().next().unwrap().data, d)
                });
                assert_eq!(deferred, later, "{c:?} {xs:?} {ws:?}");
                if deferred {
                    let plane = shape[2] * shape[3];
                    for (i, p) in got.chunks_mut(plane).enumerate() {
                        p.iter_mut().for_each(|v| *v += b.data[i % ws[0]]);
                    }
                }
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&want), "{c:?} {xs:?} {ws:?}");
            }
        }
    }

    #[test]
    fn kernel_matches_naive_on_awkward_shapes() {
        check(
            conv([1, 1], [1, 1, 1, 1], [1, 1], 1),
            [2, 3, 7, 7],
            [5, 3, 3, 3],
            true,
        );
        check(
            conv([2, 2], [0, 2, 1, 3], [2, 2], 2),
            [1, 6, 7, 9],
            [4, 3, 3, 2],
            false,
        );
        check(
            conv([2, 1], [1, 1, 0, 0], [1, 1], 5),
            [2, 5, 7, 1],
            [5, 1, 3, 1],
            true,
        );
        check(
            conv([1, 2], [2, 0, 0, 1], [2, 1], 3),
            [2, 3, 7, 7],
            [9, 1, 3, 3],
            false,
        );
        check(
            conv([1, 1], [0; 4], [1, 1], 1),
            [2, 7, 5, 3],
            [3, 7, 1, 1],
            true,
        );
        check(
            conv([1, 1], [0; 4], [3, 3], 7),
            [1, 7, 1, 7],
            [7, 1, 1, 1],
            true,
        );
        check(
            conv([2, 2], [0; 4], [1, 1], 1),
            [1, 3, 7, 7],
            [2, 3, 1, 1],
            false,
        );
        check(
            conv([1, 1], [1, 1, 1, 1], [1, 1], 1),
            [1, 1, 1, 1],
            [1, 1, 3, 3],
            true,
        );
        check(
            conv([1, 1], [1, 1, 1, 1], [1, 1], 1),
            [2, 16, 40, 40],
            [8, 16, 3, 3],
            true,
        );
        // Stride 1, output as wide as the input (one copy per tap): dilated, one-sided pad,
        // a kernel taller than the input, width 1.
        check(
            conv([1, 1], [2, 2, 2, 2], [2, 2], 1),
            [1, 3, 9, 6],
            [4, 3, 3, 3],
            true,
        );
        check(
            conv([1, 1], [0, 2, 0, 2], [1, 1], 1),
            [1, 2, 5, 4],
            [3, 2, 3, 3],
            false,
        );
        check(
            conv([1, 1], [3, 3, 1, 1], [1, 1], 1),
            [1, 2, 2, 3],
            [2, 2, 7, 3],
            true,
        );
        check(
            conv([1, 1], [1, 1, 0, 0], [1, 1], 1),
            [1, 2, 5, 1],
            [3, 2, 3, 1],
            true,
        );
    }

    #[test]
    fn infer_rejects_bad_shapes_without_panicking() {
        let t = |s: &[usize]| TensorType::fp16(s.to_vec());
        let ok = conv([1, 1], [0; 4], [1, 1], 1);
        let bad = |c: &Conv, ins: &[TensorType], needle: &str| {
            let e = c.infer(ins).unwrap_err().to_string();
            assert!(e.starts_with("conv: ") && e.contains(needle), "{e}");
        };
        bad(&ok, &[t(&[1, 3, 8]), t(&[4, 3, 1, 1])], "rank 4");
        bad(&ok, &[t(&[1, 3, 8, 8]), t(&[4, 2, 1, 1])], "Cin = 3");
        bad(
            &conv([1, 1], [0; 4], [1, 1], 2),
            &[t(&[1, 4, 8, 8]), t(&[3, 2, 1, 1])],
            "not divisible",
        );
        bad(
            &conv([1, 1], [0; 4], [1, 1], 0),
            &[t(&[1, 4, 8, 8]), t(&[3, 2, 1, 1])],
            "groups",
        );
        bad(&ok, &[t(&[1, 3, 8, 8]), t(&[4, 3, 1, 1]), t(&[3])], "bias");
        bad(
            &ok,
            &[t(&[1, 3, 8, 8]), t(&[4, 3, 1, 1]), t(&[1, 4])],
            "bias",
        );
        bad(
            &conv([0, 1], [0; 4], [1, 1], 1),
            &[t(&[1, 3, 8, 8]), t(&[4, 3, 1, 1])],
            ">= 1",
        );
        bad(
            &conv([1, 1], [0; 4], [1, 0], 1),
            &[t(&[1, 3, 8, 8]), t(&[4, 3, 1, 1])],
            ">= 1",
        );
        bad(
            &ok,
            &[t(&[1, 3, 2, 8]), t(&[4, 3, 3, 3])],
            "spans 3 along H",
        );
        bad(
            &conv([1, 1], [0; 4], [4, 4], 1),
            &[t(&[1, 3, 8, 8]), t(&[4, 3, 3, 3])],
            "spans 9",
        );
        bad(
            &ok,
            &[t(&[1, 3, 8, 20]), t(&[4, 3, 1, 16])],
            "kernel width 16 exceeds the ANE limit of 15",
        );
        bad(&ok, &[t(&[1, 3, 8, 8])], "2 or 3 inputs");
        assert!(conv([1, 1], [1, 1, 1, 1], [1, 1], 1)
            .infer(&[t(&[1, 3, 1, 1]), t(&[4, 3, 3, 3])])
            .is_ok());
    }

    #[test]
    fn builder_bakes_weight_and_bias() {
        let x = crate::input(&[1, 4, 9, 9]).unwrap();
        let (w, b) = (vec![0.5f32; 8 * 2 * 3 * 3], vec![0.0f32; 8]);
        let opts = ConvOptions {
            stride: [2, 2],
            pad: [1, 1, 1, 1],
            groups: 2,
            ..Default::default()
        };
        let y = conv2d(
            &x,
            HostArray::f32(&[8, 2, 3, 3], &w),
            Some(HostArray::f32(&[8], &b)),
            opts,
        )
        .unwrap();
        assert_eq!(y.shape(), [1, 8, 5, 5]);
        assert_eq!(y.node.srcs.len(), 3);
        assert!(conv2d(&x, HostArray::f32(&[8, 4, 3, 3], &w), None, opts).is_err());
        assert!(
            conv2d(
                &x,
                HostArray::f32(&[8, 2, 3, 3], &w),
                None,
                ConvOptions::default()
            )
            .is_err(),
            "groups 1 needs Cin/1"
        );
    }

    /// dynamic_conv feeds a graph tensor as the weight; batch must be 1 and shapes are checked.
    #[test]
    fn dynamic_conv_takes_a_tensor_weight() {
        let (x, w) = (
            crate::input(&[1, 4, 9, 9]).unwrap(),
            crate::input(&[6, 2, 3, 3]).unwrap(),
        );
        let opts = ConvOptions {
            pad: [1, 1, 1, 1],
            groups: 2,
            ..Default::default()
        };
        let y = dynamic_conv(&x, &w, opts).unwrap();
        assert_eq!((y.shape(), y.node.srcs.len()), (&[1usize, 6, 9, 9][..], 2));
        assert!(dynamic_conv(&crate::input(&[2, 4, 9, 9]).unwrap(), &w, opts).is_err());
        assert!(dynamic_conv(&x, &w, ConvOptions::default()).is_err());
    }

    #[test]
    fn mil_round_trips_and_rejects_unknown_pad_type() {
        mil_roundtrip(Op::Conv(conv([2, 1], [0, 1, 2, 3], [1, 2], 3)), from_mil);
        let mut m = Conv::mil(&conv([1, 1], [0; 4], [1, 1], 1)).params;
        m.retain(|(k, _)| *k != "pad_type");
        let mut params: std::collections::BTreeMap<_, _> =
            m.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        params.insert("pad_type".into(), Literal::Str("same".into()));
        let mut args = MilArgs::new("model.mil", "c", params);
        assert!(from_mil("conv", &mut args)
            .unwrap()
            .unwrap_err()
            .to_string()
            .contains("pad_type 'same'"));
        assert!(from_mil("matmul", &mut args).is_none());
    }
}
