//! Max and average pooling over the last two axes of NCHW tensors.

use super::conv::{gather_strided, ints, take_custom_pad, take_sizes, tap, window_output};
use super::io::{expect_fp16, expect_inputs};
use super::kernel::for_chunks;
use super::pool_max_s2::MaxS2;
use super::table::mil_kinds;
use super::{Buf, Family, Op, TensorType};
use crate::error::{Error, Result};
use crate::mil::{Literal, MilArgs, MilOp};

mil_kinds! {
    PoolKind =>
    /// The MIL op of each [`PoolKind`].
    pub enum PoolOp {
        Max = "max_pool",
        Avg = "avg_pool",
    }
}

/// MIL ops this family prints.
pub const MIL_OPS: &[&str] = PoolOp::MIL_NAMES;

/// Which pooling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolKind {
    Max,
    /// Average; `exclude_padding` = MIL `exclude_padding_from_average`.
    Avg {
        exclude_padding: bool,
    },
}

/// MIL `max_pool` / `avg_pool` with `pad_type = "custom"`, `ceil_mode = false`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pool {
    pub kind: PoolKind,
    pub kernel: [usize; 2],
    pub strides: [usize; 2],
    /// Padding (top, bottom, left, right).
    pub pad: [usize; 4],
}

impl Pool {
    /// Output [H', W'] for input shape `xs`, or a shape error naming the op and the shape.
    fn output(&self, xs: &[usize]) -> Result<[usize; 2]> {
        let &[_, _, h, w] = xs else {
            return Err(Error::shape(
                self.name(),
                format!("x must be rank 4 [N, C, H, W], got {xs:?}"),
            ));
        };
        let out = window_output(
            self.name(),
            [h, w],
            self.kernel,
            self.strides,
            [1, 1],
            self.pad,
        )?;
        let [kh, kw] = self.kernel;
        let [pt, pb, pl, pr] = self.pad;
        if pt.max(pb) >= kh || pl.max(pr) >= kw {
            return Err(Error::shape(
                self.name(),
                format!(
                    "pad {:?} must be smaller than the kernel {:?} (x {xs:?})",
                    self.pad, self.kernel
                ),
            ));
        }
        Ok(out)
    }

    /// Max-pool one [H, W] plane into `out` [H', W'], one output row at a time over the taps in
    /// (ky, kx) order: the same max chain per element as [`Pool::plane`] (a tap in the padding
    /// is skipped, as max(a, −inf) = a). Each input row is first split into its `sW` column
    /// phases (x[i·sW + r] for phase r), so every tap reads one contiguous run of a phase.
    fn max_plane(&self, x: &[f32], [h, w]: [usize; 2], out: &mut [f32], ow: usize) {
        let sw = self.strides[1];
        // Phase r of row iy: phases[(iy·sW + r)·wp ..][..len(r)], len(r) = ⌈(W − r) / sW⌉.
        let wp = w.div_ceil(sw);
        if self.kernel == [2, 2] && self.strides == [2, 2] && self.pad == [0; 4] {
            return max_2x2(x, w, out, ow);
        }
        if sw == 1 {
            return self.max_rows(x, [h, w, wp], out, ow);
        }
        PHASES.with_borrow_mut(|ph| {
            if sw == 2 {
                let (kernel, stride_h) = (self.kernel, self.strides[0]);
                let pad_top_left = [self.pad[0], self.pad[2]];
                let mut s2 = MaxS2 {
                    kernel,
                    stride_h,
                    pad_top_left,
                    phases: ph,
                };
                if s2.run(x, [h, w], out, ow) {
                    return;
                }
            }
            // Every slot a tap reads is written here (unread tail slots keep stale values).
            ph.resize(h * sw * wp, 0.0);
            for (row, dst) in x.chunks(w).zip(ph.chunks_mut(sw * wp)) {
                for (r, phase) in dst.chunks_mut(wp).enumerate().take(w) {
                    let len = (w - r).div_ceil(sw);
                    gather_strided(&row[r..], sw, &mut phase[..len]);
                }
            }
            self.max_rows(ph, [h, w, wp], out, ow)
        })
    }

