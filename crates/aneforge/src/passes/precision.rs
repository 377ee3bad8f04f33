//! Static numerics lint: flag fp16-narrow sums. The ANE accumulates `reduce_*` sums in fp16, so
//! a signed sum over K elements carries an error of roughly 1e-3·√K relative to its inputs'
//! scale, and integer sums stop being exact past 2048 (a running fp16 sum of ones stalls at
//! 2048). A matmul with a ones vector accumulates wide; [`super::reduce_to_matmul`] rewrites to it.
//! Also flagged: squares of unscaled values (`mul(t, t)`, `pow(t, 2)`), which overflow fp16 once
//! |t| ≥ 256 — the built-in norms square only values first divided by their max-abs (a `real_div`).

use crate::error::Result;
use crate::graph::{Graph, Tensor};
use crate::ops::elementwise::Binary;
use crate::ops::reduce::ReduceKind;
use crate::ops::Op;
use crate::shape::MAX_EXTENT;

/// Reductions over at least this many elements are reported (the reference's narrow-sum threshold).
pub const NARROW_SUM_MIN: usize = 256;
/// Past this many elements an fp16 running sum of integers is no longer exact.
pub const FP16_EXACT_INT: usize = 2048;

/// One flagged node.
#[derive(Clone, Debug, PartialEq)]
pub struct Hotspot {
    /// Node index in the graph built from the outputs (topological order).
    pub node: usize,
    /// The op (`reduce_sum`, ...).
    pub op: &'static str,
    /// Shape of the reduced input.
    pub shape: Vec<usize>,
    /// Elements summed per output value.
    pub k: usize,
    /// Estimated relative error, 1e-3·√K.
    pub est_error: f64,
    /// Whether `reduce_sum_to_matmul` rewrites it (K ≤ 65536 and a sum, mean or sum of squares).
    pub fixable: bool,
    pub reason: String,
}

/// Every accumulating reduction under `outputs` summing at least [`NARROW_SUM_MIN`] elements,
/// worst first. Errors only if the outputs do not form a valid graph.
pub fn precision_risk(outputs: &[Tensor]) -> Result<Vec<Hotspot>> {
    let outs: Vec<(Option<String>, Tensor)> = outputs.iter().map(|t| (None, t.clone())).collect();
    Ok(graph_risk(&Graph::from_outputs(&outs)?))
}

/// [`precision_risk`] of an already built graph, worst first.
pub fn graph_risk(g: &Graph) -> Vec<Hotspot> {
    let mut found: Vec<Hotspot> = g
        .nodes
        .iter()
        .enumerate()
        .filter_map(|(i, n)| {
            let Op::Reduce(r) = &n.op else { return None };
            if matches!(r.kind, ReduceKind::Max | ReduceKind::Min) {
                return None;
            }
            let shape = g.ty(n.inputs[0]).shape.clone();
            let k: usize = r.axes.iter().map(|&a| shape[a]).product();
            if k < NARROW_SUM_MIN {
                return None;
            }
            let fixable = matches!(r.kind, ReduceKind::Sum | ReduceKind::Mean | ReduceKind::SumSquare) && k <= MAX_EXTENT;
            let exact = if k > FP16_EXACT_INT { format!("; integer sums are inexact past {FP16_EXACT_INT} (a running fp16 sum of ones stalls at 2048)") } else { String::new() };
            let fix = if fixable { "rewrite as a matmul with ones (reduce_sum_to_matmul)" } else { "split the sum or compute it as a matmul with ones by hand" };
            let op = n.op.family().name();
            let reason = format!("{op} over {k} elements of {shape:?} accumulates in fp16 on the ANE{exact}; fix: {fix}");
            Some(Hotspot { node: i, op, shape, k, est_error: 1e-3 * (k as f64).sqrt(), fixable, reason })
        })
        .collect();
    found.extend(unscaled_squares(g));
    found.sort_by(|a, b| b.est_error.total_cmp(&a.est_error));
    found
}

/// Past this magnitude an fp16 square overflows (256² = 65536 > 65504).
pub const FP16_SQUARE_MAX: f64 = 256.0;

