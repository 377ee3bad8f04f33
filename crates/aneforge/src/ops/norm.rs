//! Normalisation: native inference `batch_norm` and `instance_norm`, and the composites layer_norm, rms_norm,
//! group_norm and l2_norm, which are builder functions emitting MIL primitives.

use super::io::{expect_fp16, expect_inputs};
use super::{Buf, Family, Op, TensorType};
use crate::error::{Error, Result};
use crate::mil::{Literal, MilArgs, MilOp};
use crate::shape::{self};

/// The MIL op name of [`BatchNorm`].
pub const BATCH_NORM: &str = "batch_norm";
/// The MIL op name of [`InstanceNorm`].
pub const INSTANCE_NORM: &str = "instance_norm";

/// MIL ops this family prints (the composites emit other families' ops).
pub const MIL_OPS: &[&str] = &[BATCH_NORM, INSTANCE_NORM];

/// MIL `batch_norm(x, mean, variance, gamma, beta, epsilon)`; x rank 3..=5, the four
/// statistics are [C] tensors (C = x.shape[1]); `eps` holds the fp16-rounded value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BatchNorm {
    pub eps: f32,
}

/// MIL `instance_norm(x, gamma, beta, epsilon)`: each (n, c) plane of x (rank 3 or 4)
/// normalised by its own mean and population variance, then gamma/beta ([C]) applied.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct InstanceNorm {
    pub eps: f32,
}

/// batch_norm's tensor arguments, in input order.
const BN_INPUTS: [&str; 5] = ["x", "mean", "variance", "gamma", "beta"];

impl Family for BatchNorm {
    fn name(&self) -> &'static str {
        BATCH_NORM
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_inputs(BATCH_NORM, inputs, 5)?;
        expect_fp16(BATCH_NORM, inputs)?;
        let s = &inputs[0].shape;
        if !(3..=5).contains(&s.len()) {
            return Err(Error::shape(
                BATCH_NORM,
                format!("x must have rank 3..=5, got {s:?}"),
            ));
        }
        for (name, t) in BN_INPUTS.iter().zip(inputs).skip(1) {
            if t.shape != [s[1]] {
                return Err(Error::shape(
                    BATCH_NORM,
                    format!(
                        "{name} must have shape [C] = [{}] for x {s:?}, got {:?}",
                        s[1], t.shape
                    ),
                ));
            }
        }
        Ok(vec![inputs[0].clone()])
    }
    fn mil(&self) -> MilOp {
        MilOp::new(BATCH_NORM, &BN_INPUTS).param("epsilon", Literal::Fp16(self.eps))
    }
    fn eval(&self, ins: &[&Buf], out: &mut [Buf]) -> Result<()> {
        let x = ins[0];
        let (c, plane) = (x.shape[1], shape::numel(&x.shape[2..]));
        let [mean, var, gamma, beta] = [1, 2, 3, 4].map(|i| &ins[i].data);
        let scale: Vec<f32> = (0..c)
            .map(|k| gamma[k] / (var[k] + self.eps).sqrt())
            .collect();
        for (i, (yp, xp)) in out[0]
            .data
            .chunks_mut(plane)
            .zip(x.data.chunks(plane))
            .enumerate()
        {
            let k = i % c;
            yp.iter_mut()
                .zip(xp)
                .for_each(|(o, &v)| *o = (v - mean[k]) * scale[k] + beta[k]);
        }
        Ok(())
    }
}

