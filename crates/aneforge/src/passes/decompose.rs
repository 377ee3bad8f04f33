//! Rewrite ops that a family runs only through a decomposition: sin and cos below A15 become
//! fp16 polynomials built from mul/add/sub.
//!
//! Range reduction: n = round(x/π) (rounded by adding and subtracting 1536, exact in fp16 for
//! |x/π| ≤ 512), r = (x − n·C1) − n·C2 with π = C1 + C2, C1 = 3.125 (so n·C1 is exact for
//! |n| ≤ 64), giving r in [−π/2, π/2]; then sin x = (−1)ⁿ·r·S(r²), cos x = (−1)ⁿ·C(r²) with
//! Taylor polynomials to r⁹ and r⁸ evaluated by Horner, (−1)ⁿ = 1 − 2m², m = n − 2·round(n/2).
//! Measured on the reference executor (fp16) against NumPy on fp16 inputs: max |error| 1.04e-3
//! (sin) and 7.2e-4 (cos) for |x| ≤ 4π, 1.10e-3 / 1.31e-3 for |x| ≤ 200 (native: 2.4e-4); past
//! |n| = 64 (|x| ≈ 200) n·C1 is no longer exact and the error grows (0.13 for |x| ≤ 500).

use crate::error::Result;
use crate::graph::{Graph, Tensor};
use crate::targets::{op_status, Family, Status};

/// Adding then subtracting this rounds an fp16 value to an integer (fp16 spacing is 1 in [1024, 2048)).
const ROUND_MAGIC: f32 = 1536.0;
/// High part of π: few mantissa bits, so n·C1 is exact in fp16.
const PI_HI: f32 = 3.125;
/// Low part of π (π − 3.125).
const PI_LO: f32 = std::f32::consts::PI - PI_HI;
/// sin: coefficients of r, r³, r⁵, r⁷, r⁹ (Taylor).
const SIN: [f32; 5] = [1.0, -1.0 / 6.0, 1.0 / 120.0, -1.0 / 5040.0, 1.0 / 362880.0];
/// cos: coefficients of 1, r², r⁴, r⁶, r⁸ (Taylor).
const COS: [f32; 5] = [1.0, -0.5, 1.0 / 24.0, -1.0 / 720.0, 1.0 / 40320.0];

/// Rebuild `graph` with every op whose status on `family` is `Decompose` replaced by its decomposition.
pub fn decompose(graph: &Graph, family: Family) -> Result<Graph> {
    let mut built: Vec<Vec<Tensor>> = Vec::with_capacity(graph.nodes.len());
    for n in &graph.nodes {
        let srcs: Vec<Tensor> = n
            .inputs
            .iter()
            .map(|v| built[v.node][v.port].clone())
            .collect();
        let op = n.op.family().name();
        let outs = match (op_status(op, family), op) {
            (Status::Decompose, "sin") => vec![sin(&srcs[0])?],
            (Status::Decompose, "cos") => vec![cos(&srcs[0])?],
            _ => Tensor::apply(n.op.clone(), srcs)?,
        };
        built.push(outs);
    }
    let outputs: Vec<(Option<String>, Tensor)> = graph
        .outputs
        .iter()
        .map(|(name, v)| (Some(name.clone()), built[v.node][v.port].clone()))
        .collect();
    Graph::from_outputs(&outputs)
}

/// sin(x) from mul/add/sub (see the module doc for the method and accuracy).
pub fn sin(x: &Tensor) -> Result<Tensor> {
    let (r, sign) = reduce(x)?;
    horner(&r.square()?, &SIN)?.mul(&r)?.mul(&sign)
}

/// cos(x) from mul/add/sub (see the module doc for the method and accuracy).
pub fn cos(x: &Tensor) -> Result<Tensor> {
    let (r, sign) = reduce(x)?;
    horner(&r.square()?, &COS)?.mul(&sign)
}

/// Round to the nearest integer through fp16 (exact for |t| ≤ 512).
fn round(t: &Tensor) -> Result<Tensor> {
    t.add_scalar(ROUND_MAGIC)?.sub_scalar(ROUND_MAGIC)
}

