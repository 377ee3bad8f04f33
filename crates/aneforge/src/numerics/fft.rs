//! Discrete Fourier transforms as static graphs: staged Cooley–Tukey with DFT-matrix stages.
//!
//! Complex values travel as two fp16 tensors (real, imaginary); a complex matmul is four real
//! matmuls. N is split into at most three digit groups N = N₀·N₁·N₂ (the split minimising
//! N₀ + N₁ + N₂, i.e. the matmul work; a prime N keeps one dense DFT). With n the digits of
//! the input index (n₀ most significant) and k those of the output index (k₀ least
//! significant), stage j rotates digit nⱼ to the last axis, multiplies by the fp16 DFT matrix
//! of Nⱼ and then by the twiddles W_Mⱼ^(kⱼ·m) (Mⱼ = Nⱼ·…·N_last, m = the remaining input
//! digits), which are fed as program inputs. One final transpose undoes the digit reversal.
//! Inverse transforms fold 1/Nⱼ into each stage's matrix, so intermediates stay bounded.
//! Example: N = 1024 runs as 8 × 8 × 16 (32× fewer multiply-adds than a dense DFT).

use std::f64::consts::PI;

use super::{cached, run, Feeds, Plan, SharedPlan};
use crate::compile::Device;
use crate::concat;
use crate::constant;
use crate::error::{Error, Result};
use crate::graph::Tensor;
use crate::ops::io::HostArray;
use crate::shape::{self, MAX_EXTENT};

/// Largest digit group (its dense DFT matrix is R × R); an N with a larger prime factor is refused.
pub const MAX_RADIX: usize = 4096;

/// A complex tensor as (real, imaginary); `None` imaginary = a real signal.
type Complex = (Tensor, Option<Tensor>);

/// The digit groups N is transformed in (1 to 3 factors, product N, each ≤ [`MAX_RADIX`]).
/// Errors: N = 0 or above 65536 (`Shape`), a prime factor above [`MAX_RADIX`] (`NotImplemented`).
pub fn radices(n: usize) -> Result<Vec<usize>> {
    if n == 0 || n > MAX_EXTENT {
        return Err(Error::shape(
            "fft",
            format!("transform length must be in 1..={MAX_EXTENT}, got {n}"),
        ));
    }
    let mut best = vec![n];
    let divisors = |m: usize| (2..m).filter(move |d| m.is_multiple_of(*d));
    for a in divisors(n) {
        let m = n / a;
        if a + m < best.iter().sum() && a <= m {
            best = vec![a, m];
        }
        for b in divisors(m).filter(|&b| b >= a && b * b <= m) {
            if a + b + m / b < best.iter().sum() {
                best = vec![a, b, m / b];
            }
        }
    }
    match best.iter().max() {
        Some(&r) if r > MAX_RADIX => Err(Error::NotImplemented(format!(
            "fft: length {n} needs a dense DFT stage of size {r} (a prime factor above {MAX_RADIX}); pad the signal to a length whose prime factors are <= {MAX_RADIX}"
        ))),
        _ => Ok(best),
    }
}

/// e^(∓2πi·k/m) as (cos, sin) in f64 (sign − forward, + inverse), with k reduced mod m first.
fn unit(k: usize, m: usize, inverse: bool) -> (f64, f64) {
    let a = 2.0 * PI * (k % m) as f64 / m as f64;
    (a.cos(), if inverse { a.sin() } else { -a.sin() })
}

/// Dense DFT matrix of size r (symmetric), scaled by 1/r for the inverse: (real, imaginary), row-major.
fn dft_matrix(r: usize, inverse: bool) -> (Vec<f32>, Vec<f32>) {
    let s = if inverse { 1.0 / r as f64 } else { 1.0 };
    (0..r * r)
        .map(|i| unit((i / r) * (i % r), r, inverse))
        .map(|(c, v)| ((c * s) as f32, (v * s) as f32))
        .unzip()
}

/// (x_re + i·x_im) @ (F_re + i·F_im) over the last axis for the DFT matrix of size r.
fn dft_stage(x: &Complex, r: usize, inverse: bool) -> Result<(Tensor, Tensor)> {
    let (fr, fi) = dft_matrix(r, inverse);
    let (fr, fi) = (
        constant("fft", HostArray::f32(&[r, r], &fr))?,
        constant("fft", HostArray::f32(&[r, r], &fi))?,
    );
    let (xr, xi) = x;
    let (rr, ri) = (xr.matmul(&fr)?, xr.matmul(&fi)?);
    match xi {
        None => Ok((rr, ri)),
        Some(xi) => Ok((rr.sub(&xi.matmul(&fi)?)?, ri.add(&xi.matmul(&fr)?)?)),
    }
}