impl Family for InstanceNorm {
    fn name(&self) -> &'static str {
        INSTANCE_NORM
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_inputs(INSTANCE_NORM, inputs, 3)?;
        expect_fp16(INSTANCE_NORM, inputs)?;
        let s = &inputs[0].shape;
        if !(3..=4).contains(&s.len()) {
            return Err(Error::shape(
                INSTANCE_NORM,
                format!("x must have rank 3 or 4 ([N, C, H, W]), got {s:?}"),
            ));
        }
        for (name, t) in ["gamma", "beta"].iter().zip(&inputs[1..]) {
            if t.shape != [s[1]] {
                return Err(Error::shape(
                    INSTANCE_NORM,
                    format!(
                        "{name} must have shape [C] = [{}] for x {s:?}, got {:?}",
                        s[1], t.shape
                    ),
                ));
            }
        }
        Ok(vec![inputs[0].clone()])
    }
    fn mil(&self) -> MilOp {
        MilOp::new(INSTANCE_NORM, &["x", "gamma", "beta"]).param("epsilon", Literal::Fp16(self.eps))
    }
    fn eval(&self, ins: &[&Buf], out: &mut [Buf]) -> Result<()> {
        let x = ins[0];
        let (c, plane) = (x.shape[1], shape::numel(&x.shape[2..]));
        let (gamma, beta) = (&ins[1].data, &ins[2].data);
        for (i, (yp, xp)) in out[0]
            .data
            .chunks_mut(plane)
            .zip(x.data.chunks(plane))
            .enumerate()
        {
            let k = i % c;
            let mean = xp.iter().sum::<f32>() / plane as f32;
            let var = xp.iter().map(|&v| (v - mean) * (v - mean)).sum::<f32>() / plane as f32;
            let scale = gamma[k] / (var + self.eps).sqrt();
            yp.iter_mut()
                .zip(xp)
                .for_each(|(o, &v)| *o = (v - mean) * scale + beta[k]);
        }
        Ok(())
    }
}

