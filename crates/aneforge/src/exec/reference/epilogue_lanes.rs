//! A conv epilogue's stages on 8 lanes at a time (AVX2 + F16C): the folded ops of one plane part
//! as a short list of [`Lane`] steps applied to each vector while it is in registers, instead of
//! one pass over memory (and one rounding pass) per op. Each step computes the scalar stage's
//! formula with the same IEEE operations (no contraction), so every bit is the scalar pass's.

use super::fp16_table::Fp16Table;

/// Most steps one part runs (a bias, the conv's rounding and up to 7 ops each with a rounding).
pub(super) const MAX_STEPS: usize = 16;

/// One step of the pass on a vector of outputs, with the constants of one plane (channel).
#[derive(Clone, Copy, Debug)]
pub(super) enum Lane<'a> {
    /// v + c: a bias or a per-channel add.
    AddConst(f32),
    /// v + other[i], element i of this slice matching the part's element i (a same-shape add,
    /// or a linear head's per-column add); at least as long as the part.
    AddFrom(&'a [f32]),
    /// (v − mean) · scale + beta, as `batch_norm`.
    BatchNorm { mean: f32, scale: f32, beta: f32 },
    /// Round to the nearest fp16 and widen back.
    Round,
    /// relu (`Unary::Relu`): NaN and ±0 give +0.
    Relu,
    /// `v.clamp(0.0, 6.0)`: NaN and −0 stay.
    Relu6,
    /// The gate v · round(clamp(alpha·v + beta, 0, 1)), rounded (hardswish, both outputs fp16).
    HardswishRounded { alpha: f32, beta: f32 },
    /// A costly unary op through its fp16 table, rounded (`Fp16Table::eval`: entries for fp16
    /// values, the op's kernel and a rounding for others).
    Table(&'a Fp16Table),
}

/// Whether [`run`] can take parts on this CPU (AVX2 and F16C).
pub(super) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Apply `steps` in order to every element of `part`, in place. Panics if an [`Lane::AddFrom`]
/// operand is shorter than `part`.
///
/// # Safety
/// [`available`] is true.
pub(super) unsafe fn run(steps: &[Lane], part: &mut [f32]) {
    for s in steps {
        if let Lane::AddFrom(o) = s {
            assert!(
                o.len() >= part.len(),
                "epilogue lanes: operand shorter than the output"
            );
        }
    }
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the CPU runs the lanes (the caller's contract); operand lengths checked above.
    unsafe {
        x86::run(steps, part)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (steps, part);
        unreachable!("epilogue lanes: not available off x86_64");
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::Lane;
    use crate::ops::simd_fp16::lookup8;

    /// Vectors kept in registers through all steps (independent chains hide the latencies).
    const BLOCK: usize = 4;

    /// See [`super::run`].
    ///
    /// # Safety
    /// The CPU has AVX2 and F16C; every AddFrom operand is as long as `part`.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) unsafe fn run(steps: &[Lane], part: &mut [f32]) {
        let n = part.len();
        if n < 8 {
            return short(steps, part);
        }
        let p = part.as_mut_ptr();
        // Vectors at 0, 8, … and, after a tail, one more over the last 8 elements, computed from
        // their inputs read now: the elements it shares with the last whole vector get the same
        // values again.
        let whole = n / 8;
        let count = whole + usize::from(!n.is_multiple_of(8));
        let start = |v: usize| if v < whole { 8 * v } else { n - 8 };
        // SAFETY: n ≥ 8, so elements n − 8..n lie in `part`.
        let last = unsafe { _mm256_loadu_ps(p.add(n - 8)) };
        for first in (0..count).step_by(BLOCK) {
            // A short last block repeats its last vector (same inputs, same values stored).
            let at = [0, 1, 2, 3].map(|j| start((first + j).min(count - 1)));
            // SAFETY: every vector lies in `part` and in every AddFrom operand (the contract);
            // all loads of a block come before its stores; unaligned loads and stores.
            unsafe {
                let mut v = at.map(|o| match o + 8 > 8 * whole {
                    true => last,
                    false => _mm256_loadu_ps(p.add(o)),
                });
                for &s in steps {
                    for (x, &o) in v.iter_mut().zip(&at) {
                        *x = step(s, *x, o, None);
                    }
                }
                for (x, &o) in v.iter().zip(&at) {
                    _mm256_storeu_ps(p.add(o), *x);
                }
            }
        }
    }

    /// [`run`] on fewer than 8 elements, through a zero-padded copy (AMD's masked stores are
    /// slow).
    ///
    /// # Safety
    /// As [`run`].
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn short(steps: &[Lane], part: &mut [f32]) {
        let n = part.len();
        let mut padded = [0.0f32; 8];
        padded[..n].copy_from_slice(part);
        // SAFETY: `padded` holds 8 f32; operands are read through copies of their first n.
        unsafe {
            let mut x = _mm256_loadu_ps(padded.as_ptr());
            for &s in steps {
                x = step(s, x, 0, Some(n));
            }
            _mm256_storeu_ps(padded.as_mut_ptr(), x);
        }
        part.copy_from_slice(&padded[..n]);
    }

    /// Round each lane to the nearest fp16 (ties to even) and widen it back.
    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    fn round(v: __m256) -> __m256 {
        _mm256_cvtph_ps(_mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v))
    }

    /// Step `s` on the vector `v` of the part's elements at..at + 8 (at..at + `tail` only, when
    /// given: an AddFrom operand is then read through a zero-padded copy).
    ///
    /// # Safety
    /// An AddFrom operand can be read at elements at..at + 8 (at..at + `tail`); the CPU has
    /// AVX2 and F16C.
    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn step(s: Lane, v: __m256, at: usize, tail: Option<usize>) -> __m256 {
        let zero = _mm256_setzero_ps();
        match s {
            Lane::AddConst(c) => _mm256_add_ps(v, _mm256_set1_ps(c)),
            // SAFETY: the caller's contract.
            Lane::AddFrom(o) => unsafe {
                let w = match tail {
                    Some(left) => {
                        let mut padded = [0.0f32; 8];
                        padded[..left].copy_from_slice(&o[at..at + left]);
                        _mm256_loadu_ps(padded.as_ptr())
                    }
                    None => _mm256_loadu_ps(o.as_ptr().add(at)),
                };
                _mm256_add_ps(v, w)
            },
            Lane::BatchNorm { mean, scale, beta } => {
                let t = _mm256_mul_ps(
                    _mm256_sub_ps(v, _mm256_set1_ps(mean)),
                    _mm256_set1_ps(scale),
                );
                _mm256_add_ps(t, _mm256_set1_ps(beta))
            }
            Lane::Round => round(v),
            // MAXPS returns its second operand (+0) on ties (±0) and NaN, as `Unary::Relu`.
            Lane::Relu => _mm256_max_ps(v, zero),
            Lane::Relu6 => {
                let low = _mm256_blendv_ps(v, zero, _mm256_cmp_ps::<_CMP_LT_OQ>(v, zero));
                let six = _mm256_set1_ps(6.0);
                _mm256_blendv_ps(low, six, _mm256_cmp_ps::<_CMP_GT_OQ>(low, six))
            }
            Lane::HardswishRounded { alpha, beta } => {
                let t = _mm256_add_ps(
                    _mm256_mul_ps(_mm256_set1_ps(alpha), v),
                    _mm256_set1_ps(beta),
                );
                // MAXPS/MINPS return their second operand on NaN: max(0, t), min(1, ·) keep it.
                let u = round(_mm256_min_ps(_mm256_set1_ps(1.0), _mm256_max_ps(zero, t)));
                round(_mm256_mul_ps(v, u))
            }
            // SAFETY: this function's features are the ones `lookup8` needs.
            Lane::Table(t) => unsafe { lookup8(t.values(), v, &|x| t.off_grid(x)) },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hint::black_box;

    use crate::ops::simd_fp16::round1;
    use crate::ops::unary::Unary;

    /// Every fp16 value (NaN, ±inf, ±0, subnormals), then f32 values between them, past fp16's
    /// range and at rounding ties: the inputs each step is checked on.
    fn inputs() -> Vec<f32> {
        let mut x: Vec<f32> = (0..=u16::MAX)
            .map(|h| half::f16::from_bits(h).to_f32())
            .collect();
        let between = (0..20_000u32)
            .map(|i| f32::from_bits(0x3380_0000u32.wrapping_add(i.wrapping_mul(0x0002_a001))));
        x.extend(between.flat_map(|v| [v, -v]));
        x.extend([
            65504.0,
            65519.0,
            65520.0,
            1e9,
            -1e9,
            1.0 + 1.0 / 2048.0,
            6.0,
            -6.0,
        ]);
        x.extend([
            f32::MIN_POSITIVE,
            -f32::MIN_POSITIVE,
            f32::from_bits(0x7fc0_1234),
        ]);
        x
    }

    /// `run(steps, x)` against `scalar` per element, bit for bit, over every part length up to
    /// 40 (blocks of 32, whole vectors and masked tails) and the whole input.
    fn check(steps: &[Lane<'_>], x: &[f32], scalar: impl Fn(usize, f32) -> f32) {
        assert!(available(), "this test needs AVX2 and F16C");
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        for n in (0..=40).chain([x.len()]) {
            let mut got = x[..n].to_vec();
            // SAFETY: checked available.
            unsafe { run(steps, &mut got) };
            let want: Vec<f32> = x[..n]
                .iter()
                .enumerate()
                .map(|(i, &v)| scalar(i, v))
                .collect();
            let first = (0..n).find(|&i| got[i].to_bits() != want[i].to_bits());
            assert_eq!(
                first, None,
                "{steps:?}, {n} elements: first differing input"
            );
            assert_eq!(bits(&got), bits(&want));
        }
    }

    /// Each scalar op the steps stand for, applied as the scalar pass does.
    fn unary(u: Unary, v: f32) -> f32 {
        let mut y = [0.0];
        u.map(&[v], &mut y);
        y[0]
    }

    #[test]
    fn each_step_keeps_the_scalar_bits() {
        let x = inputs();
        let other: Vec<f32> = x.iter().rev().copied().collect();
        check(&[Lane::Round], &x, |_, v| round1(v));
        check(&[Lane::Relu], &x, |_, v| unary(Unary::Relu, v));
        check(&[Lane::Relu6], &x, |_, v| unary(Unary::Relu6, v));
        // Constants through black_box: folding v + −0 into v would keep a signalling NaN that
        // the add (scalar or vector, at run time) quiets.
        for c in [-0.0, 0.0, 3.25] {
            check(&[Lane::AddConst(c)], &x, |_, v| v + black_box(c));
        }
        check(&[Lane::AddFrom(&other)], &x, |i, v| v + other[i]);
        let (mean, scale, beta) = (0.3, 1.7, -0.25);
        let bn = Lane::BatchNorm { mean, scale, beta };
        check(&[bn], &x, |_, v| (v - black_box(mean)) * scale + beta);
        let (alpha, beta) = (half::f16::from_f32(1.0 / 6.0).to_f32(), 0.5);
        let u = Unary::SigmoidHard { alpha, beta };
        check(&[Lane::HardswishRounded { alpha, beta }], &x, |_, v| {
            round1(v * round1(unary(u, v)))
        });
        // Every fp16 value reads the table, values off the grid take the kernel.
        for u in [Unary::Gelu, Unary::Sigmoid] {
            let t = Fp16Table::new(u).expect("a costly op");
            check(&[Lane::Table(&t)], &x, |_, v| round1(unary(u, v)));
        }
    }

    #[test]
    fn steps_run_in_order() {
        let x = inputs();
        let other: Vec<f32> = x.iter().map(|v| v * -0.5).collect();
        let bn = Lane::BatchNorm {
            mean: 0.5,
            scale: 2.0,
            beta: 1.0,
        };
        let steps = [
            Lane::AddConst(0.125),
            Lane::Round,
            bn,
            Lane::Round,
            Lane::AddFrom(&other),
            Lane::Round,
            Lane::Relu,
        ];
        check(&steps, &x, |i, v| {
            let v = round1((round1(v + 0.125) - 0.5) * 2.0 + 1.0);
            unary(Unary::Relu, round1(v + other[i]))
        });
    }
}