/// Elementwise complex product.
fn cmul(a: &(Tensor, Tensor), b: &(Tensor, Tensor)) -> Result<(Tensor, Tensor)> {
    let re = a.0.mul(&b.0)?.sub(&a.1.mul(&b.1)?)?;
    let im = a.0.mul(&b.1)?.add(&a.1.mul(&b.0)?)?;
    Ok((re, im))
}

/// Twiddles after stage j: shape radices[j+1..] ++ [1; j] ++ [radices[j]], value W_M^(k·m).
fn twiddles(
    feeds: &mut Feeds,
    radices: &[usize],
    j: usize,
    inverse: bool,
) -> Result<(Tensor, Tensor)> {
    let rest: usize = radices[j + 1..].iter().product();
    let (r, m) = (radices[j], radices[j..].iter().product::<usize>());
    let mut shape: Vec<usize> = radices[j + 1..].to_vec();
    shape.extend(std::iter::repeat_n(1, j));
    shape.push(r);
    let (re, im): (Vec<f32>, Vec<f32>) = (0..rest * r)
        .map(|i| unit((i % r) * (i / r), m, inverse))
        .map(|(c, s)| (c as f32, s as f32))
        .unzip();
    Ok((feeds.input(&shape, re)?, feeds.input(&shape, im)?))
}

/// Rank-(1+g) axis rotation [0, 2, 3, …, g, 1] (moves axis 1 to the end).
fn rotate(g: usize) -> Vec<i64> {
    std::iter::once(0)
        .chain(2..=g as i64)
        .chain(std::iter::once(1))
        .collect()
}

/// Transpose both parts (the imaginary one when present).
fn transpose(x: &Complex, perm: &[i64]) -> Result<Complex> {
    Ok((
        x.0.transpose(perm)?,
        x.1.as_ref().map(|t| t.transpose(perm)).transpose()?,
    ))
}

/// DFT (or inverse DFT, scaled by 1/N) of `x` along its last axis; `x.1 = None` is a real signal.
/// Leading axes are batch axes (their product must be ≤ 65536). Returns (real, imaginary), same shape.
pub fn fft_last(feeds: &mut Feeds, x: &Complex, inverse: bool) -> Result<(Tensor, Tensor)> {
    let shape = x.0.shape().to_vec();
    if let Some(im) = &x.1 {
        if im.shape() != shape.as_slice() {
            return Err(Error::shape(
                "fft",
                format!(
                    "real part {shape:?} and imaginary part {:?} differ",
                    im.shape()
                ),
            ));
        }
    }
    let n = shape[shape.len() - 1];
    let rs = radices(n)?;
    let batch = shape::numel(&shape[..shape.len() - 1]);
    if batch > MAX_EXTENT {
        return Err(Error::shape("fft", format!("input {shape:?}: the batch axes hold {batch} rows; at most {MAX_EXTENT} per program")));
    }
    let g = rs.len();
    let dims: Vec<i64> = std::iter::once(batch)
        .chain(rs.iter().copied())
        .map(|d| d as i64)
        .collect();
    let mut cur: Complex = (
        x.0.reshape(&dims)?,
        x.1.as_ref().map(|t| t.reshape(&dims)).transpose()?,
    );
    let mut out = None;
    for j in 0..g {
        if g > 1 {
            cur = transpose(&cur, &rotate(g))?;
        }
        let mut y = dft_stage(&cur, rs[j], inverse)?;
        if j + 1 < g {
            y = cmul(&y, &twiddles(feeds, &rs, j, inverse)?)?;
        }
        cur = (y.0.clone(), Some(y.1.clone()));
        out = Some(y);
    }
    let (mut re, mut im) = out.ok_or_else(|| Error::value("fft", "no stage was built"))?;
    if g > 1 {
        let reverse: Vec<i64> = std::iter::once(0).chain((1..=g as i64).rev()).collect();
        (re, im) = (re.transpose(&reverse)?, im.transpose(&reverse)?);
    }
    let back: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
    Ok((re.reshape(&back)?, im.reshape(&back)?))
}