/// Every `mul(t, t)` or `pow(t, 2)` whose `t` is not a `real_div` result (a scaled value): its
/// square is inf for |t| ≥ 256 (est_error 1, not fixable by a rewrite).
fn unscaled_squares(g: &Graph) -> Vec<Hotspot> {
    let is_two = |v: &crate::graph::Value| matches!(&g.nodes[v.node].op, Op::Const(c) if c.values.len() == 1 && c.values[0].to_f32() == 2.0);
    g.nodes
        .iter()
        .enumerate()
        .filter_map(|(i, n)| {
            let square = match n.op {
                Op::Binary(Binary::Mul) => n.inputs[0] == n.inputs[1],
                Op::Binary(Binary::Pow) => is_two(&n.inputs[1]),
                _ => false,
            };
            let t = n.inputs.first()?;
            if !square || matches!(g.nodes[t.node].op, Op::Binary(Binary::RealDiv)) {
                return None;
            }
            let op = n.op.family().name();
            let shape = g.ty(*t).shape.clone();
            let reason = format!("{op} squares a value of {shape:?} that is not scaled first: fp16 overflows to inf once |x| >= {FP16_SQUARE_MAX} (a variance built this way returns zeros); divide by the max-abs first, as layer_norm/rms_norm do");
            Some(Hotspot { node: i, op, shape, k: 1, est_error: 1.0, fixable: false, reason })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::{compile, CompileOptions, Device};
    use crate::exec::PortData;
    use crate::input;
    use crate::passes::reduce_to_matmul::reduce_sum_to_matmul;
    use half::f16;

    /// The ANE's reduce_sum model: a running sum rounded to fp16 after every addition.
    fn fp16_running_sum(xs: &[f32]) -> f32 {
        xs.iter()
            .fold(f16::ZERO, |acc, &v| f16::from_f32(acc.to_f32() + v))
            .to_f32()
    }

    #[test]
    fn sum_of_4096_ones_is_flagged_and_the_rewrite_is_exact() {
        let x = input(&[2, 4096]).unwrap();
        let y = x.sum(&[1], false).unwrap();
        let risks = precision_risk(std::slice::from_ref(&y)).unwrap();
        assert_eq!(risks.len(), 1, "{risks:?}");
        let r = &risks[0];
        assert!(
            r.op == "reduce_sum" && r.k == 4096 && r.fixable && r.reason.contains("2048"),
            "{r:?}"
        );
        assert!((r.est_error - 0.064).abs() < 1e-3);

        // The gap: an fp16 running sum of 4096 ones stops at 2048; the matmul form gives 4096.
        let ones = vec![1.0f32; 2 * 4096];
        assert_eq!(fp16_running_sum(&ones[..4096]), 2048.0);
        let fixed = reduce_sum_to_matmul(&[y]).unwrap();
        assert!(precision_risk(&fixed).unwrap().is_empty());
        let mut c = compile(
            &[(None, fixed[0].clone())],
            &CompileOptions {
                device: Device::Reference,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(
            c.run(&[PortData::F32(&ones)]).unwrap()[0],
            vec![4096.0, 4096.0]
        );
    }

    #[test]
    fn unscaled_squares_are_flagged_and_the_norms_are_not() {
        let x = input(&[4, 8]).unwrap();
        let d = x.sub(&x.mean(&[1], true).unwrap()).unwrap();
        let var = d.mul(&d).unwrap().mean(&[1], true).unwrap();
        let r = precision_risk(&[var]).unwrap();
        assert!(
            r.len() == 1 && r[0].op == "mul" && !r[0].fixable && r[0].reason.contains("256"),
            "{r:?}"
        );
        let p = precision_risk(&[d.pow_scalar(2.0).unwrap()]).unwrap();
        assert!(p.len() == 1 && p[0].op == "pow", "{p:?}");
        assert!(precision_risk(&[d.pow_scalar(3.0).unwrap()])
            .unwrap()
            .is_empty());
        let norms = [
            x.layer_norm(None, None, 1e-5).unwrap(),
            x.rms_norm(None, 1e-5).unwrap(),
            x.l2_norm(-1, 1e-12).unwrap(),
            input(&[1, 4, 1, 8])
                .unwrap()
                .channel_layer_norm(None, None, 1e-5)
                .unwrap(),
        ];
        assert!(precision_risk(&norms).unwrap().is_empty());
    }

    #[test]
    fn short_sums_and_max_are_not_flagged() {
        let x = input(&[4, 255]).unwrap();
        let outs = [
            x.sum(&[1], false).unwrap(),
            input(&[8, 5000]).unwrap().amax(&[1], false).unwrap(),
        ];
        assert!(precision_risk(&outs).unwrap().is_empty());
        let l2 = input(&[1, 70000 / 2])
            .unwrap()
            .reduce_l2_norm(&[1], false)
            .unwrap();
        let r = precision_risk(&[l2]).unwrap();
        assert!(
            r.len() == 1 && !r[0].fixable && r[0].op == "reduce_l2_norm",
            "{r:?}"
        );
    }
}
