//! Gradient rules against central finite differences (fp32 reference mode, Richardson-extrapolated
//! central differences, relative L2 error ≤ 1e-3), a walk over every MIL op kind that fails if a
//! differentiable one has no checked rule, and the errors for non-differentiable ops.

use std::collections::BTreeSet;

use aneforge::ops::conv::Conv;
use aneforge::ops::conv_transpose::ConvTranspose;
use aneforge::ops::elementwise::Compare;
use aneforge::ops::norm::{BatchNorm, InstanceNorm};
use aneforge::ops::Op;
use aneforge::{
    backward, compile, concat, constant, input, select, stack, CompileOptions, Device, Error,
    HostArray, PortData, Precision, Result, Tensor,
};

/// How a case's inputs are drawn (kept away from kinks at integers, or positive).
#[derive(Clone, Copy)]
enum Draw {
    /// Integer + a fraction in [0.2, 0.8], in [-3, 3].
    Away,
    /// In [0.5, 2.5].
    Positive,
    /// All distinct, 0.1 apart (no ties within a finite-difference step, for max and min).
    Distinct,
}

/// A function of the case's inputs.
type Build = Box<dyn Fn(&[Tensor]) -> Result<Tensor>>;

/// A one-input builder.
type Unary = fn(&Tensor) -> Result<Tensor>;

/// One gradient check: input shapes and draws, and the function of those inputs to differentiate.
struct Case {
    inputs: Vec<(Vec<usize>, Draw)>,
    f: Build,
}

fn case(inputs: &[(&[usize], Draw)], f: impl Fn(&[Tensor]) -> Result<Tensor> + 'static) -> Case {
    Case {
        inputs: inputs.iter().map(|(s, d)| (s.to_vec(), *d)).collect(),
        f: Box::new(f),
    }
}

use Draw::{Away, Distinct, Positive};

fn values(n: usize, seed: u64, d: Draw) -> Vec<f32> {
    if let Distinct = d {
        let keys = aneforge::conformance::corpus::data(n, seed);
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&a, &b| keys[a].total_cmp(&keys[b]));
        let mut out = vec![0.0; n];
        order
            .iter()
            .enumerate()
            .for_each(|(rank, &i)| out[i] = (rank as f32 - n as f32 / 2.0) * 0.1);
        return out;
    }
    aneforge::conformance::corpus::data(2 * n, seed)
        .chunks(2)
        .map(|p| match d {
            Away => ((p[0] * 3.0).floor() + 0.5 + 0.3 * p[1]).clamp(-2.8, 2.8),
            Positive => 1.5 + p[0],
            Distinct => unreachable!(),
        })
        .collect()
}

fn conv(
    x: &Tensor,
    w: &Tensor,
    b: Option<&Tensor>,
    strides: [usize; 2],
    pad: [usize; 4],
    dilations: [usize; 2],
    groups: usize,
) -> Result<Tensor> {
    let mut srcs = vec![x.clone(), w.clone()];
    srcs.extend(b.cloned());
    Tensor::apply1(
        Op::Conv(Conv {
            strides,
            pad,
            dilations,
            groups,
        }),
        srcs,
    )
}

