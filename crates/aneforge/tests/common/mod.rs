//! Shared helpers for the integration tests: deterministic data and one small graph per op kind.
#![allow(dead_code)]

use aneforge::ops::conv::{conv2d, ConvOptions};
use aneforge::ops::elementwise::Compare;
use aneforge::ops::layout::concat;
use aneforge::ops::norm::batch_norm;
use aneforge::{constant, image_input, input, select, DType, HostArray, Tensor};

/// Deterministic pseudo-random values in [-1, 1) (xorshift; stable across platforms).
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

/// A weight array owned by the test.
pub struct W {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

impl W {
    pub fn new(shape: &[usize], seed: u64) -> W {
        W { shape: shape.to_vec(), data: data(shape.iter().product(), seed) }
    }
    pub fn arr(&self) -> HostArray<'_> {
        HostArray::f32(&self.shape, &self.data)
    }
    pub fn tensor(&self) -> Tensor {
        constant("test", self.arr()).unwrap()
    }
}

/// One case per op kind: (name, output tensor). Names are the MIL op each case exercises.
pub fn op_cases() -> Vec<(&'static str, Tensor)> {
    let x = || input(&[2, 7]).unwrap();
    let img = || input(&[1, 4, 6, 6]).unwrap();
    let mut c: Vec<(&'static str, Tensor)> = Vec::new();
    let xs = x();
    c.push(("relu", xs.relu().unwrap()));
    c.push(("gelu", xs.gelu().unwrap()));
    c.push(("silu", xs.silu().unwrap()));
    c.push(("sigmoid", xs.sigmoid().unwrap()));
    c.push(("tanh", xs.tanh().unwrap()));
    c.push(("exp", xs.exp().unwrap()));
    c.push(("log", xs.log(1e-3).unwrap()));
    c.push(("sqrt", xs.sqrt().unwrap()));
    c.push(("rsqrt", xs.rsqrt(1e-3).unwrap()));
    c.push(("abs", xs.abs().unwrap()));
    c.push(("sin", xs.sin().unwrap()));
    c.push(("cos", xs.cos().unwrap()));
    c.push(("erf", xs.erf().unwrap()));
    c.push(("softplus", xs.softplus().unwrap()));
    c.push(("relu6", xs.relu6().unwrap()));
    c.push(("elu", xs.elu(0.5).unwrap()));
    c.push(("leaky_relu", xs.leaky_relu(0.1).unwrap()));
    c.push(("clip", xs.clip(-0.5, 0.75).unwrap()));
    let y = input(&[1, 7]).unwrap();
    c.push(("add", x().add(&y).unwrap()));
    c.push(("sub", x().sub(&y).unwrap()));
    c.push(("mul", x().mul_scalar(2.5).unwrap()));
    c.push(("real_div", x().div(&y).unwrap()));
    c.push(("maximum", x().maximum(&y).unwrap()));
    c.push(("minimum", x().minimum(&y).unwrap()));
    c.push(("pow", x().abs().unwrap().pow_scalar(1.5).unwrap()));
    for (name, cmp) in [
        ("greater", Compare::Greater),
        ("less", Compare::Less),
        ("equal", Compare::Equal),
        ("not_equal", Compare::NotEqual),
        ("less_equal", Compare::LessEqual),
        ("greater_equal", Compare::GreaterEqual),
    ] {
        let a = x();
        let cond = a.compare(cmp, &y).unwrap();
        c.push((name, select(&cond, &a, &y).unwrap()));
    }
    c.push(("select", {
        let a = x();
        select(&a.compare_scalar(Compare::Greater, 0.0).unwrap(), &a, &a.neg().unwrap()).unwrap()
    }));
    c.push(("matmul", x().matmul_weight(W::new(&[7, 3], 1).arr()).unwrap()));
    c.push(("linear", x().linear(W::new(&[3, 7], 2).arr(), Some(W::new(&[3], 3).arr())).unwrap()));
    c.push(("bmm", input(&[2, 3, 4]).unwrap().matmul(&input(&[4, 5]).unwrap()).unwrap()));
    c.push(("conv", {
        let opts = ConvOptions { stride: [2, 1], pad: [1, 0, 2, 1], dilation: [1, 2], groups: 2 };
        conv2d(&img(), W::new(&[6, 2, 3, 3], 4).arr(), Some(W::new(&[6], 5).arr()), opts).unwrap()
    }));
    c.push(("max_pool", img().max_pool([3, 3], [2, 2], [1, 1, 1, 1]).unwrap()));
    c.push(("avg_pool", img().avg_pool([2, 3], [2, 1], [0, 1, 1, 0], false).unwrap()));
    c.push(("reduce_mean", img().mean(&[2, 3], true).unwrap()));
    c.push(("reduce_sum", img().sum(&[1], false).unwrap()));
    c.push(("reduce_max", img().amax(&[-1], true).unwrap()));
    c.push(("reduce_min", img().amin(&[0, 2], false).unwrap()));
    c.push(("softmax", x().softmax(-1).unwrap()));
    c.push(("layer_norm", x().layer_norm(Some(&W::new(&[7], 6).tensor()), Some(&W::new(&[7], 7).tensor()), 1e-5).unwrap()));
    c.push(("rms_norm", x().rms_norm(Some(&W::new(&[7], 8).tensor()), 1e-5).unwrap()));
    c.push(("l2_norm", x().l2_norm(-1, 1e-12).unwrap()));
    c.push(("group_norm", img().group_norm(Some(&W::new(&[4], 9).tensor()), Some(&W::new(&[4], 10).tensor()), 2, 1e-5).unwrap()));
    c.push(("batch_norm", {
        let var: Vec<f32> = data(4, 11).iter().map(|v| v.abs() + 0.5).collect();
        batch_norm(&img(), W::new(&[4], 12).arr(), HostArray::f32(&[4], &var), Some(W::new(&[4], 13).arr()), Some(W::new(&[4], 14).arr()), 1e-5).unwrap()
    }));
    c.push(("reshape", x().reshape(&[7, -1]).unwrap()));
    c.push(("transpose", img().transpose(&[0, 2, 3, 1]).unwrap()));
    c.push(("concat", concat(&[x(), input(&[2, 3]).unwrap()], -1).unwrap()));
    c.push(("split", {
        let parts = img().split_sizes(&[1, 3], 1).unwrap();
        parts[1].clone()
    }));
    c.push(("slice_by_size", img().slice_by_size(&[0, 1, 2, 0], &[1, 2, 3, 6]).unwrap()));
    c.push(("squeeze", input(&[1, 5, 1]).unwrap().squeeze(&[0, 2]).unwrap()));
    c.push(("expand_dims", x().expand_dims(&[0, -1]).unwrap()));
    c.push(("upsample_nearest_neighbor", img().upsample(2, 3).unwrap()));
    c.push(("cast", image_input(&[1, 3, 2, 2], &[1.0 / 255.0], &[0.5, -0.5, 0.25], None).unwrap()));
    let _ = DType::Fp16;
    c
}
