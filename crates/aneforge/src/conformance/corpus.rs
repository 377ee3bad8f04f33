//! The conformance corpus: one small graph per MIL op kind with deterministic weights. The
//! MIL golden tests print it, and the selfcheck runs it on a device and compares each case
//! with the reference executor.

use std::sync::Arc;

use half::f16;

use crate::conv2d;
use crate::conv_transpose2d;
use crate::error::{Error, Result};
use crate::graph::build::affine::affine;
use crate::graph::build::einsum::einsum_native;
use crate::graph::build::norm::instance_norm;
use crate::mil::blob::{BlobType, Packed};
use crate::ops::constexpr::{Constexpr, Encoded};
use crate::ops::conv::ConvOptions;
use crate::ops::elementwise::Compare;
use crate::ops::io::HostArray;
use crate::ops::unary::{Unary, UNARY_OPS};
use crate::ops::Op;
use crate::{batch_norm, concat, constant, image_input, input, select, stack, Tensor};

/// Deterministic pseudo-random values in [-1, 1) (xorshift; the same on every platform).
pub fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// A constant tensor of `shape` filled from `data(.., seed)`.
fn w(shape: &[usize], seed: u64) -> Result<Tensor> {
    constant(
        "selfcheck",
        HostArray::f32(shape, &data(shape.iter().product(), seed)),
    )
}

/// fp16 values of `data(n, seed)` scaled by `k`.
fn halfs(n: usize, seed: u64, k: f32) -> Arc<Vec<f16>> {
    Arc::new(
        data(n, seed)
            .iter()
            .map(|&v| f16::from_f32(v * k))
            .collect(),
    )
}

/// One compressed [7, 3] weight per encoding, each feeding a matmul's weight input as the
/// compression pass emits it (a blockwise result passes through `add(x, 0)`); 21 elements
/// exercise sub-byte padding.
fn constexpr_cases(x: impl Fn() -> Result<Tensor>) -> Result<Vec<(&'static str, Tensor)>> {
    let q = |seed| {
        Arc::new(
            data(21, seed)
                .iter()
                .map(|v| (v * 127.0) as i8)
                .collect::<Vec<i8>>(),
        )
    };
    let bits = |n, seed| {
        Packed::pack(
            BlobType::Uint4,
            data(n, seed).iter().map(|v| ((v + 1.0) * 8.0) as u8),
        )
    };
    let mask = Packed::pack(BlobType::Uint1, (0..21u8).map(|i| u8::from(i % 3 == 0)));
    let weight = |enc| Tensor::apply1(Op::Constexpr(Constexpr::new(vec![7, 3], enc)?), vec![]);
    let cases = [
        (
            "constexpr_affine_dequantize",
            weight(Encoded::Affine {
                axis: 1,
                data: q(20),
                scale: halfs(3, 21, 0.01),
            })?,
        ),
        (
            "constexpr_lut_to_dense",
            weight(Encoded::Lut {
                indices: bits(21, 22),
                lut: halfs(16, 23, 1.0),
            })?,
        ),
        (
            "constexpr_sparse_to_dense",
            weight(Encoded::Sparse {
                mask,
                values: halfs(7, 24, 1.0),
            })?,
        ),
        (
            "constexpr_blockwise_shift_scale",
            weight(Encoded::Blockwise {
                data: q(25),
                scale_shape: vec![1, 3],
                scale: halfs(3, 26, 0.01),
            })?
            .add_scalar(0.0)?,
        ),
    ];
    cases
        .into_iter()
        .map(|(name, w)| Ok((name, x()?.matmul(&w)?)))
        .collect()
}