/// Every checked gradient rule (the op kinds each exercises are read off its graph).
fn cases() -> Vec<Case> {
    let u = |f: fn(&Tensor) -> Result<Tensor>, d: Draw| case(&[(&[2, 3, 5], d)], move |t| f(&t[0]));
    let bin = |f: fn(&Tensor, &Tensor) -> Result<Tensor>, d: Draw| {
        case(&[(&[2, 3, 4], Away), (&[3, 1], d)], move |t| {
            f(&t[0], &t[1])
        })
    };
    vec![
        u(|x| x.relu(), Away),
        u(|x| x.gelu(), Away),
        u(|x| x.silu(), Away),
        u(|x| x.sigmoid(), Away),
        u(|x| x.tanh(), Away),
        u(|x| x.exp(), Away),
        u(|x| x.log(0.0), Positive),
        u(|x| x.sqrt(), Positive),
        u(|x| x.rsqrt(0.5), Positive),
        u(|x| x.abs(), Away),
        u(|x| x.sin(), Away),
        u(|x| x.cos(), Away),
        u(|x| x.erf(), Away),
        u(|x| x.softplus(), Away),
        u(|x| x.mul_scalar(3.0)?.relu6(), Away),
        u(|x| x.elu(0.5), Away),
        u(|x| x.leaky_relu(0.25), Away),
        u(|x| x.clip(-1.0, 2.0), Away),
        u(|x| x.atan(), Away),
        u(|x| x.exp2(), Away),
        u(|x| x.softsign(), Away),
        u(|x| x.inverse(0.0), Positive),
        u(|x| x.threshold(1.0), Away),
        u(|x| x.thresholded_relu(1.0), Away),
        u(|x| x.scaled_tanh(1.5, 0.5), Away),
        u(|x| x.clamped_relu(0.5, 2.0), Away),
        u(|x| x.sigmoid_hard(0.25, 0.5), Away),
        u(|x| x.linear_activation(1.5, 0.5), Away),
        bin(|x, y| x.add(y), Away),
        bin(|x, y| x.sub(y), Away),
        bin(|x, y| x.mul(y), Away),
        bin(|x, y| x.div(y), Positive),
        bin(|x, y| x.maximum(y), Away),
        bin(|x, y| x.minimum(y), Away),
        case(&[(&[2, 3, 4], Positive), (&[3, 1], Away)], |t| {
            t[0].pow(&t[1])
        }),
        case(&[(&[2, 3, 4], Away), (&[3, 4], Away), (&[4], Away)], |t| {
            select(&t[0].compare_scalar(Compare::Greater, 0.0)?, &t[1], &t[2])?.mul(&t[0])
        }),
        // matmul: plain, both transposes with a broadcast batch, rank-1 operands.
        case(&[(&[3, 4], Away), (&[4, 5], Away)], |t| t[0].matmul(&t[1])),
        case(&[(&[2, 4, 3], Away), (&[5, 4], Away)], |t| {
            Tensor::apply1(
                Op::MatMul(aneforge::ops::linear::MatMul {
                    transpose_x: true,
                    transpose_y: true,
                }),
                vec![t[0].clone(), t[1].clone()],
            )
        }),
        case(&[(&[4], Away), (&[2, 4, 3], Away)], |t| t[0].matmul(&t[1])),
        case(&[(&[2, 3, 4], Away), (&[4], Away)], |t| t[0].matmul(&t[1])),
        // conv: stride, asymmetric padding, dilation, groups, bias; and an output wider than 15 columns.
        case(
            &[(&[2, 4, 7, 8], Away), (&[6, 2, 3, 2], Away), (&[6], Away)],
            |t| conv(&t[0], &t[1], Some(&t[2]), [2, 1], [1, 0, 2, 1], [1, 2], 2),
        ),
        case(&[(&[1, 2, 3, 20], Away), (&[3, 2, 2, 3], Away)], |t| {
            conv(&t[0], &t[1], None, [1, 1], [0, 1, 1, 1], [1, 1], 1)
        }),
        case(&[(&[2, 2, 7, 6], Away), (&[4, 2, 3, 3], Away)], |t| {
            conv(&t[0], &t[1], None, [2, 2], [1, 1, 1, 1], [1, 1], 1)
        }),
        // weight-gradient chunks that start inside the padding and end past it, strided.
        case(&[(&[1, 1, 4, 37], Away), (&[2, 1, 3, 3], Away)], |t| {
            conv(&t[0], &t[1], None, [1, 2], [1, 2, 2, 1], [1, 1], 1)
        }),
        case(&[(&[2, 4, 5, 6], Away), (&[4, 3, 3, 2], Away)], |t| {
            Tensor::apply1(
                Op::ConvTranspose(ConvTranspose {
                    strides: [2, 1],
                    pad: [1, 0, 0, 1],
                    dilations: [1, 2],
                    groups: 2,
                }),
                t.to_vec(),
            )
        }),
        case(&[(&[2, 3, 7, 6], Distinct)], |t| {
            t[0].max_pool([2, 2], [2, 2], [0; 4])
        }),
        case(&[(&[2, 3, 7, 6], Away)], |t| {
            t[0].avg_pool([3, 2], [2, 1], [1, 1, 0, 1], true)
        }),
        case(&[(&[2, 3, 7, 6], Away)], |t| {
            t[0].avg_pool([3, 3], [2, 2], [1, 1, 1, 1], false)
        }),
        case(&[(&[2, 3, 7, 6], Distinct)], |t| {
            t[0].max_pool([3, 2], [2, 1], [1, 0, 1, 1])
        }),
        case(&[(&[2, 3, 4, 5], Away)], |t| t[0].mean(&[1, 3], true)),
        case(&[(&[2, 3, 4, 5], Away)], |t| t[0].sum(&[0, 2], false)),
        case(&[(&[2, 3, 4, 5], Distinct)], |t| t[0].amax(&[3], true)),
        case(&[(&[2, 3, 4, 5], Distinct)], |t| t[0].amin(&[1, 2], false)),
        case(&[(&[2, 3, 4, 5], Away)], |t| {
            t[0].reduce_l2_norm(&[3], true)
        }),
        case(&[(&[2, 3, 4, 5], Away)], |t| t[0].l1_norm(&[2], true)),
        case(&[(&[2, 3, 4, 5], Positive)], |t| t[0].log_sum(&[1], true)),
        case(&[(&[2, 3, 4, 5], Away)], |t| t[0].sum_square(&[3], false)),
        case(&[(&[2, 3, 4, 5], Away)], |t| t[0].log_sum_exp(&[3], true)),
        case(&[(&[2, 3, 4, 5], Away)], |t| t[0].softmax(1)),
        case(
            &[
                (&[2, 3, 4, 5], Away),
                (&[3], Away),
                (&[3], Positive),
                (&[3], Away),
                (&[3], Away),
            ],
            |t| Tensor::apply1(Op::BatchNorm(BatchNorm { eps: 0.001 }), t.to_vec()),
        ),
        case(&[(&[2, 3, 4, 5], Away), (&[3], Away), (&[3], Away)], |t| {
            Tensor::apply1(Op::InstanceNorm(InstanceNorm { eps: 0.001 }), t.to_vec())
        }),
        // Composite norms with trainable affine parameters.
        case(&[(&[2, 3, 6], Away), (&[6], Away), (&[6], Away)], |t| {
            t[0].layer_norm(Some(&t[1]), Some(&t[2]), 1e-3)
        }),
        case(&[(&[2, 3, 6], Away), (&[6], Away)], |t| {
            t[0].rms_norm(Some(&t[1]), 1e-3)
        }),
        case(&[(&[2, 4, 3, 3], Away), (&[4], Away), (&[4], Away)], |t| {
            t[0].group_norm(Some(&t[1]), Some(&t[2]), 2, 1e-3)
        }),
        // Layout.
        case(&[(&[2, 3, 4], Away)], |t| t[0].reshape(&[4, 6])),
        case(&[(&[2, 3, 4], Away)], |t| t[0].transpose(&[2, 0, 1])),
        case(&[(&[2, 3, 4], Away), (&[2, 2, 4], Away)], |t| {
            concat(&t[..2], 1)
        }),
        case(&[(&[2, 6, 4], Away)], |t| {
            let p = t[0].split_sizes(&[2, 3, 1], 1)?;
            p[0].mul(&p[2].tile(&[1, 2, 1])?)?
                .add(&p[1].sum(&[1], true)?)
        }),
        case(&[(&[3, 5, 4], Away)], |t| {
            t[0].slice_by_size(&[1, 2, 0], &[2, 2, 3])
        }),
        case(&[(&[2, 1, 4], Away)], |t| {
            t[0].squeeze(&[1])?.expand_dims(&[0])
        }),
        case(&[(&[2, 3, 2, 3], Away)], |t| t[0].upsample(2, 3)),
        case(&[(&[2, 3, 4], Away)], |t| t[0].reverse(&[0, 2])),
        case(&[(&[2, 3], Away)], |t| t[0].tile(&[3, 2])),
        case(&[(&[2, 3, 4], Away)], |t| t[0].flatten2d(2)),
        case(&[(&[2, 3], Away), (&[2, 3], Away)], |t| stack(&t[..2], 1)),
        case(&[(&[1, 2, 5, 6], Away)], |t| t[0].crop(1, 2, 0, 3)),
        case(&[(&[1, 2, 4, 6], Away)], |t| t[0].space_to_depth(2)),
        case(&[(&[1, 8, 2, 3], Away)], |t| t[0].depth_to_space(2)),
        case(&[(&[1, 8, 2, 3], Away)], |t| t[0].pixel_shuffle(2)),
        case(&[(&[1, 2, 4, 6], Away)], |t| t[0].pixel_unshuffle(2)),
        case(&[(&[2, 3, 2, 4], Away)], |t| {
            t[0].prelu(HostArray::f32(&[3], &[0.25, -0.5, 1.5]))
        }),
        case(&[(&[2, 5, 3], Away)], |t| {
            t[0].local_response_norm(3, 0.8, 0.75, 1.5)
        }),
        case(&[(&[1, 4, 2, 2], Away)], |t| {
            t[0].local_response_norm(2, 0.5, 0.6, 2.0)
        }),
        case(&[(&[2, 3, 4, 5], Away), (&[1, 5, 4, 2], Away)], |t| {
            aneforge::graph::build::einsum::einsum_native("nchw,nwhu->nchu", &t[0], &t[1])
        }),
        case(&[(&[3, 1, 4], Away), (&[4, 2, 5], Away)], |t| {
            aneforge::graph::build::einsum::einsum_native("chw,whu->chu", &t[0], &t[1])
        }),
        u(|x| x.hardswish(), Away),
        u(|x| x.mish(), Away),
        u(|x| x.mul_scalar(0.4)?.tan(), Away),
        u(|x| x.sinh(), Away),
        u(|x| x.cosh(), Away),
        u(|x| x.mul_scalar(0.3)?.asin(), Away),
        u(|x| x.mul_scalar(0.3)?.acos(), Away),
        u(|x| x.mul_scalar(0.3)?.atanh(), Away),
    ]
}