    /// The output rows of [`Pool::max_plane`] from the column phases `phases` of the plane.
    fn max_rows(&self, phases: &[f32], [h, w, wp]: [usize; 3], out: &mut [f32], ow: usize) {
        let ([kh, kw], [sh, sw], [pt, _, pl, _]) = (self.kernel, self.strides, self.pad);
        for (oy, acc) in out.chunks_mut(ow).enumerate() {
            acc.fill(f32::NEG_INFINITY);
            for iy in (0..kh).filter_map(|ky| tap(oy, ky, sh, 1, pt, h)) {
                for kx in 0..kw {
                    // Input column ox·sW + kx − pL = (ox + shift)·sW + r.
                    let off = kx as isize - pl as isize;
                    let (r, shift) = (
                        off.rem_euclid(sw as isize) as usize,
                        off.div_euclid(sw as isize),
                    );
                    let len = (w - r.min(w)).div_ceil(sw) as isize;
                    let lo = (-shift).clamp(0, ow as isize) as usize;
                    let hi = (len - shift).clamp(lo as isize, ow as isize) as usize;
                    if lo < hi {
                        let first = ((iy * sw + r) * wp) as isize + lo as isize + shift;
                        let first = first as usize;
                        max_into(&mut acc[lo..hi], &phases[first..first + hi - lo]);
                    }
                }
            }
        }
    }

    /// Pool one [H, W] plane into `out` [H', W'].
    fn plane(&self, x: &[f32], [h, w]: [usize; 2], out: &mut [f32], ow: usize) {
        if self.kind == PoolKind::Max && ow > 0 {
            return self.max_plane(x, [h, w], out, ow);
        }
        let ([kh, kw], [sh, sw], [pt, _, pl, _]) = (self.kernel, self.strides, self.pad);
        for (o, v) in out.iter_mut().enumerate() {
            let (oy, ox) = (o / ow, o % ow);
            let (mut max, mut sum, mut count) = (f32::NEG_INFINITY, 0.0f32, 0usize);
            for iy in (0..kh).filter_map(|ky| tap(oy, ky, sh, 1, pt, h)) {
                for ix in (0..kw).filter_map(|kx| tap(ox, kx, sw, 1, pl, w)) {
                    let e = x[iy * w + ix];
                    max = max.max(e);
                    sum += e;
                    count += 1;
                }
            }
            *v = match self.kind {
                PoolKind::Max => max,
                PoolKind::Avg {
                    exclude_padding: true,
                } => sum / count as f32,
                PoolKind::Avg {
                    exclude_padding: false,
                } => sum / (kh * kw) as f32,
            };
        }
    }
}

impl Family for Pool {
    fn name(&self) -> &'static str {
        self.kind.mil_name()
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_inputs(self.name(), inputs, 1)?;
        expect_fp16(self.name(), inputs)?;
        let xs = &inputs[0].shape;
        let [oh, ow] = self.output(xs)?;
        Ok(vec![TensorType::fp16(vec![xs[0], xs[1], oh, ow])])
    }
    fn mil(&self) -> MilOp {
        let m = MilOp::new(self.name(), &["x"]).param("ceil_mode", Literal::Bool(false));
        let m = match self.kind {
            PoolKind::Max => m,
            PoolKind::Avg { exclude_padding } => m.param(
                "exclude_padding_from_average",
                Literal::Bool(exclude_padding),
            ),
        };
        m.param("kernel_sizes", ints(&self.kernel))
            .param("pad", ints(&self.pad))
            .param("pad_type", Literal::Str("custom".into()))
            .param("strides", ints(&self.strides))
    }
    fn eval(&self, ins: &[&Buf], out: &mut [Buf]) -> Result<()> {
        let x = ins[0];
        let [oh, ow] = self.output(&x.shape)?;
        let hw = [x.shape[2], x.shape[3]];
        for_chunks(
            &mut out[0].data,
            oh * ow,
            &x.data,
            hw[0] * hw[1],
            |o, xp| self.plane(xp, hw, o, ow),
        );
        Ok(())
    }
}

thread_local! {
    /// Column phases of one plane for strided max-pooling, reused across planes and calls.
    static PHASES: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// acc[i] = max(acc[i], x[i]) (exact), with AVX2 when the CPU has it.
fn max_into(acc: &mut [f32], x: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the feature the function is compiled for was just detected.
        unsafe { max_into_avx2(acc, x) };
        return;
    }
    acc.iter_mut().zip(x).for_each(|(a, &v)| *a = a.max(v));
}

/// [`max_into`] compiled for AVX2 (the loop vectorises to `vmaxps`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn max_into_avx2(acc: &mut [f32], x: &[f32]) {
    acc.iter_mut().zip(x).for_each(|(a, &v)| *a = a.max(v));
}

/// [`Pool::max_plane`] for 2×2 windows at stride 2 without padding, one pass per pair of rows
/// of the [H, W] plane `x`: each output is max(max(max(max(−inf, x₀₀), x₀₁), x₁₀), x₁₁), the
/// same chain in (ky, kx) order (with AVX2 when the CPU has it).
fn max_2x2(x: &[f32], w: usize, out: &mut [f32], ow: usize) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the feature the function is compiled for was just detected.
        unsafe { max_2x2_avx2(x, w, out, ow) };
        return;
    }
    max_2x2_rows(x, w, out, ow);
}

