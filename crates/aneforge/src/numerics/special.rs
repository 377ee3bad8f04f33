//! Special functions as fp16 polynomial graphs (Horner form, fixed smooth range reduction, no
//! data-dependent control flow: both branches are built and `select` picks one per element).
//! Coefficients are the classical Abramowitz–Stegun approximations (A&S numbers given per
//! function, gamma's core a least-squares fit; all ≤ 1.3e-6, far below fp16's 4.9e-4 rounding), so the accuracy is
//! set by fp16: measured max |error| / max(1, |f|) ≤ 3e-3 on the stated ranges, relative error
//! ≤ 8e-3 where |f| > 1e-2 (J0 excepted near its zeros); see docs/numerics-accuracy.md.

use crate::error::{Error, Result};
use crate::graph::Tensor;
use crate::ops::elementwise::Compare;
use crate::select;

/// c₀ + c₁·s + c₂·s² + … by Horner's rule (`c` non-empty).
fn poly(s: &Tensor, c: &[f64]) -> Result<Tensor> {
    let (last, rest) = c
        .split_last()
        .ok_or_else(|| Error::value("special", "empty polynomial"))?;
    let mut acc = s.mul_scalar(*last as f32)?;
    for (i, k) in rest.iter().enumerate().rev() {
        acc = acc.add_scalar(*k as f32)?;
        if i > 0 {
            acc = acc.mul(s)?;
        }
    }
    Ok(acc)
}

/// `a` where |x| ≤ `lim`, else `b`.
fn within(x: &Tensor, lim: f32, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    select(&x.abs()?.compare_scalar(Compare::LessEqual, lim)?, a, b)
}

/// erfc(x) for every x (A&S 7.1.26 on |x|, erfc(−x) = 2 − erfc(x)); results below fp16's
/// smallest subnormal (x > ~3.9) are 0.
pub fn erfc(x: &Tensor) -> Result<Tensor> {
    const P: f32 = 0.327_591_1;
    const A: [f64; 5] = [
        0.254_829_6,
        -0.284_496_74,
        1.421_413_7,
        -1.453_152_1,
        1.061_405_4,
    ];
    let a = x.abs()?;
    let t = a.mul_scalar(P)?.add_scalar(1.0)?.rdiv_scalar(1.0)?;
    let y = poly(&t, &A)?.mul(&t)?.mul(&a.square()?.neg()?.exp()?)?;
    select(
        &x.compare_scalar(Compare::Less, 0.0)?,
        &y.rsub_scalar(2.0)?,
        &y,
    )
}

/// eˣ − 1: Taylor series to x⁹ for |x| ≤ 0.7 (no cancellation near 0), `exp(x) − 1` elsewhere.
pub fn expm1(x: &Tensor) -> Result<Tensor> {
    let c: Vec<f64> = (0..9)
        .map(|k| 1.0 / (1..=k + 1).map(f64::from).product::<f64>())
        .collect();
    within(x, 0.7, &poly(x, &c)?.mul(x)?, &x.exp()?.sub_scalar(1.0)?)
}

/// ln(1 + x): 2·atanh(s), s = x / (2 + x), as an odd series to s¹⁵ for x in [−0.5, 1]
/// (|s| ≤ 1/3), `log(1 + x)` elsewhere (x > −1).
pub fn log1p(x: &Tensor) -> Result<Tensor> {
    let s = x.div(&x.add_scalar(2.0)?)?;
    let c: Vec<f64> = (0..8).map(|k| 2.0 / f64::from(2 * k + 1)).collect();
    let series = poly(&s.square()?, &c)?.mul(&s)?;
    let inside = x.compare_scalar(Compare::GreaterEqual, -0.5)?;
    let upper = x.compare_scalar(Compare::LessEqual, 1.0)?;
    let wide = x.log(1.0)?;
    select(&inside, &select(&upper, &series, &wide)?, &wide)
}