/// Parse `batch_norm` and `instance_norm`.
pub fn from_mil(op: &str, args: &mut MilArgs) -> Option<Result<Op>> {
    match op {
        BATCH_NORM => Some(
            args.fp16("epsilon")
                .map(|eps| Op::BatchNorm(BatchNorm { eps })),
        ),
        INSTANCE_NORM => Some(
            args.fp16("epsilon")
                .map(|eps| Op::InstanceNorm(InstanceNorm { eps })),
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::constant;
    use crate::graph::build::norm::*;
    use crate::graph::Graph;
    use crate::graph::Tensor;
    use crate::mil::literal::round_f16;
    use crate::ops::io::HostArray;
    use crate::ops::layout::tests::{buf, data, mil_args, round_trip, run};
    use crate::{input, input_port, DType};

    /// Run every kernel of `out`'s DAG in order (f32, unrounded), feeding inputs in creation order; also the op names.
    fn eval_dag(out: &Tensor, feeds: &[&[f32]]) -> (Vec<f32>, Vec<&'static str>) {
        let g = Graph::from_outputs(&[(None, out.clone())]).unwrap();
        let mut vals: Vec<Vec<Buf>> = Vec::new();
        for (i, node) in g.nodes.iter().enumerate() {
            let ins: Vec<&Buf> = node.inputs.iter().map(|v| &vals[v.node][v.port]).collect();
            let mut outs: Vec<Buf> = node.outputs.iter().map(|t| Buf::zeros(&t.shape)).collect();
            match g.inputs.iter().position(|&n| n == i) {
                Some(k) => outs[0].data = feeds[k].to_vec(),
                None => node.op.family().eval(&ins, &mut outs).unwrap(),
            }
            vals.push(outs);
        }
        let v = g.outputs[0].1;
        let names = g
            .nodes
            .iter()
            .filter(|n| !matches!(n.op, Op::Input(_) | Op::Const(_)))
            .map(|n| n.op.family().name())
            .collect();
        (vals[v.node][v.port].data.clone(), names)
    }

    /// The overflow-safe x / √(mean(x²) + r²) chain (`rms_scaled`), in graph order.
    const RMS_SCALED: [&str; 11] = [
        "abs",
        "reduce_max",
        "maximum",
        "real_div",
        "mul",
        "reduce_mean",
        "real_div",
        "mul",
        "add",
        "rsqrt",
        "mul",
    ];
    /// The standardisation chain: halve, subtract the mean twice, then `RMS_SCALED`.
    const STANDARDIZE: [&str; 16] = [
        "mul",
        "reduce_mean",
        "sub",
        "reduce_mean",
        "sub",
        RMS_SCALED[0],
        RMS_SCALED[1],
        RMS_SCALED[2],
        RMS_SCALED[3],
        RMS_SCALED[4],
        RMS_SCALED[5],
        RMS_SCALED[6],
        RMS_SCALED[7],
        RMS_SCALED[8],
        RMS_SCALED[9],
        RMS_SCALED[10],
    ];

    fn assert_close(got: &[f32], want: &[f64], what: &str) {
        assert_eq!(got.len(), want.len(), "{what}");
        for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
            assert!(
                (g as f64 - w).abs() <= 2e-4 * (1.0 + w.abs()),
                "{what}: element {i}: got {g}, want {w}"
            );
        }
    }

    /// f64 standardisation of consecutive groups of `n` values, then ·gamma[j(i)] + beta[j(i)].
    fn naive_norm(
        x: &[f32],
        n: usize,
        eps: f64,
        rms: bool,
        affine: impl Fn(usize) -> (f64, f64),
    ) -> Vec<f64> {
        let mut out = Vec::with_capacity(x.len());
        for g in x.chunks(n) {
            let m = if rms {
                0.0
            } else {
                g.iter().map(|&v| v as f64).sum::<f64>() / n as f64
            };
            let var = g.iter().map(|&v| (v as f64 - m).powi(2)).sum::<f64>() / n as f64;
            out.extend(g.iter().map(|&v| (v as f64 - m) / (var + eps).sqrt()));
        }
        out.iter()
            .zip((0..).map(affine))
            .map(|(v, (a, b))| v * a + b)
            .collect()
    }

    /// Affine parameters exactly representable in fp16.
    fn params(n: usize, seed: u64) -> Vec<f32> {
        data(n, seed)
            .iter()
            .map(|v| (v * 4.0).round() / 8.0 + 1.0)
            .collect()
    }

    #[test]
    fn batch_norm_matches_naive() {
        for shape in [
            vec![2, 3, 5],
            vec![1, 7, 1],
            vec![1, 3, 2, 2, 2],
            vec![2, 783, 1, 1],
        ] {
            let (x, c) = (buf(&shape, 1), shape[1]);
            let mut stats: Vec<Buf> = (0..4)
                .map(|k| Buf {
                    shape: vec![c],
                    data: params(c, k + 2),
                })
                .collect();
            stats[1].data.iter_mut().for_each(|v| *v = v.abs() + 0.5);
            let op = Op::BatchNorm(BatchNorm { eps: 1e-3 });
            let y = run(&op, &[&x, &stats[0], &stats[1], &stats[2], &stats[3]]).remove(0);
            let plane = shape::numel(&shape[2..]);
            let want: Vec<f64> = (0..x.data.len())
                .map(|i| {
                    let k = (i / plane) % c;
                    let s = |j: usize| stats[j].data[k] as f64;
                    (x.data[i] as f64 - s(0)) / (s(1) + 1e-3f32 as f64).sqrt() * s(2) + s(3)
                })
                .collect();
            assert_close(&y.data, &want, &format!("batch_norm {shape:?}"));
        }
    }

    #[test]
    fn batch_norm_builder_and_errors() {
        let x = input(&[2, 3, 4, 4]).unwrap();
        let (s3, s4) = (vec![1f32; 3], vec![1f32; 4]);
        let a3 = HostArray::f32(&[3], &s3);
        let y = batch_norm(&x, a3, a3, None, Some(a3), 1e-5).unwrap();
        assert_eq!(
            (y.shape(), y.op()),
            (
                x.shape(),
                &Op::BatchNorm(BatchNorm {
                    eps: round_f16(1e-5)
                })
            )
        );
        let errs = [
            batch_norm(&input(&[2, 4]).unwrap(), a3, a3, None, None, 1e-5),
            batch_norm(&input(&[3]).unwrap(), a3, a3, None, None, 1e-5),
            batch_norm(&x, HostArray::f32(&[4], &s4), a3, None, None, 1e-5),
            batch_norm(&x, a3, a3, Some(HostArray::f32(&[1, 3], &s3)), None, 1e-5),
            batch_norm(&x, a3, a3, None, Some(HostArray::f32(&[3], &s4)), 1e-5),
            batch_norm(&x, a3, a3, None, None, f32::NAN),
            batch_norm(&x, a3, a3, None, None, f32::INFINITY),
            batch_norm(&x, a3, a3, None, None, 1e6),
            batch_norm(&x, a3, a3, None, None, -1.0),
            batch_norm(
                &input_port(&[2, 3, 4], DType::Uint8, None).unwrap(),
                a3,
                a3,
                None,
                None,
                1e-5,
            ),
        ];
        for (i, e) in errs.iter().enumerate() {
            assert!(e.is_err(), "case {i} should fail");
        }
        let msg = batch_norm(&x, HostArray::f32(&[4], &s4), a3, None, None, 1e-5)
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("batch_norm") && msg.contains("mean") && msg.contains("[2, 3, 4, 4]"),
            "{msg}"
        );
        assert!(
            batch_norm(&x, a3, a3, None, None, 1e-30).is_ok(),
            "eps rounding to 0 is fine"
        );
    }

    #[test]
    fn batch_norm_mil_round_trip() {
        round_trip(
            &Op::BatchNorm(BatchNorm {
                eps: round_f16(1e-5),
            }),
            from_mil,
        );
        assert!(from_mil(
            "batch_norm",
            &mut mil_args(vec![("epsilon", Literal::Int32(1))])
        )
        .unwrap()
        .is_err());
        assert!(from_mil("layer_norm", &mut mil_args(vec![])).is_none());
    }

    #[test]
    fn instance_norm_matches_naive_and_errors() {
        for shape in [vec![2, 3, 5], vec![1, 7, 1], vec![2, 3, 7, 65]] {
            let (x, c) = (buf(&shape, 4), shape[1]);
            let (g, b) = (
                Buf {
                    shape: vec![c],
                    data: params(c, 7),
                },
                Buf {
                    shape: vec![c],
                    data: params(c, 8),
                },
            );
            let y = run(&Op::InstanceNorm(InstanceNorm { eps: 1e-3 }), &[&x, &g, &b]).remove(0);
            let plane = shape::numel(&shape[2..]);
            let mut want = Vec::new();
            for (i, p) in x.data.chunks(plane).enumerate() {
                let k = i % c;
                let mean = p.iter().map(|&v| v as f64).sum::<f64>() / plane as f64;
                let var = p.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / plane as f64;
                want.extend(p.iter().map(|&v| {
                    (v as f64 - mean) / (var + 1e-3f32 as f64).sqrt() * g.data[k] as f64
                        + b.data[k] as f64
                }));
            }
            assert_close(&y.data, &want, &format!("instance_norm {shape:?}"));
        }
        let x = input(&[2, 3, 4, 4]).unwrap();
        let s3 = vec![1f32; 3];
        let a3 = HostArray::f32(&[3], &s3);
        let y = instance_norm(&x, Some(a3), None, 1e-5).unwrap();
        assert_eq!(
            (y.shape(), y.op()),
            (
                x.shape(),
                &Op::InstanceNorm(InstanceNorm {
                    eps: round_f16(1e-5)
                })
            )
        );
        for e in [
            instance_norm(&input(&[2, 3]).unwrap(), None, None, 1e-5),
            instance_norm(&input(&[1, 3, 2, 2, 2]).unwrap(), None, None, 1e-5),
            instance_norm(&x, Some(HostArray::f32(&[1, 3], &s3)), None, 1e-5),
            instance_norm(&x, None, Some(HostArray::f32(&[2], &s3[..2])), 1e-5),
            instance_norm(&x, None, None, f32::NAN),
            instance_norm(
                &input_port(&[2, 3, 4], DType::Uint8, None).unwrap(),
                None,
                None,
                1e-5,
            ),
        ] {
            assert!(e.is_err());
        }
        round_trip(
            &Op::InstanceNorm(InstanceNorm {
                eps: round_f16(1e-5),
            }),
            from_mil,
        );
    }

    #[test]
    fn layer_norm_lowers_and_matches_naive() {
        for shape in [vec![7, 783], vec![783], vec![2, 1, 3, 1, 5]] {
            let d = shape[shape.len() - 1];
            let (xv, gv, bv) = (buf(&shape, 1).data, params(d, 2), params(d, 3));
            let x = input(&shape).unwrap();
            let (g, b) = (
                constant("t", HostArray::f32(&[d], &gv)).unwrap(),
                constant("t", HostArray::f32(&[d], &bv)).unwrap(),
            );
            let (y, ops) = eval_dag(&x.layer_norm(Some(&g), Some(&b), 1e-3).unwrap(), &[&xv]);
            assert_eq!(ops, [STANDARDIZE.as_slice(), &["mul", "add"]].concat());
            let eps = round_f16(1e-3) as f64;
            assert_close(
                &y,
                &naive_norm(&xv, d, eps, false, |i| (gv[i % d] as f64, bv[i % d] as f64)),
                &format!("layer_norm {shape:?}"),
            );
            let (_, ops) = eval_dag(&x.layer_norm(None, None, 1e-3).unwrap(), &[&xv]);
            assert_eq!(ops, STANDARDIZE);
        }
        let x = input(&[4, 6]).unwrap();
        let g = input(&[6]).unwrap();
        assert!(
            x.layer_norm(Some(&g), None, 1e-5).is_ok(),
            "a tensor gamma is allowed"
        );
        assert!(x
            .layer_norm(Some(&input(&[1, 6]).unwrap()), None, 1e-5)
            .is_err());
        assert!(x
            .layer_norm(None, Some(&input(&[4]).unwrap()), 1e-5)
            .is_err());
        assert!(x.layer_norm(None, None, f32::NAN).is_err());
        assert!(crate::scalar("t", 1.0)
            .unwrap()
            .layer_norm(None, None, 1e-5)
            .is_err());
    }

    #[test]
    fn channel_layer_norm_lowers_and_matches_naive() {
        let (shape, c, s) = ([2, 7, 1, 65], 7, 65);
        let (xv, gv, bv) = (buf(&shape, 5).data, params(c, 6), params(c, 7));
        let x = input(&shape).unwrap();
        let (g, b) = (
            constant("t", HostArray::f32(&[c], &gv)).unwrap(),
            constant("t", HostArray::f32(&[c], &bv)).unwrap(),
        );
        let (y, ops) = eval_dag(
            &x.channel_layer_norm(Some(&g), Some(&b), 1e-3).unwrap(),
            &[&xv],
        );
        assert_eq!(ops, [STANDARDIZE.as_slice(), &["mul", "add"]].concat());
        let eps = round_f16(1e-3) as f64;
        let mut want = vec![0f64; xv.len()];
        for (n, j) in (0..2).flat_map(|n| (0..s).map(move |j| (n, j))) {
            let at = |k: usize| n * c * s + k * s + j;
            let mean = (0..c).map(|k| xv[at(k)] as f64).sum::<f64>() / c as f64;
            let var = (0..c)
                .map(|k| (xv[at(k)] as f64 - mean).powi(2))
                .sum::<f64>()
                / c as f64;
            (0..c).for_each(|k| {
                want[at(k)] =
                    (xv[at(k)] as f64 - mean) / (var + eps).sqrt() * gv[k] as f64 + bv[k] as f64
            });
        }
        assert_close(&y, &want, "channel_layer_norm");
        assert!(input(&[2, 7, 2, 65])
            .unwrap()
            .channel_layer_norm(None, None, 1e-5)
            .is_err());
        assert!(input(&[7, 65])
            .unwrap()
            .channel_layer_norm(None, None, 1e-5)
            .is_err());
        assert!(x
            .channel_layer_norm(Some(&input(&[65]).unwrap()), None, 1e-5)
            .is_err());
        assert!(x.channel_layer_norm(None, None, -1.0).is_err());
    }

    #[test]
    fn rms_norm_matches_naive() {
        let (shape, d) = ([3, 783], 783);
        let (xv, gv) = (buf(&shape, 4).data, params(d, 5));
        let x = input(&shape).unwrap();
        let g = constant("t", HostArray::f32(&[d], &gv)).unwrap();
        let want = naive_norm(&xv, d, 1e-5, true, |i| (gv[i % d] as f64, 0.0));
        let (y, ops) = eval_dag(&x.rms_norm(Some(&g), 1e-5).unwrap(), &[&xv]);
        assert_eq!(ops, [RMS_SCALED.as_slice(), &["mul"]].concat());
        assert_close(&y, &want, "rms_norm const gamma");
        let gt = input(&[d]).unwrap();
        let (y, _) = eval_dag(&x.rms_norm(Some(&gt), 1e-5).unwrap(), &[&xv, &gv]);
        assert_close(&y, &want, "rms_norm tensor gamma");
        let (y, ops) = eval_dag(&x.rms_norm(None, 1e-5).unwrap(), &[&xv]);
        assert_eq!(ops, RMS_SCALED);
        assert_close(
            &y,
            &naive_norm(&xv, d, 1e-5, true, |_| (1.0, 0.0)),
            "rms_norm",
        );
        // The case: the PyTorch form x/√(mean(x²) + eps), not x/max(rms, √eps).
        let small = [0.003f32, -0.002, 0.001, 0.0025];
        let (y, _) = eval_dag(
            &input(&[1, 4]).unwrap().rms_norm(None, 1e-5).unwrap(),
            &[&small],
        );
        assert_close(
            &y,
            &naive_norm(&small, 4, 1e-5, true, |_| (1.0, 0.0)),
            "small rms",
        );
        let (y, _) = eval_dag(
            &input(&[2, 4]).unwrap().rms_norm(None, 1e-5).unwrap(),
            &[&[0.0; 8]],
        );
        assert!(y.iter().all(|&v| v == 0.0), "a zero row stays finite");
        assert!(x.rms_norm(Some(&input(&[782]).unwrap()), 1e-5).is_err());
        assert!(x.rms_norm(None, -1e-5).is_err());
    }

    #[test]
    fn l2_norm_matches_naive() {
        let xv = buf(&[5, 3, 7], 6).data;
        let x = input(&[5, 3, 7]).unwrap();
        let (y, ops) = eval_dag(&x.l2_norm(-3, 1e-12).unwrap(), &[&xv]);
        assert_eq!(
            ops,
            [
                "abs",
                "reduce_max",
                "maximum",
                "real_div",
                "reduce_l2_norm",
                "real_div",
                "maximum",
                "real_div"
            ]
        );
        let want: Vec<f64> = (0..xv.len())
            .map(|i| {
                let n = (0..5)
                    .map(|a| (xv[a * 21 + i % 21] as f64).powi(2))
                    .sum::<f64>()
                    .sqrt();
                xv[i] as f64 / n
            })
            .collect();
        assert_close(&y, &want, "l2_norm");
        let (y, _) = eval_dag(
            &input(&[3]).unwrap().l2_norm(0, 1e-12).unwrap(),
            &[&[0.0; 3]],
        );
        assert!(y.iter().all(|&v| v == 0.0));
        // Shorter than eps: divided by eps itself (not √eps).
        let (y, _) = eval_dag(
            &input(&[2]).unwrap().l2_norm(0, 0.5).unwrap(),
            &[&[0.3, -0.1]],
        );
        assert_close(&y, &[0.6, -0.2], "l2_norm below eps");
        assert!(x.l2_norm(3, 1e-12).is_err());
        assert!(x.l2_norm(0, f32::INFINITY).is_err());
    }

    #[test]
    fn group_norm_lowers_and_matches_naive() {
        let (shape, groups) = ([2, 6, 3, 5], 3);
        let xv = buf(&shape, 7).data;
        let (gv, bv) = (params(6, 8), params(6, 9));
        let x = input(&shape).unwrap();
        let g = constant("t", HostArray::f32(&[6], &gv)).unwrap();
        let b = input(&[6]).unwrap();
        let y = x.group_norm(Some(&g), Some(&b), groups, 1e-3).unwrap();
        let (got, ops) = eval_dag(&y, &[&xv, &bv]);
        // gamma (a Const) is rebuilt as [1, C, 1, 1]; beta (a tensor) is reshaped.
        assert_eq!(
            ops,
            [
                &["reshape"],
                STANDARDIZE.as_slice(),
                &["reshape", "mul", "reshape", "add"]
            ]
            .concat()
        );
        let want = naive_norm(&xv, 2 * 15, round_f16(1e-3) as f64, false, |i| {
            ((gv[i / 15 % 6]) as f64, bv[i / 15 % 6] as f64)
        });
        assert_close(&got, &want, "group_norm");
        let errs = [
            input(&[6, 3]).unwrap().group_norm(None, None, 3, 1e-5),
            x.group_norm(None, None, 4, 1e-5),
            x.group_norm(None, None, 0, 1e-5),
            input(&[1, 2, 256, 512])
                .unwrap()
                .group_norm(None, None, 1, 1e-5),
            x.group_norm(Some(&input(&[3]).unwrap()), None, 3, 1e-5),
            x.group_norm(None, Some(&input(&[1, 6, 1, 1]).unwrap()), 3, 1e-5),
            x.group_norm(None, None, 3, f32::NAN),
        ];
        for (i, e) in errs.iter().enumerate() {
            assert!(e.is_err(), "case {i} should fail");
        }
        let msg = input(&[1, 2, 256, 512])
            .unwrap()
            .group_norm(None, None, 1, 1e-5)
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("group_norm") && msg.contains("131072"),
            "{msg}"
        );
    }
}
