//! Numeric rewrite (opt-in, `CompileOptions::sum_via_matmul`): `reduce_sum`, `reduce_mean` and
//! `reduce_sum_square` become `x @ ones[K, 1]` (on `x * x` for the sum of squares; the mean
//! scales by 1/K afterwards). The ANE sums `reduce_*` in fp16 — integer sums stop being exact
//! past 2048 and long signed sums drift — while matmul accumulates wide, so the rewrite trades
//! one reduction for one matmul (plus a transpose when the reduced axes are not the last ones)
//! and is never less accurate. Reductions over more than 65536 elements are left as they are.

use std::collections::HashMap;

use crate::error::Result;
use crate::graph::tensor::NodeDef;
use crate::graph::Tensor;
use crate::ops::io::HostArray;
use crate::ops::reduce::{Reduce, ReduceKind};
use crate::ops::Op;
use crate::shape::MAX_EXTENT;

/// Rewrite every eligible reduction under `outputs` (see the module doc); input and constant
/// nodes, and every node whose sources did not change, are kept as the same handles.
pub fn reduce_sum_to_matmul(outputs: &[Tensor]) -> Result<Vec<Tensor>> {
    let mut done: HashMap<*const NodeDef, Vec<Tensor>> = HashMap::new();
    let mut stack: Vec<(Tensor, bool)> = outputs.iter().rev().map(|t| (t.clone(), false)).collect();
    while let Some((t, expanded)) = stack.pop() {
        let key = std::sync::Arc::as_ptr(&t.node);
        if done.contains_key(&key) {
            continue;
        }
        if !expanded {
            stack.push((t.clone(), true));
            stack.extend(t.node.srcs.iter().rev().map(|s| (s.clone(), false)));
            continue;
        }
        let srcs: Vec<Tensor> = t
            .node
            .srcs
            .iter()
            .map(|s| done[&std::sync::Arc::as_ptr(&s.node)][s.port].clone())
            .collect();
        let unchanged = srcs.iter().zip(&t.node.srcs).all(|(a, b)| a.same(b));
        let outs = match &t.node.op {
            Op::Reduce(r) if rewritable(r, srcs[0].shape()) => vec![as_matmul(r, &srcs[0])?],
            _ if unchanged => (0..t.node.outs.len())
                .map(|port| Tensor {
                    node: t.node.clone(),
                    port,
                })
                .collect(),
            op => Tensor::apply(op.clone(), srcs)?,
        };
        done.insert(key, outs);
    }
    Ok(outputs
        .iter()
        .map(|t| done[&std::sync::Arc::as_ptr(&t.node)][t.port].clone())
        .collect())
}

/// Whether `r` on an input of `shape` is rewritten (a sum-like kind over at most 65536 elements).
fn rewritable(r: &Reduce, shape: &[usize]) -> bool {
    matches!(
        r.kind,
        ReduceKind::Sum | ReduceKind::Mean | ReduceKind::SumSquare
    ) && r.axes.iter().map(|&a| shape[a]).product::<usize>() <= MAX_EXTENT
}

/// The reduction as transpose (reduced axes last) → reshape [.., K] → matmul with ones → reshape.
fn as_matmul(r: &Reduce, x: &Tensor) -> Result<Tensor> {
    let shape = x.shape().to_vec();
    let kept: Vec<usize> = (0..shape.len()).filter(|a| !r.axes.contains(a)).collect();
    let perm: Vec<usize> = kept.iter().chain(&r.axes).copied().collect();
    let mut y = if perm.iter().enumerate().all(|(i, &p)| i == p) {
        x.clone()
    } else {
        x.transpose(&perm.iter().map(|&p| p as i64).collect::<Vec<_>>())?
    };
    let k: usize = r.axes.iter().map(|&a| shape[a]).product();
    let mut flat: Vec<i64> = kept.iter().map(|&a| shape[a] as i64).collect();
    if flat.is_empty() {
        flat.push(1);
    }
    flat.push(k as i64);
    y = y.reshape(&flat)?;
    if r.kind == ReduceKind::SumSquare {
        y = y.square()?;
    }
    let mut s = sum_last(&y)?;
    if r.kind == ReduceKind::Mean {
        s = s.mul_scalar(1.0 / k as f32)?;
    }
    let out: Vec<i64> = if r.keep_dims {
        shape
            .iter()
            .enumerate()
            .map(|(i, &d)| if r.axes.contains(&i) { 1 } else { d as i64 })
            .collect()
    } else {
        kept.iter().map(|&a| shape[a] as i64).collect()
    };
    s.reshape(&out)
}