/// Bessel J₀: A&S 9.4.1 (polynomial in (x/3)²) for |x| ≤ 3, A&S 9.4.3 (x^−½·f₀·cos θ₀) beyond,
/// where the fp16 phase costs ~|x|·5e-4 absolute.
pub fn bessel_j0(x: &Tensor) -> Result<Tensor> {
    const NEAR: [f64; 7] = [
        1.0,
        -2.249_999_7,
        1.265_620_8,
        -0.316_386_6,
        0.044_447_9,
        -0.003_944_4,
        0.000_210_0,
    ];
    const F0: [f64; 7] = [
        0.797_884_56,
        -0.000_000_77,
        -0.005_527_40,
        -0.000_095_12,
        0.001_372_37,
        -0.000_728_05,
        0.000_144_76,
    ];
    const TH0: [f64; 7] = [
        -std::f64::consts::FRAC_PI_4,
        -0.041_663_97,
        -0.000_039_54,
        0.002_625_73,
        -0.000_541_25,
        -0.000_293_33,
        0.000_135_58,
    ];
    let a = x.abs()?;
    let near = poly(&x.mul_scalar(1.0 / 3.0)?.square()?, &NEAR)?;
    let u = a.maximum_scalar(3.0)?.rdiv_scalar(3.0)?;
    let far = poly(&u, &F0)?
        .mul(&poly(&u, &TH0)?.add(&a)?.cos()?)?
        .mul(&a.maximum_scalar(3.0)?.rsqrt(0.0)?)?;
    within(x, 3.0, &near, &far)
}

/// Bessel I₀: A&S 9.8.1 (polynomial in (x/3.75)²) for |x| ≤ 3.75, A&S 9.8.2 (eˣ·x^−½·poly(3.75/x))
/// beyond; overflows fp16 (inf) past |x| ≈ 12.
pub fn bessel_i0(x: &Tensor) -> Result<Tensor> {
    const NEAR: [f64; 7] = [
        1.0,
        3.515_622_9,
        3.089_942_4,
        1.206_749_2,
        0.265_973_2,
        0.036_076_8,
        0.004_581_3,
    ];
    const FAR: [f64; 9] = [
        0.398_942_28,
        0.013_285_92,
        0.002_253_19,
        -0.001_575_65,
        0.009_162_81,
        -0.020_577_06,
        0.026_355_37,
        -0.016_476_33,
        0.003_923_77,
    ];
    let a = x.abs()?;
    let near = poly(&x.mul_scalar(1.0 / 3.75)?.square()?, &NEAR)?;
    let big = a.maximum_scalar(3.75)?;
    let far = poly(&big.rdiv_scalar(3.75)?, &FAR)?
        .mul(&big.exp()?)?
        .mul(&big.rsqrt(0.0)?)?;
    within(x, 3.75, &near, &far)
}

/// Bessel K₀ for x > 0: A&S 9.8.5 (−ln(x/2)·I₀(x) + polynomial in (x/2)²) for x ≤ 2, A&S 9.8.6
/// (e^−x·x^−½·poly(2/x)) beyond; x ≤ 0 is outside the domain (non-finite or meaningless values).
pub fn bessel_k0(x: &Tensor) -> Result<Tensor> {
    const NEAR: [f64; 7] = [
        -0.577_215_66,
        0.422_784_20,
        0.230_697_56,
        0.034_885_90,
        0.002_626_98,
        0.000_107_50,
        0.000_007_40,
    ];
    const FAR: [f64; 7] = [
        1.253_314_14,
        -0.078_323_58,
        0.021_895_68,
        -0.010_624_46,
        0.005_878_72,
        -0.002_515_40,
        0.000_532_08,
    ];
    let small = x.minimum_scalar(2.0)?;
    let near = poly(&small.mul_scalar(0.5)?.square()?, &NEAR)?
        .sub(&small.mul_scalar(0.5)?.log(0.0)?.mul(&bessel_i0(&small)?)?)?;
    let big = x.maximum_scalar(2.0)?;
    let far = poly(&big.rdiv_scalar(2.0)?, &FAR)?
        .mul(&big.neg()?.exp()?)?
        .mul(&big.rsqrt(0.0)?)?;
    select(&x.compare_scalar(Compare::LessEqual, 2.0)?, &near, &far)
}

/// Γ on [1, 2] as a degree-7 polynomial in s = z − 1.5 (least-squares Chebyshev fit, fit error
/// 1.3e-6), `z` clamped to [1, 2].
fn gamma_core(z: &Tensor) -> Result<Tensor> {
    const C: [f64; 8] = [
        0.886_225_900,
        0.032_341_545,
        0.414_942_619,
        -0.107_459_770,
        0.142_130_261,
        -0.075_215_421,
        0.073_869_831,
        -0.049_616_994,
    ];
    poly(
        &z.maximum_scalar(1.0)?
            .minimum_scalar(2.0)?
            .sub_scalar(1.5)?,
        &C,
    )
}