/// (r, (−1)ⁿ) with x = nπ + r, r in [−π/2, π/2].
fn reduce(x: &Tensor) -> Result<(Tensor, Tensor)> {
    let n = round(&x.mul_scalar(std::f32::consts::FRAC_1_PI)?)?;
    let r = x.sub(&n.mul_scalar(PI_HI)?)?.sub(&n.mul_scalar(PI_LO)?)?;
    let odd = n.sub(&round(&n.mul_scalar(0.5)?)?.mul_scalar(2.0)?)?;
    Ok((r, odd.square()?.mul_scalar(-2.0)?.add_scalar(1.0)?))
}

/// c₀ + c₁·s + c₂·s² + c₃·s³ + c₄·s⁴ by Horner's rule.
fn horner(s: &Tensor, c: &[f32; 5]) -> Result<Tensor> {
    let mut acc = s.mul_scalar(c[4])?.add_scalar(c[3])?;
    for k in c[..3].iter().rev() {
        acc = acc.mul(s)?.add_scalar(*k)?;
    }
    Ok(acc)
}

#[cfg(test)]
mod tests {
    use crate::compile::{compile, CompileOptions, Device};
    use crate::error::Error;
    use crate::exec::{PortData, Precision};
    use crate::input;
    use half::f16;

    /// Max |error| of sin and cos compiled for `target` on the reference executor, over fp16 points in [-lim, lim].
    fn max_errors(target: &str, lim: f32) -> (f64, f64, String) {
        let n = 4001;
        let xs: Vec<f32> = (0..n)
            .map(|i| f16::from_f32(-lim + 2.0 * lim * i as f32 / (n - 1) as f32).to_f32())
            .collect();
        let x = input(&[n]).unwrap();
        let dir = std::env::temp_dir().join(format!(
            "aneforge-decompose-{}-{target}-{lim}",
            std::process::id()
        ));
        let opts = CompileOptions {
            device: Device::Reference,
            build_dir: Some(dir.clone()),
            target: Some(target.into()),
            ..Default::default()
        };
        let mut c = compile(&[(None, x.sin().unwrap()), (None, x.cos().unwrap())], &opts).unwrap();
        let out = c.run(&[PortData::F32(&xs)]).unwrap();
        let err = |ys: &[f32], f: fn(f64) -> f64| {
            xs.iter()
                .zip(ys)
                .map(|(&x, &y)| (y as f64 - f(x as f64)).abs())
                .fold(0.0, f64::max)
        };
        let mil = c.program.mil.clone();
        std::fs::remove_dir_all(dir).unwrap();
        (err(&out[0], f64::sin), err(&out[1], f64::cos), mil)
    }

    #[test]
    fn sin_cos_polynomials_below_a15() {
        let (s, c, mil) = max_errors("h13", 4.0 * std::f32::consts::PI);
        assert!(!mil.contains(" sin(") && !mil.contains(" cos("), "{mil}");
        assert!(s < 1.1e-3 && c < 8e-4, "sin {s:e}, cos {c:e}");
        let (s, c, _) = max_errors("A14", 100.0);
        assert!(s < 1.5e-3 && c < 1.5e-3, "sin {s:e}, cos {c:e}");
    }

    #[test]
    fn native_sin_cos_from_a15() {
        let (s, c, mil) = max_errors("h15", 4.0 * std::f32::consts::PI);
        assert!(mil.contains(" sin(") && mil.contains(" cos("), "{mil}");
        assert!(s < 5e-4 && c < 5e-4, "sin {s:e}, cos {c:e}");
    }

    #[test]
    fn fp32_precision_cannot_decompose() {
        let opts = CompileOptions {
            device: Device::Reference,
            precision: Precision::Fp32,
            target: Some("h13".into()),
            ..Default::default()
        };
        let e = compile(&[(None, input(&[4]).unwrap().sin().unwrap())], &opts)
            .err()
            .unwrap();
        assert!(
            matches!(e, Error::Value { .. })
                && e.to_string()
                    .contains("[\"sin\"] must be decomposed for target A13 (h13)"),
            "{e}"
        );
    }
}