/// Sum of `x` over its last axis as `x @ ones[K, 1]` (wide matmul accumulator), keeping that axis as extent 1.
pub fn sum_last(x: &Tensor) -> Result<Tensor> {
    let k = *x.shape().last().unwrap_or(&1);
    x.matmul_weight(HostArray::f32(&[k, 1], &vec![1.0; k]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::{compile, CompileOptions, Device};
    use crate::exec::PortData;
    use crate::input;

    /// Run `outputs` (rewritten or not) on the reference executor with one input.
    fn run(outputs: &[Tensor], x: &[f32]) -> (Vec<Vec<f32>>, String) {
        let outs: Vec<(Option<String>, Tensor)> =
            outputs.iter().map(|t| (None, t.clone())).collect();
        let mut c = compile(
            &outs,
            &CompileOptions {
                device: Device::Reference,
                ..Default::default()
            },
        )
        .unwrap();
        (c.run(&[PortData::F32(x)]).unwrap(), c.program.mil.clone())
    }

    #[test]
    fn rewritten_reductions_match_float64_sums() {
        let shape = [3, 5, 7];
        let n: usize = shape.iter().product();
        let xs: Vec<f32> = (0..n)
            .map(|i| half::f16::from_f32(((i * 37 % 101) as f32 - 50.0) / 16.0).to_f32())
            .collect();
        let x = input(&shape).unwrap();
        let ys = vec![
            x.sum(&[1], false).unwrap(),
            x.mean(&[0, 2], true).unwrap(),
            x.sum_square(&[-1], false).unwrap(),
            x.sum(&[0, 1, 2], true).unwrap(),
        ];
        let rewritten = reduce_sum_to_matmul(&ys).unwrap();
        let (got, mil) = run(&rewritten, &xs);
        assert!(!mil.contains("reduce_") && mil.contains("matmul"), "{mil}");
        // Oracle: float64 loops over the same fp16 inputs.
        let at = |i: usize, j: usize, k: usize| xs[(i * 5 + j) * 7 + k] as f64;
        let sum1: Vec<f64> = (0..3)
            .flat_map(|i| (0..7).map(move |k| (0..5).map(|j| at(i, j, k)).sum()))
            .collect();
        let mean02: Vec<f64> = (0..5)
            .map(|j| {
                (0..3)
                    .flat_map(|i| (0..7).map(move |k| at(i, j, k)))
                    .sum::<f64>()
                    / 21.0
            })
            .collect();
        let sq: Vec<f64> = (0..15)
            .map(|r| {
                (0..7)
                    .map(|k| xs[r * 7 + k] as f64 * xs[r * 7 + k] as f64)
                    .sum()
            })
            .collect();
        let all = vec![xs.iter().map(|&v| v as f64).sum::<f64>()];
        for (g, w) in got.iter().zip([sum1, mean02, sq, all]) {
            let scale = w.iter().fold(1.0f64, |m, v| m.max(v.abs()));
            let err = g
                .iter()
                .zip(&w)
                .map(|(&a, b)| (a as f64 - b).abs())
                .fold(0.0, f64::max)
                / scale;
            assert!(g.len() == w.len() && err < 2e-3, "{g:?} vs {w:?}: {err:e}");
        }
    }

    #[test]
    fn the_compile_option_applies_the_rewrite() {
        let x = input(&[2, 3000]).unwrap();
        let opts = CompileOptions {
            device: Device::Reference,
            sum_via_matmul: true,
            ..Default::default()
        };
        let mut c = compile(&[(Some("s".into()), x.sum(&[1], true).unwrap())], &opts).unwrap();
        assert!(
            !c.program.mil.contains("reduce_sum")
                && c.outputs()[0].name == "s"
                && c.outputs()[0].shape == [2, 1]
        );
        let xs: Vec<f32> = (0..6000).map(|i| (i % 3) as f32).collect();
        assert_eq!(
            c.run(&[PortData::F32(&xs)]).unwrap()[0],
            vec![3000.0, 3000.0]
        );
    }

    #[test]
    fn untouched_graphs_keep_their_handles() {
        let x = input(&[4, 8]).unwrap();
        let y = x.relu().unwrap().amax(&[1], false).unwrap();
        let r = reduce_sum_to_matmul(std::slice::from_ref(&y)).unwrap();
        assert!(r[0].same(&y));
    }
}