/// Recurrence steps Γ(z) = (z − 1)·Γ(z − 1) taken from above 2: enough for x ≤ 10, past which
/// the product alone exceeds fp16's 65504.
const GAMMA_STEPS: usize = 8;

/// x > 0 reduced to Γ(x) = Γ(z)·up / down with z in [1, 2]: down = x when x < 1 (Γ(x) = Γ(x+1)/x),
/// and up = (z−1)(z−2)… from `GAMMA_STEPS` select-guarded steps. Returns (Γ(z), up, down).
fn gamma_reduce(x: &Tensor) -> Result<(Tensor, Tensor, Tensor)> {
    let below = x.compare_scalar(Compare::Less, 1.0)?;
    let down = x.minimum_scalar(1.0)?;
    let mut z = select(&below, &x.add_scalar(1.0)?, x)?;
    let mut up = down.div(&down)?;
    for _ in 0..GAMMA_STEPS {
        let step = z.compare_scalar(Compare::Greater, 2.0)?;
        let zm1 = z.sub_scalar(1.0)?;
        up = select(&step, &up.mul(&zm1)?, &up)?;
        z = select(&step, &zm1, &z)?;
    }
    Ok((gamma_core(&z)?, up, down))
}

/// Γ(x) for 0 < x ≤ ~9.17 (Γ(9.17) ≈ 65504): reduced to [1, 2] by the recurrence Γ(x+1) = x·Γ(x)
/// (one division below 1, up to 8 select-guarded multiplications above 2); measured relative
/// error ≤ 1.6e-3 on [0.05, 9]. Larger x give +inf (fp16 overflow, as the true value does), tiny x
/// (< ~1.5e-5) give +inf; x ≤ 0 is outside the domain (meaningless values).
pub fn gamma(x: &Tensor) -> Result<Tensor> {
    let (core, up, down) = gamma_reduce(x)?;
    core.mul(&up)?.div(&down)
}

/// ln Γ(x) for 0 < x ≤ ~7000 (beyond, ln Γ exceeds fp16's 65504: +inf): ln Γ(z) + ln(up) − ln(down)
/// from the gamma recurrence for x ≤ 8, Stirling's series (x − ½)(ln x − 1) + ½(ln 2π − 1) +
/// 1/(12x) − 1/(360x³) beyond (truncation < 3e-8); measured max |error| / max(1, |f|) ≤ 1.4e-3
/// on [0.01, 6000] (relative error is large only next to the zeros at 1 and 2).
/// x ≤ 0 is outside the domain (meaningless values).
pub fn lgamma(x: &Tensor) -> Result<Tensor> {
    const HALF_LN_2PI_M_HALF: f32 = 0.418_938_53;
    let (core, up, down) = gamma_reduce(&x.minimum_scalar(8.0)?)?;
    let near = core.log(0.0)?.add(&up.log(0.0)?)?.sub(&down.log(0.0)?)?;
    let big = x.maximum_scalar(8.0)?;
    let inv = big.rdiv_scalar(1.0)?;
    let tail = poly(&inv.square()?, &[1.0 / 12.0, -1.0 / 360.0])?.mul(&inv)?;
    let far = big
        .sub_scalar(0.5)?
        .mul(&big.log(0.0)?.sub_scalar(1.0)?)?
        .add_scalar(HALF_LN_2PI_M_HALF)?
        .add(&tail)?;
    select(&x.compare_scalar(Compare::LessEqual, 8.0)?, &near, &far)
}

/// The function called `name` (erfc, expm1, log1p, bessel_j0, bessel_i0, bessel_k0, gamma, lgamma)
/// applied to `x`.
pub fn apply(name: &str, x: &Tensor) -> Result<Tensor> {
    match name {
        "erfc" => erfc(x),
        "expm1" => expm1(x),
        "log1p" => log1p(x),
        "bessel_j0" => bessel_j0(x),
        "bessel_i0" => bessel_i0(x),
        "bessel_k0" => bessel_k0(x),
        "gamma" => gamma(x),
        "lgamma" => lgamma(x),
        _ => Err(Error::NotImplemented(format!("special: no function '{name}' (available: erfc, expm1, log1p, bessel_j0, bessel_i0, bessel_k0, gamma, lgamma)"))),
    }
}
