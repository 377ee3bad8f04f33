//! Transposes folded into the matmul that reads them. A `transpose` whose value only a plain
//! `matmul` reads (once; not a graph output) runs as no step of its own: the matmul reads the
//! transpose's input through the permuted strides (attention's head split `[S, H, D] → [H, S, D]`
//! and the key transpose `[H, S, D] → [H, D, S]`). Each product is still one `sgemm` call over
//! the same values, whose summation order does not depend on the operands' strides, so the
//! results are bit-identical; the permuting copy is gone.

use crate::error::Result;
use crate::graph::{Graph, Value};
use crate::ops::layout::Layout;
use crate::ops::linear::{MatMul, View};
use crate::ops::{Buf, Op};
use crate::shape::strides;

/// How a matmul step reads each operand folded from a transpose: the viewed (transposed)
/// shape and its strides in the transpose's input; `None` for an operand read as stored.
pub(super) type Views = [Option<(Vec<usize>, Vec<usize>)>; 2];

/// For each node, the views of a matmul with folded transposes (`None` for any other node), and
/// the transpose nodes folded away. `skip[i]` excludes node i as a matmul (a matmul run with a
/// weight prepared at load, or the head of an epilogue chain).
pub(super) fn find(g: &Graph, skip: &[bool]) -> (Vec<Option<Views>>, Vec<bool>) {
    let n = g.nodes.len();
    let mut readers = vec![0usize; n];
    for node in &g.nodes {
        node.inputs.iter().for_each(|v| readers[v.node] += 1);
    }
    g.outputs.iter().for_each(|(_, v)| readers[v.node] += 1);
    let mut views = vec![None; n];
    let mut folded = vec![false; n];
    for (i, node) in g.nodes.iter().enumerate() {
        if skip[i] || !matches!(node.op, Op::MatMul(_)) || node.inputs.len() != 2 {
            continue;
        }
        let mut v: Views = [None, None];
        for (p, input) in node.inputs.iter().enumerate() {
            let t = input.node;
            let Op::Layout(Layout::Transpose { perm }) = &g.nodes[t].op else {
                continue;
            };
            if readers[t] != 1 || perm.last() != Some(&(perm.len() - 1)) {
                continue;
            }
            let src = g.ty(g.nodes[t].inputs[0]);
            let st = strides(&src.shape);
            let shape = perm.iter().map(|&a| src.shape[a]).collect();
            v[p] = Some((shape, perm.iter().map(|&a| st[a]).collect()));
            folded[t] = true;
        }
        if v.iter().any(Option::is_some) {
            views[i] = Some(v);
        }
    }
    (views, folded)
}

/// The value a matmul step reads as operand `p` (input `input` of the node): the folded
/// transpose's own input when `views` folds it.
pub(super) fn source(g: &Graph, views: Option<&Views>, p: usize, input: Value) -> Value {
    match views {
        Some(v) if v[p].is_some() => g.nodes[input.node].inputs[0],
        _ => input,
    }
}

/// Run matmul `mm` on its step inputs `ins` read through `views` into `out[0]`.
pub(super) fn run(mm: &MatMul, views: &Views, ins: &[&Buf], out: &mut [Buf]) -> Result<()> {
    let own = [0, 1].map(|p| strides(&ins[p].shape));
    let [x, y] = [0, 1].map(|p| match &views[p] {
        Some((shape, st)) => View {
            buf: ins[p],
            shape,
            strides: st,
        },
        None => View {
            buf: ins[p],
            shape: &ins[p].shape,
            strides: &own[p],
        },
    });
    mm.eval_views(x, y, &mut out[0])
}

#[cfg(test)]
mod tests {
    use super::super::handoff::ref_program;
    use crate::compile::{compile, CompileOptions, Device};
    use crate::exec::PortData;
    use crate::graph::build::io::input;

    /// a [S, H, D] and b [S, H, E] (head-split layouts) → matmul(transpose(a, [1, 0, 2]),
    /// transpose(transpose(b, [1, 0, 2]), [0, 2, 1])): the first transpose folds into the
    /// matmul; the key-style one (last axis moved) does not. Against an f64 oracle, and bit for
    /// bit against the same graph with the transpose also returned (so not folded).
    #[test]
    fn head_split_transposes_fold_into_the_matmul_bit_for_bit() {
        let (s, h, d) = (5, 3, 4);
        let a = input(&[s, h, d]).unwrap();
        let b = input(&[s, h, d]).unwrap();
        let at = a.transpose(&[1, 0, 2]).unwrap();
        let bt = b
            .transpose(&[1, 0, 2])
            .unwrap()
            .transpose(&[0, 2, 1])
            .unwrap();
        let y = at.matmul(&bt).unwrap();
        let va: Vec<f32> = (0..s * h * d)
            .map(|i| ((i * 7 % 23) as f32 - 11.0) / 8.0)
            .collect();
        let vb: Vec<f32> = (0..s * h * d)
            .map(|i| ((i * 5 % 19) as f32 - 9.0) / 4.0)
            .collect();
        let run = |outs: Vec<(Option<String>, crate::graph::Tensor)>, tag: &str| {
            let dir =
                std::env::temp_dir().join(format!("aneforge-tfold-{tag}-{}", std::process::id()));
            let opts = CompileOptions {
                device: Device::Reference,
                build_dir: Some(dir.clone()),
                ..Default::default()
            };
            let mut c = compile(&outs, &opts).unwrap();
            let folded = ref_program(c.loaded.as_mut())
                .unwrap()
                .steps
                .iter()
                .filter(|st| st.views.is_some())
                .count();
            let r = c
                .run(&[PortData::F32(&va), PortData::F32(&vb)])
                .unwrap()
                .remove(0);
            std::fs::remove_dir_all(dir).unwrap();
            (folded, r)
        };
        let (folded, got) = run(vec![(None, y.clone())], "fold");
        let (unfolded, want_bits) = run(vec![(None, y), (None, at)], "plain");
        assert_eq!((folded, unfolded), (1, 0));
        assert_eq!(
            got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            want_bits.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
        let f = |v: f32| half::f16::from_f32(v).to_f64();
        // y[k, i, j] = Σ_e a[i, k, e] · b[j, k, e]
        for k in 0..h {
            for i in 0..s {
                for j in 0..s {
                    let w: f64 = (0..d)
                        .map(|e| f(va[(i * h + k) * d + e]) * f(vb[(j * h + k) * d + e]))
                        .sum();
                    let g = got[(k * s + i) * s + j] as f64;
                    assert!(
                        (g - w).abs() <= 2e-3 * w.abs().max(1.0),
                        "[{k}, {i}, {j}]: {g} vs {w}"
                    );
                }
            }
        }
    }
}