/// [`fft_last`] along `axis` (negative allowed), transposing it to the end and back.
pub fn fft_axis(
    feeds: &mut Feeds,
    x: &Complex,
    axis: i64,
    inverse: bool,
) -> Result<(Tensor, Tensor)> {
    let rank = x.0.rank();
    let ax = shape::axis("fft", axis, rank)?;
    if ax == rank - 1 {
        return fft_last(feeds, x, inverse);
    }
    let mut perm: Vec<i64> = (0..rank as i64).collect();
    perm.swap(ax, rank - 1);
    let (re, im) = fft_last(feeds, &transpose(x, &perm)?, inverse)?;
    Ok((re.transpose(&perm)?, im.transpose(&perm)?))
}

/// 2-D DFT over the last two axes (inverse scaled by 1/(M·N)); rank ≥ 2.
pub fn fft2(feeds: &mut Feeds, x: &Complex, inverse: bool) -> Result<(Tensor, Tensor)> {
    if x.0.rank() < 2 {
        return Err(Error::shape(
            "fft2",
            format!("needs rank >= 2, got {:?}", x.0.shape()),
        ));
    }
    let rows = fft_last(feeds, x, inverse)?;
    fft_axis(feeds, &(rows.0, Some(rows.1)), -2, inverse)
}

/// Real-input DFT along the last axis: the N/2 + 1 non-negative-frequency bins (NumPy `rfft`).
pub fn rfft(feeds: &mut Feeds, x: &Tensor) -> Result<(Tensor, Tensor)> {
    let shape = x.shape().to_vec();
    let n = shape[shape.len() - 1];
    let (re, im) = fft_last(feeds, &(x.clone(), None), false)?;
    let mut size = shape.clone();
    *size.last_mut().unwrap_or(&mut 0) = n / 2 + 1;
    let begin = vec![0; shape.len()];
    Ok((
        re.slice_by_size(&begin, &size)?,
        im.slice_by_size(&begin, &size)?,
    ))
}

/// Inverse of [`rfft`]: N real samples from N/2 + 1 bins along the last axis (NumPy `irfft`;
/// the imaginary parts of the DC and Nyquist bins are ignored). `n / 2 + 1` must equal the bin count.
pub fn irfft(feeds: &mut Feeds, re: &Tensor, im: &Tensor, n: usize) -> Result<Tensor> {
    let shape = re.shape().to_vec();
    let m = shape[shape.len() - 1];
    if n == 0 || n / 2 + 1 != m || im.shape() != shape.as_slice() {
        return Err(Error::shape("irfft", format!("{n} output samples need {} bins of equal real/imaginary shape, got {shape:?} and {:?}", n / 2 + 1, im.shape())));
    }
    let (full_re, full_im) = if n > 1 {
        // Bins m..n are the conjugates of bins n-m..1 (reversed).
        let last = shape.len() - 1;
        let mut size = shape.clone();
        size[last] = n - m;
        let mut begin = vec![0; shape.len()];
        begin[last] = 1;
        let mirror = |t: &Tensor| t.slice_by_size(&begin, &size)?.reverse(&[-1]);
        (
            concat(&[re.clone(), mirror(re)?], -1)?,
            concat(&[im.clone(), mirror(im)?.neg()?], -1)?,
        )
    } else {
        (re.clone(), im.clone())
    };
    Ok(fft_last(feeds, &(full_re, Some(full_im)), true)?.0)
}

/// Which transform a plan computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FftKind {
    /// Complex → complex along the last axis.
    Fft,
    /// Inverse of `Fft` (scaled by 1/N).
    Ifft,
    /// Real → N/2 + 1 complex bins along the last axis.
    Rfft,
    /// N/2 + 1 complex bins → N real samples.
    Irfft,
    /// Complex → complex over the last two axes.
    Fft2,
    /// Inverse of `Fft2` (scaled by 1/(M·N)).
    Ifft2,
}

impl FftKind {
    /// Parse `fft`, `ifft`, `rfft`, `irfft`, `fft2`, `ifft2`.
    pub fn parse(s: &str) -> Result<FftKind> {
        Ok(match s {
            "fft" => FftKind::Fft,
            "ifft" => FftKind::Ifft,
            "rfft" => FftKind::Rfft,
            "irfft" => FftKind::Irfft,
            "fft2" => FftKind::Fft2,
            "ifft2" => FftKind::Ifft2,
            _ => {
                return Err(Error::value(
                    "fft",
                    format!(
                        "unknown transform '{s}' (expected fft, ifft, rfft, irfft, fft2 or ifft2)"
                    ),
                ))
            }
        })
    }