fn opts() -> CompileOptions {
    CompileOptions {
        device: Device::Reference,
        precision: Precision::Fp32,
        ..CompileOptions::default()
    }
}

/// loss = Σ f(x) · R with a fixed random R (so every output element gets a distinct weight).
fn loss_of(c: &Case, params: &[Tensor], seed: u64) -> Result<Tensor> {
    let y = (c.f)(params)?;
    let r = constant(
        "test",
        HostArray::f32(y.shape(), &values(y.shape().iter().product(), seed, Away)),
    )?;
    let axes: Vec<i64> = (0..y.rank() as i64).collect();
    y.mul(&r)?.sum(&axes, true)
}

fn feed(d: &[Vec<f32>]) -> Vec<PortData<'_>> {
    d.iter().map(|v| PortData::F32(v)).collect()
}

/// Relative L2 error of the analytic gradient against Richardson-extrapolated central differences.
fn check(i: usize, c: &Case) -> Result<BTreeSet<String>> {
    let params: Vec<Tensor> = c
        .inputs
        .iter()
        .map(|(s, _)| input(s))
        .collect::<Result<_>>()?;
    let loss = loss_of(c, &params, 1000 + i as u64)?;
    let grads = backward(&loss, &params, 1.0, &[])?;
    let data: Vec<Vec<f32>> = c
        .inputs
        .iter()
        .enumerate()
        .map(|(k, (s, d))| values(s.iter().product(), 17 * i as u64 + k as u64, *d))
        .collect();
    let mut outs = vec![(None, loss.clone())];
    outs.extend(grads.iter().map(|g| (None, g.clone())));
    let analytic = compile(&outs, &opts())?.run(&feed(&data))?;
    let mut f = compile(&[(None, loss)], &opts())?;
    let mut eval = |d: &[Vec<f32>]| -> Result<f64> { Ok(f64::from(f.run(&feed(d))?[0][0])) };
    for (k, g) in analytic[1..].iter().enumerate() {
        let (mut num, mut den) = (0f64, 0f64);
        for e in 0..g.len() {
            let mut d = data.clone();
            let mut diff = |h: f32| -> Result<f64> {
                d[k][e] = data[k][e] + h;
                let up = eval(&d)?;
                d[k][e] = data[k][e] - h;
                let down = eval(&d)?;
                Ok((up - down) / (2.0 * f64::from(h)))
            };
            let (d1, d2) = (diff(2e-2)?, diff(1e-2)?);
            let fd = (4.0 * d2 - d1) / 3.0;
            num += (f64::from(g[e]) - fd).powi(2);
            den += fd * fd;
        }
        let rel = (num / den.max(1e-12)).sqrt();
        assert!(
            rel <= 1e-3,
            "case {i} input {k} {:?}: relative error {rel:.2e}",
            c.inputs[k].0
        );
        assert!(
            den > 1e-6,
            "case {i} input {k}: the gradient is zero, the check proves nothing"
        );
    }
    Ok(op_names(&params, &(c.f)(&params)?))
}

