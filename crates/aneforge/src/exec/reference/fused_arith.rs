//! IEEE arithmetic ops of a fused elementwise run with their fp16 rounding in the same pass:
//! y = round_fp16(a ∘ b), 8 lanes at a time with AVX + F16C when the CPU has them (runtime
//! detected), bit-identical to the op followed by [`round_fp16`] (add, sub, mul, div and sqrt are
//! correctly rounded in every lane width, and the conversions round to nearest even).

use super::train_fuse::round_fp16;
use crate::ops::elementwise::Binary;
use crate::ops::unary::Unary;

/// An op whose vector form gives the scalar op's bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Arith {
    Add,
    Sub,
    Mul,
    Div,
    Sqrt,
}

impl Arith {
    /// The [`Arith`] of a binary op, if it is one.
    pub(super) fn of_binary(b: Binary) -> Option<Arith> {
        match b {
            Binary::Add => Some(Arith::Add),
            Binary::Sub => Some(Arith::Sub),
            Binary::Mul => Some(Arith::Mul),
            Binary::RealDiv => Some(Arith::Div),
            _ => None,
        }
    }

    /// The [`Arith`] of a unary op, if it is one.
    pub(super) fn of_unary(u: Unary) -> Option<Arith> {
        (u == Unary::Sqrt).then_some(Arith::Sqrt)
    }

    /// The op on one pair of values (`b` unused by sqrt), as `Binary::apply` / `Unary::apply`.
    #[inline(always)]
    fn scalar(self, a: f32, b: f32) -> f32 {
        match self {
            Arith::Add => a + b,
            Arith::Sub => a - b,
            Arith::Mul => a * b,
            Arith::Div => a / b,
            Arith::Sqrt => a.sqrt(),
        }
    }
}

/// y[i] = round_fp16(op(a[i], b[i])) (`b` is ignored by sqrt and may be empty; otherwise every
/// slice is `y.len()` long, else a panic): the bits of the op followed by [`round_fp16`].
pub(super) fn rounded(op: Arith, a: &[f32], b: &[f32], y: &mut [f32]) {
    assert!(a.len() == y.len() && (op == Arith::Sqrt || b.len() == y.len()));
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") && std::arch::is_x86_feature_detected!("f16c") {
        // SAFETY: the CPU features the function enables were just detected; lengths checked above.
        unsafe { rounded_f16c(op, a, b, y) };
        return;
    }
    tail(op, a, b, y, 0);
}

/// Elements `from..` of [`rounded`], one value at a time, then rounded.
fn tail(op: Arith, a: &[f32], b: &[f32], y: &mut [f32], from: usize) {
    let y = &mut y[from..];
    match op {
        Arith::Sqrt => (y.iter_mut().zip(&a[from..])).for_each(|(o, &x)| *o = x.sqrt()),
        _ => (y.iter_mut().zip(a[from..].iter().zip(&b[from..])))
            .for_each(|(o, (&x, &v))| *o = op.scalar(x, v)),
    }
    round_fp16(y);
}

/// [`rounded`] with AVX lanes and F16C conversions (`vcvtps2ph` to nearest even, `vcvtph2ps`);
/// the tail of fewer than 8 through [`tail`]. Callers check the lengths.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx,f16c")]
unsafe fn rounded_f16c(op: Arith, a: &[f32], b: &[f32], y: &mut [f32]) {
    use std::arch::x86_64::{
        _mm256_add_ps, _mm256_cvtph_ps, _mm256_cvtps_ph, _mm256_div_ps, _mm256_loadu_ps,
        _mm256_mul_ps, _mm256_sqrt_ps, _mm256_storeu_ps, _mm256_sub_ps, _MM_FROUND_TO_NEAREST_INT,
    };
    let n = y.len() / 8 * 8;
    // One loop per op, the op fixed inside it: `$x` is a's lanes at `$i`, `$e` the result.
    macro_rules! lanes {
        ($x:ident, $i:ident => $e:expr) => {
            for $i in (0..n).step_by(8) {
                // SAFETY: $i + 8 ≤ n ≤ y.len() = a.len(), and = b.len() for the binary ops (the
                // only ones whose `$e` reads b); unaligned loads and stores.
                unsafe {
                    let $x = _mm256_loadu_ps(a.as_ptr().add($i));
                    let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>($e);
                    _mm256_storeu_ps(y.as_mut_ptr().add($i), _mm256_cvtph_ps(h));
                }
            }
        };
    }
    match op {
        Arith::Add => lanes!(x, i => _mm256_add_ps(x, _mm256_loadu_ps(b.as_ptr().add(i)))),
        Arith::Sub => lanes!(x, i => _mm256_sub_ps(x, _mm256_loadu_ps(b.as_ptr().add(i)))),
        Arith::Mul => lanes!(x, i => _mm256_mul_ps(x, _mm256_loadu_ps(b.as_ptr().add(i)))),
        Arith::Div => lanes!(x, i => _mm256_div_ps(x, _mm256_loadu_ps(b.as_ptr().add(i)))),
        Arith::Sqrt => lanes!(x, _i => _mm256_sqrt_ps(x)),
    }
    tail(op, a, b, y, n);
}

#[cfg(test)]
mod tests {
    use super::{rounded, Arith};
    use crate::exec::reference::train_fuse::round_fp16;

    /// Every op matches the scalar op then the rounding pass bit for bit on lengths with and
    /// without a tail, over operands spanning fp16 subnormals, ties, overflow, zeros of both
    /// signs, infinities and NaN.
    #[test]
    fn rounded_ops_match_the_op_then_the_rounding_pass_bit_for_bit() {
        let special = [
            0.0,
            -0.0,
            1.0,
            -3.5,
            65504.0,
            65520.0,
            -65519.0,
            6.0e-8,
            3.0e-5,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            1.0 + 1.0 / 2048.0,
            1.0 + 3.0 / 2048.0,
        ];
        let spread = |k: usize, salt: u32| -> f32 {
            match k % 5 {
                0 => special[k / 5 % special.len()],
                _ => {
                    let bits = (k as u32).wrapping_mul(2_654_435_761).rotate_left(salt);
                    // Exponents around fp16's range: |v| from about 2⁻³⁰ to 2³⁰.
                    let v = f32::from_bits(0x3000_0000 | (bits & 0x1fff_ffff));
                    if bits & 0x8000_0000 != 0 {
                        -v
                    } else {
                        v
                    }
                }
            }
        };
        for len in [0, 1, 7, 8, 9, 31, 256, 4099] {
            let a: Vec<f32> = (0..len).map(|k| spread(k, 3)).collect();
            let b: Vec<f32> = (0..len).map(|k| spread(k * 7 + 1, 11)).collect();
            for op in [Arith::Add, Arith::Sub, Arith::Mul, Arith::Div, Arith::Sqrt] {
                let mut want: Vec<f32> =
                    (a.iter().zip(&b)).map(|(&x, &v)| op.scalar(x, v)).collect();
                round_fp16(&mut want);
                let mut got = vec![f32::NAN; len];
                let b = if op == Arith::Sqrt { &[][..] } else { &b[..] };
                rounded(op, &a, b, &mut got);
                for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                    assert_eq!(g.to_bits(), w.to_bits(), "{op:?} len {len} element {k}");
                }
            }
        }
    }
}