/// [`max_2x2`] compiled for AVX2 (the pair loop vectorises to de-interleaving loads and `vmaxps`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn max_2x2_avx2(x: &[f32], w: usize, out: &mut [f32], ow: usize) {
    max_2x2_rows(x, w, out, ow);
}

/// The body of [`max_2x2`].
#[inline(always)]
fn max_2x2_rows(x: &[f32], w: usize, out: &mut [f32], ow: usize) {
    for (rows, o) in x.chunks_exact(2 * w).zip(out.chunks_exact_mut(ow)) {
        let (r0, r1) = rows.split_at(w);
        let pairs = r0.chunks_exact(2).zip(r1.chunks_exact(2));
        for (v, (a, b)) in o.iter_mut().zip(pairs) {
            *v = f32::NEG_INFINITY.max(a[0]).max(a[1]).max(b[0]).max(b[1]);
        }
    }
}

/// Parse `max_pool` / `avg_pool`.
pub fn from_mil(op: &str, args: &mut MilArgs) -> Option<Result<Op>> {
    let pool = PoolOp::from_mil_name(op)?;
    Some((|| {
        if args.bool("ceil_mode")? {
            return Err(args.error("ceil_mode = true is not supported"));
        }
        take_custom_pad(args)?;
        let kind = match pool {
            PoolOp::Max => PoolKind::Max,
            PoolOp::Avg => PoolKind::Avg {
                exclude_padding: args.bool("exclude_padding_from_average")?,
            },
        };
        Ok(Op::Pool(Pool {
            kind,
            kernel: take_sizes(args, "kernel_sizes")?,
            strides: take_sizes(args, "strides")?,
            pad: take_sizes(args, "pad")?,
        }))
    })())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::ops::conv::tests::mil_roundtrip;
    use crate::ops::gemm::tests::{assert_close, rand_vec};

    fn pool(kind: PoolKind, kernel: [usize; 2], strides: [usize; 2], pad: [usize; 4]) -> Pool {
        Pool {
            kind,
            kernel,
            strides,
            pad,
        }
    }

    /// Direct-loop pooling in f64.
    fn naive(p: &Pool, [n, c, h, w]: [usize; 4], x: &[f32]) -> Vec<f64> {
        let ([kh, kw], [sh, sw], [pt, pb, pl, pr]) = (p.kernel, p.strides, p.pad);
        let (oh, ow) = ((h + pt + pb - kh) / sh + 1, (w + pl + pr - kw) / sw + 1);
        let mut out = Vec::new();
        for plane in 0..n * c {
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut vals = Vec::new();
                    for ky in 0..kh {
                        for kx in 0..kw {
                            let (iy, ix) = (
                                (oy * sh + ky) as isize - pt as isize,
                                (ox * sw + kx) as isize - pl as isize,
                            );
                            if iy >= 0 && ix >= 0 && iy < h as isize && ix < w as isize {
                                vals.push(x[(plane * h + iy as usize) * w + ix as usize] as f64);
                            }
                        }
                    }
                    out.push(match p.kind {
                        PoolKind::Max => vals.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
                        PoolKind::Avg {
                            exclude_padding: true,
                        } => vals.iter().sum::<f64>() / vals.len() as f64,
                        PoolKind::Avg {
                            exclude_padding: false,
                        } => vals.iter().sum::<f64>() / (kh * kw) as f64,
                    });
                }
            }
        }
        out
    }

    #[test]
    fn kernel_matches_naive_on_awkward_shapes() {
        let kinds = [
            PoolKind::Max,
            PoolKind::Avg {
                exclude_padding: true,
            },
            PoolKind::Avg {
                exclude_padding: false,
            },
        ];
        let cases = [
            ([2, 3, 7, 5], [3, 2], [2, 1], [1, 0, 0, 1]),
            ([1, 5, 7, 7], [3, 3], [2, 2], [1, 1, 1, 1]),
            ([2, 1, 1, 7], [1, 3], [1, 2], [0, 0, 2, 1]),
            ([1, 3, 6, 9], [6, 9], [1, 1], [0; 4]),
            ([2, 8, 64, 64], [2, 2], [2, 2], [0, 1, 1, 0]),
        ];
        for kind in kinds {
            for (xs, k, s, pad) in cases {
                let p = pool(kind, k, s, pad);
                let x = Buf {
                    shape: xs.to_vec(),
                    data: rand_vec(xs.iter().product(), 31),
                };
                let shape = p
                    .infer(&[TensorType::fp16(xs.to_vec())])
                    .unwrap()
                    .remove(0)
                    .shape;
                let mut out = [Buf::zeros(&shape)];
                p.eval(&[&x], &mut out).unwrap();
                assert_close(&out[0].data, &naive(&p, xs, &x.data), 1e-6);
            }
        }
    }

    /// Max-pooling keeps the per-element chain max(…max(max(−inf, t0), t1)…) over the taps in
    /// (ky, kx) order bit for bit (signed zeros and NaNs in the input), for strides 1–3 and the
    /// 2×2 stride-2 pass, the column-stride-2 phase rows and 3-wide windows (odd sizes, rows
    /// long enough for their vector loops, −inf taps).
    #[test]
    fn max_pool_is_the_tap_order_chain_bit_for_bit() {
        let cases = [
            ([1, 3, 9, 11], [3, 3], [2, 2], [1, 1, 1, 1]),
            ([2, 2, 8, 13], [3, 2], [3, 3], [2, 0, 1, 1]),
            ([1, 2, 5, 4], [2, 3], [1, 1], [0, 1, 2, 0]),
            ([1, 1, 3, 2], [3, 3], [1, 3], [1, 1, 2, 2]),
            ([2, 3, 29, 29], [2, 2], [2, 2], [0; 4]),
            ([1, 2, 4, 70], [2, 2], [2, 2], [0; 4]),
            // Column stride 2 on phase rows (`pool_max_s2`): odd widths past one and two
            // 16-column steps, wide kernels, left padding 0–3, row strides 1–3.
            ([2, 1, 9, 37], [3, 5], [1, 2], [0, 2, 3, 1]),
            ([1, 2, 7, 33], [2, 4], [3, 2], [1, 0, 0, 2]),
            ([1, 1, 5, 17], [1, 2], [2, 2], [0, 0, 1, 0]),
        ];
        for (xs, k, s, pad) in cases.into_iter().chain(THREE_WIDE) {
            let mut xd = rand_vec(xs.iter().product(), 41);
            for (i, v) in xd.iter_mut().enumerate() {
                match i % 7 {
                    0 => *v = 0.0,
                    3 => *v = -0.0,
                    5 => *v = f32::NAN,
                    _ if i % 61 == 1 => *v = f32::NEG_INFINITY,
                    _ => {}
                }
            }
            assert_tap_order_chain(xs, pool(PoolKind::Max, k, s, pad), xd);
        }
    }

    /// A pool test case: input shape, kernel, strides, pad.
    type PoolCase = ([usize; 4], [usize; 2], [usize; 2], [usize; 4]);

    /// Max-pools of 3-wide windows with left padding 1 (`MaxS2::rows3_avx2`): widths 1–3 and
    /// past 8 / 16 outputs, row kernels 1–5, row strides 1–3, top padding 0–2.
    const THREE_WIDE: [PoolCase; 7] = [
        ([1, 2, 112, 112], [3, 3], [2, 2], [1, 1, 1, 1]),
        ([1, 2, 9, 1], [3, 3], [2, 2], [1, 1, 1, 1]),
        ([2, 1, 11, 17], [3, 3], [1, 2], [2, 1, 1, 2]),
        ([1, 3, 6, 2], [5, 3], [3, 2], [2, 2, 1, 1]),
        ([1, 1, 4, 31], [1, 3], [2, 2], [0, 0, 1, 0]),
        ([1, 2, 13, 35], [3, 3], [2, 2], [0, 1, 1, 1]),
        ([1, 1, 5, 3], [2, 3], [1, 2], [1, 0, 1, 0]),
    ];

    /// The 3-wide pools keep the chain's first of equal taps (in (ky, kx) order) where most
    /// windows hold several: every input is +0, −0, −1, NaN or −inf.
    #[test]
    fn max_pool_3_wide_keeps_the_first_of_equal_taps() {
        let values = [0.0, -0.0, -1.0, f32::NAN, f32::NEG_INFINITY];
        for (xs, k, s, pad) in THREE_WIDE {
            let pick = |r: f32| values[((r * 1e4) as i64).rem_euclid(5) as usize];
            let xd = rand_vec(xs.iter().product(), 43).into_iter().map(pick);
            let xd = xd.collect();
            assert_tap_order_chain(xs, pool(PoolKind::Max, k, s, pad), xd);
        }
    }

    /// `p` on input `xd` of shape `xs` gives, bit for bit, each output's chain
    /// m = (t > m ? t : m) from −inf over its taps in (ky, kx) order (−inf in the padding).
    fn assert_tap_order_chain(xs: [usize; 4], p: Pool, xd: Vec<f32>) {
        let (k, s, pad) = (p.kernel, p.strides, p.pad);
        let x = Buf {
            shape: xs.to_vec(),
            data: xd,
        };
        let shape = p.infer(&[TensorType::fp16(xs.to_vec())]).unwrap()[0]
            .shape
            .clone();
        let mut out = [Buf::zeros(&shape)];
        p.eval(&[&x], &mut out).unwrap();
        let ([h, w], [oh, ow]) = ([xs[2], xs[3]], [shape[2], shape[3]]);
        let mut want = Vec::new();
        for plane in x.data.chunks(h * w) {
            for (oy, ox) in (0..oh).flat_map(|oy| (0..ow).map(move |ox| (oy, ox))) {
                let mut m = f32::NEG_INFINITY;
                for (ky, kx) in (0..k[0]).flat_map(|ky| (0..k[1]).map(move |kx| (ky, kx))) {
                    let iy = (oy * s[0] + ky).checked_sub(pad[0]).filter(|&i| i < h);
                    let ix = (ox * s[1] + kx).checked_sub(pad[2]).filter(|&i| i < w);
                    let e = match (iy, ix) {
                        (Some(iy), Some(ix)) => plane[iy * w + ix],
                        _ => f32::NEG_INFINITY,
                    };
                    m = if e > m { e } else { m };
                }
                want.push(m.to_bits());
            }
        }
        let got: Vec<u32> = out[0].data.iter().map(|v| v.to_bits()).collect();
        assert_eq!(got, want, "{xs:?} k {k:?} s {s:?} pad {pad:?}");
    }

    #[test]
    fn infer_rejects_bad_shapes_without_panicking() {
        let t = |s: &[usize]| vec![TensorType::fp16(s.to_vec())];
        let bad = |p: Pool, xs: &[usize], needle: &str| {
            let e = p.infer(&t(xs)).unwrap_err().to_string();
            assert!(e.contains(needle), "{e}");
        };
        bad(
            pool(PoolKind::Max, [2, 2], [1, 1], [0; 4]),
            &[3, 8, 8],
            "rank 4",
        );
        bad(
            pool(PoolKind::Max, [0, 2], [1, 1], [0; 4]),
            &[1, 3, 8, 8],
            ">= 1",
        );
        bad(
            pool(PoolKind::Max, [2, 2], [1, 0], [0; 4]),
            &[1, 3, 8, 8],
            ">= 1",
        );
        bad(
            pool(PoolKind::Max, [5, 2], [1, 1], [1, 1, 0, 0]),
            &[1, 3, 2, 8],
            "spans 5 along H",
        );
        bad(
            pool(
                PoolKind::Avg {
                    exclude_padding: true,
                },
                [2, 2],
                [1, 1],
                [0, 0, 2, 0],
            ),
            &[1, 3, 8, 8],
            "smaller than the kernel",
        );
        assert!(pool(PoolKind::Max, [2, 2], [1, 1], [0; 4])
            .infer(&[])
            .is_err());
    }

    #[test]
    fn builders_and_mil_round_trip() {
        let x = crate::input(&[1, 2, 9, 9]).unwrap();
        assert_eq!(
            x.max_pool([3, 3], [2, 2], [1, 1, 1, 1]).unwrap().shape(),
            [1, 2, 5, 5]
        );
        let a = x.avg_pool([2, 2], [2, 2], [0; 4], true).unwrap();
        assert_eq!(a.shape(), [1, 2, 4, 4]);
        assert_eq!(a.op().family().name(), "avg_pool");
        assert_eq!(
            *a.op(),
            Op::Pool(pool(
                PoolKind::Avg {
                    exclude_padding: false
                },
                [2, 2],
                [2, 2],
                [0; 4]
            ))
        );
        assert!(x.max_pool([10, 1], [1, 1], [0; 4]).is_err());
        for kind in [
            PoolKind::Max,
            PoolKind::Avg {
                exclude_padding: true,
            },
            PoolKind::Avg {
                exclude_padding: false,
            },
        ] {
            mil_roundtrip(Op::Pool(pool(kind, [3, 2], [2, 1], [1, 0, 0, 1])), from_mil);
        }
        let params = [("ceil_mode".to_string(), Literal::Bool(true))]
            .into_iter()
            .collect();
        let mut args = MilArgs::new("model.mil", "p", params);
        assert!(from_mil("max_pool", &mut args)
            .unwrap()
            .unwrap_err()
            .to_string()
            .contains("ceil_mode"));
    }
}