/// Names of the ops on a path from `params` to `y`.
fn op_names(params: &[Tensor], y: &Tensor) -> BTreeSet<String> {
    fn walk(t: &Tensor, params: &[Tensor], out: &mut BTreeSet<String>) -> bool {
        let live = params.iter().any(|p| p.same(t))
            | t.sources()
                .iter()
                .fold(false, |acc, s| walk(s, params, out) | acc);
        if live {
            out.insert(t.op().family().name().to_string());
        }
        live
    }
    let mut out = BTreeSet::new();
    walk(y, params, &mut out);
    out
}

/// MIL ops through which no gradient can flow by construction (constants, dtype casts, bool results).
const NO_GRADIENT: &[&str] = &[
    "const",
    "cast",
    "constexpr_affine_dequantize",
    "constexpr_lut_to_dense",
    "constexpr_sparse_to_dense",
    "constexpr_blockwise_shift_scale",
    "greater",
    "less",
    "equal",
    "not_equal",
    "less_equal",
    "greater_equal",
    "logical_not",
];

/// Differentiable-looking ops without a gradient rule: differentiating through them must be a NotImplemented error.
fn not_differentiable() -> Vec<(&'static str, Unary)> {
    vec![
        ("floor", |x| x.floor()),
        ("ceil", |x| x.ceil()),
        ("round", |x| x.round()),
        ("sign", |x| x.sign()),
        ("resize_nearest_neighbor", |x| {
            x.resize_nearest_neighbor(5, 7)
        }),
        ("resize_bilinear", |x| x.resize_bilinear(5, 7, false)),
        ("upsample_bilinear", |x| {
            x.upsample_bilinear(2.0, 2.0, false)
        }),
        ("affine", |x| {
            aneforge::graph::build::affine::affine(
                x,
                &constant(
                    "affine",
                    HostArray::f32(&[1, 6], &[1.0, 0.1, 0.0, -0.1, 1.0, 0.0]),
                )?,
                3,
                3,
                true,
            )
        }),
    ]
}