    /// Whether the plan takes a real input (one port) instead of (real, imaginary).
    pub fn real_input(self) -> bool {
        self == FftKind::Rfft
    }

    /// Whether the plan returns a real output (one array) instead of (real, imaginary).
    pub fn real_output(self) -> bool {
        self == FftKind::Irfft
    }
}

/// A compiled transform for one (kind, input shape, output length, device), shared through the plan cache.
#[derive(Clone)]
pub struct FftPlan {
    pub kind: FftKind,
    /// Shape of the input (of each part for complex inputs).
    pub in_shape: Vec<usize>,
    /// Shape of the output (of each part for complex outputs).
    pub out_shape: Vec<usize>,
    plan: SharedPlan,
}

/// Build the graph of `kind` for inputs of `shape`; returns user port names, outputs and feeds.
fn build(kind: FftKind, shape: &[usize], n: usize, device: Device) -> Result<Plan> {
    let mut feeds = Feeds::default();
    let port = |name: &str| crate::input_port(shape, crate::DType::Fp16, Some(name));
    if kind.real_input() {
        let x = port("x")?;
        let (re, im) = rfft(&mut feeds, &x)?;
        return Plan::build(&["x"], &[("y_re", re), ("y_im", im)], feeds, device);
    }
    let x = (port("x_re")?, port("x_im")?);
    let user = ["x_re", "x_im"];
    let (re, im) = match kind {
        FftKind::Irfft => {
            return Plan::build(
                &user,
                &[("y", irfft(&mut feeds, &x.0, &x.1, n)?)],
                feeds,
                device,
            )
        }
        FftKind::Fft | FftKind::Ifft => {
            fft_last(&mut feeds, &(x.0, Some(x.1)), kind == FftKind::Ifft)?
        }
        _ => fft2(&mut feeds, &(x.0, Some(x.1)), kind == FftKind::Ifft2)?,
    };
    Plan::build(&user, &[("y_re", re), ("y_im", im)], feeds, device)
}

impl FftPlan {
    /// The plan for `kind` on inputs of `shape` (`n` = output length for `Irfft`, default
    /// 2·(bins − 1); ignored otherwise), compiled on first use and cached.
    pub fn new(
        kind: FftKind,
        shape: &[usize],
        n: Option<usize>,
        device: Device,
    ) -> Result<FftPlan> {
        shape::check("fft", shape)?;
        let last = shape[shape.len() - 1];
        let n = match kind {
            FftKind::Irfft => n.unwrap_or(2 * (last.max(1) - 1)),
            _ => last,
        };
        let mut out_shape = shape.to_vec();
        *out_shape.last_mut().unwrap_or(&mut 0) = match kind {
            FftKind::Rfft => last / 2 + 1,
            FftKind::Irfft => n,
            _ => last,
        };
        let key = format!("fft/{kind:?}/{shape:?}/{n}/{device:?}");
        let plan = cached(key, || build(kind, shape, n, device))?;
        Ok(FftPlan {
            kind,
            in_shape: shape.to_vec(),
            out_shape,
            plan,
        })
    }

    /// Transform one input (f32, C order, `in_shape`); `im` is required for complex-input kinds
    /// and must be `None` for `Rfft`. Returns the output parts (one for `Irfft`, else real and imaginary).
    pub fn run(&self, re: &[f32], im: Option<&[f32]>) -> Result<Vec<Vec<f32>>> {
        let op = format!("{:?}", self.kind).to_lowercase();
        match (self.kind.real_input(), im) {
            (true, None) => run(&self.plan, &op, &[re]),
            (false, Some(im)) => run(&self.plan, &op, &[re, im]),
            (true, Some(_)) => Err(Error::value(
                op,
                "takes a real input; pass no imaginary part",
            )),
            (false, None) => Err(Error::value(
                op,
                "takes a complex input; pass the imaginary part (zeros for a real signal)",
            )),
        }
    }

    /// The executor running the plan.
    pub fn device(&self) -> &'static str {
        self.plan.lock().unwrap_or_else(|e| e.into_inner()).device()
    }
}