/// How a unary row's corpus case departs from the default (the op on `x` with the row's default
/// parameters): the input moved into the op's domain first, and/or other parameters.
enum UnaryCase {
    /// `x · k` first (integer rounding ops see several integers; arcsin & co. stay in (−1, 1)).
    Scaled(f32),
    /// `x + k` first and these parameters.
    Shifted(f32, &'static [f32]),
    /// These parameters (required ones, or values away from the defaults).
    Params(&'static [f32]),
}

/// The unary rows whose case is not the default one; every other row of [`UNARY_OPS`] gets
/// `x.<op>()` with its defaults, so a new row is in the corpus without an entry here.
const UNARY_CASES: &[(&str, UnaryCase)] = &[
    ("log", UnaryCase::Params(&[1e-3])),
    ("rsqrt", UnaryCase::Params(&[1e-3])),
    ("elu", UnaryCase::Params(&[0.5])),
    ("leaky_relu", UnaryCase::Params(&[0.1])),
    ("clip", UnaryCase::Params(&[-0.5, 0.75])),
    ("floor", UnaryCase::Scaled(3.0)),
    ("ceil", UnaryCase::Scaled(3.0)),
    ("round", UnaryCase::Scaled(3.0)),
    ("asin", UnaryCase::Scaled(0.5)),
    ("acos", UnaryCase::Scaled(0.5)),
    ("atanh", UnaryCase::Scaled(0.5)),
    ("inverse", UnaryCase::Shifted(2.0, &[1e-3])),
    ("threshold", UnaryCase::Params(&[0.25])),
    ("thresholded_relu", UnaryCase::Params(&[0.25])),
    ("scaled_tanh", UnaryCase::Params(&[1.5, 0.5])),
    ("clamped_relu", UnaryCase::Params(&[0.1, 0.5])),
    ("linear_activation", UnaryCase::Params(&[2.0, -0.5])),
];

/// One case per native unary row on fp16 `x`, in table order (`logical_not` takes a bool and
/// has its own case); errors name a row with a required parameter and no [`UNARY_CASES`] entry.
fn unary_cases(x: &Tensor) -> Result<Vec<(&'static str, Tensor)>> {
    let mut cases = Vec::new();
    for row in UNARY_OPS
        .iter()
        .filter(|r| r.name != Unary::LogicalNot.mil_name())
    {
        let defaults: Option<Vec<f32>> = row
            .params
            .iter()
            .map(|p| p.default.first().copied())
            .collect();
        let case = UNARY_CASES
            .iter()
            .find(|(name, _)| *name == row.name)
            .map(|c| &c.1);
        let (input, params) = match case {
            Some(UnaryCase::Scaled(k)) => (x.mul_scalar(*k)?, defaults),
            Some(UnaryCase::Shifted(k, p)) => (x.add_scalar(*k)?, Some(p.to_vec())),
            Some(UnaryCase::Params(p)) => (x.clone(), Some(p.to_vec())),
            None => (x.clone(), defaults),
        };
        let params = params.ok_or_else(|| {
            Error::value(
                row.name,
                "the corpus needs an entry in UNARY_CASES for this row's required parameters",
            )
        })?;
        cases.push((row.name, input.unary_named(row.name, &params)?));
    }
    Ok(cases)
}

/// One (MIL op name, output) case per op kind the printer emits, except `const`.
pub fn conformance() -> Result<Vec<(&'static str, Tensor)>> {
    let x = || input(&[2, 7]);
    let y = || input(&[1, 7]);
    let img = || input(&[1, 4, 6, 6]);
    let mut c = unary_cases(&x()?)?;
    c.extend([
        ("add", x()?.add(&y()?)?),
        ("sub", x()?.sub(&y()?)?),
        ("mul", x()?.mul_scalar(2.5)?),
        ("real_div", x()?.div(&y()?.abs()?.add_scalar(0.5)?)?),
        ("maximum", x()?.maximum(&y()?)?),
        ("minimum", x()?.minimum(&y()?)?),
        ("pow", x()?.abs()?.pow_scalar(1.5)?),
    ]);
    for (name, cmp) in [
        ("greater", Compare::Greater),
        ("less", Compare::Less),
        ("equal", Compare::Equal),
        ("not_equal", Compare::NotEqual),
        ("less_equal", Compare::LessEqual),
        ("greater_equal", Compare::GreaterEqual),
    ] {
        let (a, b) = (x()?, y()?);
        c.push((name, select(&a.compare(cmp, &b)?, &a, &b)?));
    }
    let a = x()?;
    c.push((
        "select",
        select(&a.compare_scalar(Compare::Greater, 0.0)?, &a, &a.neg()?)?,
    ));
    c.push((
        "logical_not",
        select(
            &a.compare_scalar(Compare::Greater, 0.0)?.logical_not()?,
            &a,
            &a.neg()?,
        )?,
    ));
    c.push((
        "matmul",
        x()?.matmul_weight(HostArray::f32(&[7, 3], &data(21, 1)))?,
    ));
    c.push((
        "linear",
        x()?.linear(
            HostArray::f32(&[3, 7], &data(21, 2)),
            Some(HostArray::f32(&[3], &data(3, 3))),
        )?,
    ));
    c.push(("bmm", input(&[2, 3, 4])?.matmul(&input(&[4, 5])?)?));
    let opts = ConvOptions {
        stride: [2, 1],
        pad: [1, 0, 2, 1],
        dilation: [1, 2],
        groups: 2,
    };
    c.push((
        "conv",
        conv2d(
            &img()?,
            HostArray::f32(&[6, 2, 3, 3], &data(108, 4)),
            Some(HostArray::f32(&[6], &data(6, 5))),
            opts,
        )?,
    ));
    c.push(("max_pool", img()?.max_pool([3, 3], [2, 2], [1, 1, 1, 1])?));
    c.push((
        "avg_pool",
        img()?.avg_pool([2, 3], [2, 1], [0, 1, 1, 0], false)?,
    ));
    c.push(("reduce_mean", img()?.mean(&[2, 3], true)?));
    c.push(("reduce_sum", img()?.sum(&[1], false)?));
    c.push(("reduce_max", img()?.amax(&[-1], true)?));
    c.push(("reduce_min", img()?.amin(&[0, 2], false)?));
    c.push(("reduce_l1_norm", img()?.l1_norm(&[1, 3], true)?));
    c.push((
        "reduce_log_sum",
        img()?.abs()?.add_scalar(0.5)?.log_sum(&[-1], false)?,
    ));
    c.push(("reduce_sum_square", img()?.sum_square(&[2], true)?));
    c.push(("reduce_log_sum_exp", img()?.log_sum_exp(&[1, 2, 3], true)?));
    c.push(("softmax", x()?.softmax(-1)?));
    c.push((
        "layer_norm",
        x()?.layer_norm(Some(&w(&[7], 6)?), Some(&w(&[7], 7)?), 1e-5)?,
    ));
    c.push(("rms_norm", x()?.rms_norm(Some(&w(&[7], 8)?), 1e-5)?));
    c.push(("l2_norm", x()?.l2_norm(-1, 1e-12)?));
    c.push((
        "group_norm",
        img()?.group_norm(Some(&w(&[4], 9)?), Some(&w(&[4], 10)?), 2, 1e-5)?,
    ));
    let var: Vec<f32> = data(4, 11).iter().map(|v| v.abs() + 0.5).collect();
    let (mean, gamma, beta) = (data(4, 12), data(4, 13), data(4, 14));
    c.push((
        "batch_norm",
        batch_norm(
            &img()?,
            HostArray::f32(&[4], &mean),
            HostArray::f32(&[4], &var),
            Some(HostArray::f32(&[4], &gamma)),
            Some(HostArray::f32(&[4], &beta)),
            1e-5,
        )?,
    ));
    c.push((
        "instance_norm",
        instance_norm(
            &img()?,
            Some(HostArray::f32(&[4], &gamma)),
            Some(HostArray::f32(&[4], &beta)),
            1e-5,
        )?,
    ));
    c.push(("reshape", x()?.reshape(&[7, -1])?));
    c.push(("transpose", img()?.transpose(&[0, 2, 3, 1])?));
    c.push(("concat", concat(&[x()?, input(&[2, 3])?], -1)?));
    c.push(("split", img()?.split_sizes(&[1, 3], 1)?.swap_remove(1)));
    c.push((
        "slice_by_size",
        img()?.slice_by_size(&[0, 1, 2, 0], &[1, 2, 3, 6])?,
    ));
    c.push(("squeeze", input(&[1, 5, 1])?.squeeze(&[0, 2])?));
    c.push(("expand_dims", x()?.expand_dims(&[0, -1])?));
    c.push(("upsample_nearest_neighbor", img()?.upsample(2, 3)?));
    c.push(("reverse", img()?.reverse(&[1, -1])?));
    c.push(("tile", x()?.tile(&[2, 3])?));
    c.push(("flatten2d", img()?.flatten2d(2)?));
    c.push(("stack", stack(&[x()?, x()?.abs()?], 1)?));
    c.push(("crop", img()?.crop(1, 0, 2, 1)?));
    c.push(("space_to_depth", img()?.space_to_depth(2)?));
    c.push(("depth_to_space", img()?.depth_to_space(2)?));
    c.push(("pixel_shuffle", img()?.pixel_shuffle(2)?));
    c.push(("pixel_unshuffle", img()?.pixel_unshuffle(3)?));
    let (wt, opts) = (
        data(4 * 3 * 3 * 2, 15),
        ConvOptions {
            stride: [2, 1],
            pad: [1, 0, 0, 1],
            ..ConvOptions::default()
        },
    );
    c.push((
        "conv_transpose",
        conv_transpose2d(&img()?, HostArray::f32(&[4, 3, 3, 2], &wt), None, opts)?,
    ));
    c.push((
        "resize_nearest_neighbor",
        img()?.resize_nearest_neighbor(5, 4)?,
    ));
    c.push(("resize_bilinear", img()?.resize_bilinear(3, 9, false)?));
    c.push((
        "upsample_bilinear",
        img()?.upsample_bilinear(1.5, 2.0, true)?,
    ));
    c.push(("prelu", img()?.prelu(HostArray::f32(&[4], &data(4, 16)))?));
    c.push((
        "local_response_norm",
        img()?.local_response_norm(3, 1e-2, 0.75, 1.0)?,
    ));
    c.push((
        "einsum",
        einsum_native("nchw,nwhu->nchu", &img()?, &w(&[1, 6, 6, 5], 17)?)?,
    ));
    c.push(("affine", affine(&img()?, &w(&[1, 6], 18)?, 5, 7, false)?));
    c.push((
        "cast",
        image_input(&[1, 3, 2, 2], &[1.0 / 255.0], &[0.5, -0.5, 0.25], None)?,
    ));
    c.extend(constexpr_cases(x)?);
    Ok(c)
}

#[cfg(test)]
mod tests {
    use crate::{Graph, Program};

    /// Every entry of `UNARY_CASES` names a row of the unary table (no stale entries).
    #[test]
    fn unary_case_entries_name_table_rows() {
        for (name, _) in super::UNARY_CASES {
            assert!(
                super::UNARY_OPS.iter().any(|r| r.name == *name),
                "UNARY_CASES names '{name}', which is not a unary row"
            );
        }
    }

    /// Every case lowers, and together they print every MIL op.
    #[test]
    fn the_corpus_covers_every_printed_op() {
        let mut seen = std::collections::BTreeSet::new();
        for (case, t) in super::conformance().unwrap() {
            let p = Program::lower(Graph::from_outputs(&[(None, t)]).unwrap()).unwrap();
            seen.extend(p.graph.nodes.iter().map(|n| n.op.family().name()));
            assert!(p.mil.contains("func main"), "{case}");
        }
        let missing: Vec<&str> = crate::ops::mil_op_names()
            .into_iter()
            .filter(|op| !seen.contains(op))
            .collect();
        assert!(
            missing.is_empty(),
            "no selfcheck program prints {missing:?}"
        );
    }
}