#[test]
fn every_gradient_rule_matches_finite_differences() {
    for (i, c) in cases().iter().enumerate() {
        check(i, c).unwrap_or_else(|e| panic!("case {i}: {e}"));
    }
}

#[test]
fn every_differentiable_op_kind_has_a_checked_rule() {
    let mut covered = BTreeSet::new();
    for c in cases().iter() {
        let params: Vec<Tensor> = c.inputs.iter().map(|(s, _)| input(s).unwrap()).collect();
        covered.extend(op_names(&params, &(c.f)(&params).unwrap()));
    }
    let declared: BTreeSet<&str> = not_differentiable()
        .iter()
        .map(|(n, _)| *n)
        .chain(NO_GRADIENT.iter().copied())
        .collect();
    let missing: Vec<&str> = aneforge::ops::mil_op_names()
        .into_iter()
        .filter(|n| !covered.contains(*n) && !declared.contains(n))
        .collect();
    assert!(missing.is_empty(), "op kinds with neither a finite-difference case nor a declared non-differentiable status: {missing:?}");
}

#[test]
fn non_differentiable_ops_raise_not_implemented_naming_the_op() {
    for (name, f) in not_differentiable() {
        let x = input(&[1, 2, 3, 4]).unwrap();
        let y = f(&x).unwrap();
        let err = backward(&y.sum(&[0, 1, 2, 3], true).unwrap(), &[x], 1.0, &[]).unwrap_err();
        assert!(
            matches!(&err, Error::NotImplemented(m) if m.contains(name)),
            "{name}: {err}"
        );
    }
}

