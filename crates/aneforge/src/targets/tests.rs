//! Preflight and compile gating per family, with shapes just inside and just outside each limit.

use super::*;
use crate::compile::{export, CompileOptions};
use crate::conv2d;
use crate::error::Error;
use crate::graph::{Graph, Tensor};
use crate::input;
use crate::ops::conv::ConvOptions;
use crate::ops::io::HostArray;

const MIL: [Family; 4] = [Family::A13, Family::A14, Family::A15, Family::A16];

/// Preflight of a one-output graph.
fn pf(y: &Tensor, f: Family) -> Preflight {
    preflight(&Graph::from_outputs(&[(None, y.clone())]).unwrap(), f).unwrap()
}

/// (limit, value, max) of every oversize entry.
fn over(p: &Preflight) -> Vec<(Limit, usize, usize)> {
    p.oversize
        .iter()
        .map(|o| (o.limit, o.value, o.max))
        .collect()
}

/// A conv with an all-ones 1×1×1×kw kernel on a [1, 1, 4, 32] input.
fn conv_kw(kw: usize) -> crate::Result<Tensor> {
    let w = vec![1.0; kw];
    conv2d(
        &input(&[1, 1, 4, 32])?,
        HostArray::f32(&[1, 1, 1, kw], &w),
        None,
        ConvOptions::default(),
    )
}

#[test]
fn max_tensor_dim_per_family() {
    for f in MIL {
        let max = limit(Limit::MaxTensorDim, f);
        assert!(
            pf(&input(&[1, max]).unwrap().relu().unwrap(), f).ok(),
            "{f}"
        );
        let y = input(&[2, 3, max]).unwrap();
        assert!(
            pf(&y.relu().unwrap(), f).ok(),
            "{f}: rank 3 has no channel axis"
        );
        if max < crate::shape::MAX_EXTENT {
            let p = pf(&input(&[1, max + 1]).unwrap().relu().unwrap(), f);
            assert_eq!(
                over(&p),
                vec![(Limit::MaxTensorDim, max + 1, max); 2],
                "{f}: the input and the relu"
            );
            assert_eq!(
                (p.oversize[1].op, p.oversize[1].shape.clone()),
                ("relu", vec![1, max + 1])
            );
        } else {
            assert!(
                input(&[1, max + 1]).is_err(),
                "{f}: 65537 is over the global axis cap"
            );
        }
    }
}

#[test]
fn channel_axis_of_rank4_uses_channel_extent() {
    for f in MIL {
        let max = limit(Limit::ChannelExtent, f);
        assert_eq!(max, 65536);
        assert!(
            pf(&input(&[1, max, 1, 1]).unwrap().relu().unwrap(), f).ok(),
            "{f}"
        );
        assert!(
            input(&[1, max + 1, 1, 1]).is_err(),
            "{f}: just outside is the global axis cap"
        );
        let width = pf(&input(&[1, 1, 1, 16385]).unwrap().relu().unwrap(), f);
        assert_eq!(
            width.ok(),
            f == Family::A16,
            "{f}: the width axis is a non-channel axis"
        );
    }
}

#[test]
fn transpose_extent_per_family() {
    for f in MIL {
        let (max, dim) = (
            limit(Limit::TransposeExtent, f),
            limit(Limit::MaxTensorDim, f),
        );
        let rows = (max + 1) / dim;
        let inside = input(&[rows, dim - 1]).unwrap().transpose(&[1, 0]).unwrap();
        assert!(rows * (dim - 1) <= max && pf(&inside, f).ok(), "{f}");
        let outside = input(&[rows, dim]).unwrap().transpose(&[1, 0]).unwrap();
        assert_eq!(
            over(&pf(&outside, f)),
            vec![(Limit::TransposeExtent, max + 1, max)],
            "{f}"
        );
    }
}

#[test]
fn conv_kernel_width_per_family() {
    for f in MIL {
        let max = limit(Limit::ConvKwMax, f);
        assert!(pf(&conv_kw(max).unwrap(), f).ok(), "{f}");
        match conv_kw(max + 1) {
            Ok(y) => assert_eq!(
                over(&pf(&y, f)),
                vec![(Limit::ConvKwMax, max + 1, max)],
                "{f}"
            ),
            Err(e) => assert!(
                f == Family::A16 && e.to_string().contains("kernel width 16 exceeds"),
                "{f}: {e}"
            ),
        }
    }
}

#[test]
fn reduction_transpose_extent_is_not_gated() {
    let y = input(&[4, 1000]).unwrap().sum(&[1], false).unwrap();
    assert!(pf(&y, Family::A13).ok() && 1000 > limit(Limit::ReductionTransposeExtent, Family::A13));
}

#[test]
fn sin_cos_status_per_family() {
    let x = input(&[8]).unwrap();
    let y = x.sin().unwrap().add(&x.cos().unwrap()).unwrap();
    for f in MIL {
        let p = pf(&y, f);
        let decomposed: Vec<&str> = p.decompose.iter().map(|e| e.op).collect();
        assert_eq!(
            decomposed,
            if f < Family::A15 {
                vec!["sin", "cos"]
            } else {
                vec![]
            },
            "{f}"
        );
        assert_eq!(p.native.len(), 3 - decomposed.len());
        assert!(p.ok() && p.decompose.iter().all(|e| e.floor == Family::A15));
    }
    let e = preflight(&Graph::from_outputs(&[(None, y)]).unwrap(), Family::Older).unwrap_err();
    assert!(
        e.to_string().contains("MIL is only supported for H13+"),
        "{e}"
    );
}

#[test]
fn reject_entries_name_op_floor_and_family() {
    let entry = OpEntry {
        node: 3,
        op: "topk",
        shape: vec![1, 8],
        floor: op_floor("topk"),
    };
    let p = Preflight {
        family: Family::A13,
        native: vec![],
        decompose: vec![],
        reject: vec![entry],
        oversize: vec![],
    };
    let e = p.check().unwrap_err();
    assert!(matches!(e, Error::Target { family: "A13", .. }));
    assert_eq!(
        e.to_string(),
        "target family A13: topk (node 3, shape [1, 8]) needs family A14 or newer"
    );
}

#[test]
fn compile_target_gates_with_named_errors() {
    let opts = |t: &str| CompileOptions {
        target: Some(t.into()),
        ..Default::default()
    };
    let y = input(&[1, 16385]).unwrap().relu().unwrap();
    let e = export(&[(None, y.clone())], &opts("h13"))
        .err()
        .unwrap()
        .to_string();
    assert!(e.starts_with("target family A13: input (node 0, shape [1, 16385]): axis extent = 16385 exceeds max_tensor_dim = 16384"), "{e}");
    assert!(e.contains("relu (node 1"), "{e}");
    let e = export(&[(None, y.clone())], &opts("h12"))
        .err()
        .unwrap()
        .to_string();
    assert_eq!(e, "target family OLDER: 'h12' is family OLDER; MIL is only supported for H13+ ANE architectures");
    for bad in ["h99", "u3"] {
        assert!(
            matches!(
                export(&[(None, y.clone())], &opts(bad)),
                Err(Error::Value { .. })
            ),
            "{bad}"
        );
    }
    let e = export(&[(None, conv_kw(14).unwrap())], &opts("A15"))
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains(
            "conv (node 2, shape [1, 1, 4, 19]): kernel width = 14 exceeds conv_kw_max = 13"
        ),
        "{e}"
    );
}