#[test]
fn fan_out_accumulates_and_stop_detaches() {
    // loss = Σ (x·x + 3x) → 2x + 3; with stop at x·x only the 3x branch remains.
    let x = input(&[2, 3]).unwrap();
    let sq = x.mul(&x).unwrap();
    let loss = sq
        .add(&x.mul_scalar(3.0).unwrap())
        .unwrap()
        .sum(&[0, 1], true)
        .unwrap();
    let g = backward(&loss, std::slice::from_ref(&x), 2.0, &[])
        .unwrap()
        .remove(0);
    let gs = backward(&loss, std::slice::from_ref(&x), 1.0, &[sq])
        .unwrap()
        .remove(0);
    let xv = values(6, 3, Away);
    let out = compile(&[(None, g), (None, gs)], &opts())
        .unwrap()
        .run(&[PortData::F32(&xv)])
        .unwrap();
    for (e, &v) in xv.iter().enumerate() {
        assert!(
            (out[0][e] - 2.0 * (2.0 * v + 3.0)).abs() < 1e-5,
            "loss_scale 2: {} vs {}",
            out[0][e],
            2.0 * (2.0 * v + 3.0)
        );
        assert!((out[1][e] - 3.0).abs() < 1e-6);
    }
}

#[test]
fn unused_parameter_gets_zeros_and_bad_params_are_rejected() {
    let (x, p) = (input(&[2, 2]).unwrap(), input(&[3]).unwrap());
    let loss = x.sum(&[0, 1], true).unwrap();
    let g = backward(&loss, std::slice::from_ref(&p), 1.0, &[])
        .unwrap()
        .remove(0);
    let out = compile(&[(None, g)], &opts())
        .unwrap()
        .run(&[PortData::F32(&[1.0, 2.0, 3.0])])
        .unwrap();
    assert_eq!(out[0], vec![0.0; 3]);
    let err = backward(&loss, &[x.relu().unwrap()], 1.0, &[]).unwrap_err();
    assert!(
        err.to_string()
            .contains("parameters must be fp16 graph inputs"),
        "{err}"
    );
}

#[test]
fn cross_entropy_value_and_gradient_match_the_closed_form() {
    use aneforge::train::softmax_cross_entropy;
    let (n, k) = (3, 5);
    let z = values(n * k, 21, Away)
        .iter()
        .map(|v| v * 4.0)
        .collect::<Vec<_>>();
    let labels = [4usize, 0, 2];
    let (logits, idx, hot) = (
        input(&[n, k]).unwrap(),
        input(&[n]).unwrap(),
        input(&[n, k]).unwrap(),
    );
    let (li, lh) = (
        softmax_cross_entropy(&logits, &idx).unwrap(),
        softmax_cross_entropy(&logits, &hot).unwrap(),
    );
    let gi = backward(&li, std::slice::from_ref(&logits), 1.0, &[])
        .unwrap()
        .remove(0);
    let idx_v: Vec<f32> = labels.iter().map(|&l| l as f32).collect();
    let hot_v: Vec<f32> = (0..n * k)
        .map(|e| f32::from(u8::from(labels[e / k] == e % k)))
        .collect();
    let out = compile(&[(None, li), (None, lh), (None, gi)], &opts())
        .unwrap()
        .run(&[
            PortData::F32(&z),
            PortData::F32(&idx_v),
            PortData::F32(&hot_v),
        ])
        .unwrap();
    let (mut loss, mut grad) = (0f64, vec![0f64; n * k]);
    for r in 0..n {
        let row: Vec<f64> = z[r * k..(r + 1) * k]
            .iter()
            .map(|&v| f64::from(v))
            .collect();
        let m = row.iter().cloned().fold(f64::MIN, f64::max);
        let sum: f64 = row.iter().map(|v| (v - m).exp()).sum();
        loss += (m + sum.ln() - row[labels[r]]) / n as f64;
        for c in 0..k {
            grad[r * k + c] =
                ((row[c] - m).exp() / sum - f64::from(u8::from(c == labels[r]))) / n as f64;
        }
    }
    assert!(
        (f64::from(out[0][0]) - loss).abs() < 1e-5 * loss.abs().max(1.0),
        "{} vs {loss}",
        out[0][0]
    );
    assert!((f64::from(out[1][0]) - loss).abs() < 1e-5 * loss.abs().max(1.0));
    for (g, r) in out[2].iter().zip(&grad) {
        assert!((f64::from(*g) - r).abs() < 1e-6, "{g} vs {r}");
    }
    let err = softmax_cross_entropy(&logits, &input(&[n, 2]).unwrap()).unwrap_err();
    assert!(
        err.to_string()
            .contains("target must be one-hot [3, 5] or class indices [3] / [3, 1], got [3, 2]"),
        "{err}"
    );
}

/// Relu's gradient routes on its output: `relu(x) > 0` is the mask `x > 0` bit for bit where
/// x = p + q·k·z reaches ±0, ±∞ and NaN (fp16 overflow, ∞·0) and the smallest fp16 and f32
/// subnormals, in fp32 and fp16 precision; and the gradient passes G exactly there (+0
/// elsewhere) when x is finite (an fp16 loss of ∞ makes every gradient NaN).
#[test]
fn relu_gradient_passes_g_exactly_where_x_is_positive() {
    let finite: Vec<[f32; 4]> = vec![
        [0.0, 0.0, 1.0, 1.0],
        [-0.0, -0.0, 1.0, 1.0],
        [5.960_464_5e-8, 0.0, 1.0, 1.0],
        [-5.960_464_5e-8, 0.0, 1.0, 1.0],
        [0.0, 1e-20, 1e-20, 1.0],
        [0.0, -1e-20, 1e-20, 1.0],
        [1.0, 0.0, 1.0, 1.0],
        [-2.5, 0.0, 1.0, 1.0],
        [0.0, 3.0, 0.5, 1.0],
    ];
    let mut overflowing = finite.clone();
    overflowing.extend([2.0, -2.0].map(|k| [0.0, 65504.0, k, 1.0]));
    overflowing.extend([2.0, -2.0].map(|k| [0.0, 65504.0, k, 0.0]));
    for (precision, cases) in [Precision::Fp32, Precision::Fp16]
        .into_iter()
        .flat_map(|p| [(p, &finite), (p, &overflowing)])
    {
        let n = cases.len();
        let [p, q, k, z, w] = [0; 5].map(|_| input(&[n]).unwrap());
        let x = p.add(&q.mul(&k).unwrap().mul(&z).unwrap()).unwrap();
        let y = x.relu().unwrap();
        let loss = y.mul(&w).unwrap().sum(&[0], true).unwrap();
        let g = backward(&loss, std::slice::from_ref(&p), 1.0, &[])
            .unwrap()
            .remove(0);
        let zero = w.mul_scalar(0.0).unwrap();
        let [on_x, on_y] = [&x, &y].map(|t| {
            let m = t.compare_scalar(Compare::Greater, 0.0).unwrap();
            select(&m, &w, &zero).unwrap()
        });
        let columns: Vec<Vec<f32>> = (0..4)
            .map(|j| cases.iter().map(|c| c[j]).collect())
            .collect();
        let wv: Vec<f32> = (0..n).map(|i| 0.25 + i as f32).collect();
        let data: Vec<PortData> = columns
            .iter()
            .chain([&wv])
            .map(|v| PortData::F32(v))
            .collect();
        let outs = [(None, g), (None, on_x), (None, on_y)];
        let out = compile(
            &outs,
            &CompileOptions {
                precision,
                ..opts()
            },
        )
        .unwrap()
        .run(&data)
        .unwrap();
        assert_eq!(
            out[1], out[2],
            "{precision:?}: the masks x > 0 and relu(x) > 0"
        );
        let r = |v: f32| match precision {
            Precision::Fp16 => half::f16::from_f32(v).to_f32(),
            _ => v,
        };
        let xs: Vec<f32> = (cases.iter().map(|c| c.map(r)))
            .map(|[p, q, k, z]| r(p + r(r(q * k) * z)))
            .collect();
        assert!(
            precision == Precision::Fp32
                || cases.len() == finite.len()
                || xs.iter().filter(|x| !x.is_finite()).count() == 4,
            "fp16: the overflowing cases reach ±∞ and NaN"
        );
        if precision == Precision::Fp32 || xs.iter().all(|x| x.is_finite()) {
            for (e, &x) in xs.iter().enumerate() {
                let want = if x > 0.0 { wv[e] } else { 0.0 };
                assert_eq!(out[0][e].to_bits(), want.to_bits(), "{precision:?} x = {x}");
            }
        }
    }
}
