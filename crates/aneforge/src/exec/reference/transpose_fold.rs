//! Transposes folded into the matmul that reads them. A chain of `transpose`s whose value only a
//! plain `matmul` reads (each one read once; not graph outputs) runs as no step of its own: the
//! matmul reads the first transpose's input through the composed permutation's strides
//! (attention's head split `[S, H, D] → [H, S, D]`, and the key's split followed by its
//! transpose `[H, S, D] → [H, D, S]`). Each product is still one `sgemm` call over the same
//! values. On the `gemm` crate's blocked path its summation order depends on no stride
//! (`gemm_order`), so any permutation folds there; off it (tiny products) only one that keeps
//! the last axis does, whose unit-stride depth the crate's other kernels see unchanged. So
//! the results are bit-identical; the permuting copies are gone.

use crate::error::Result;
use crate::graph::{Graph, Value};
use crate::ops::gemm_order::blocked_path;
use crate::ops::layout::Layout;
use crate::ops::linear::{MatMul, View};
use crate::ops::{Buf, Op};
use crate::shape::strides;

/// A matmul operand read through folded transposes: its viewed (transposed) shape, that view's
/// strides in `source`, and `source`, the value the first transpose of the chain reads.
#[derive(Clone, Debug)]
pub(super) struct Fold {
    shape: Vec<usize>,
    strides: Vec<usize>,
    source: Value,
}

/// How a matmul step reads each operand: through a [`Fold`], or `None` as stored.
pub(super) type Views = [Option<Fold>; 2];

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
        let Op::MatMul(mm) = &node.op else { continue };
        if skip[i] || node.inputs.len() != 2 {
            continue;
        }
        let blocked = product_dims(g, i, mm).is_some_and(|[m, n, k]| blocked_path(m, n, k));
        let mut v: Views = [None, None];
        for (p, &input) in node.inputs.iter().enumerate() {
            let (chain, source, perm) = transposes(g, &readers, input);
            let Some(perm) = perm.filter(|pm| blocked || pm.last() == Some(&(pm.len() - 1))) else {
                continue;
            };
            let st = strides(&g.ty(source).shape);
            v[p] = Some(Fold {
                shape: perm.iter().map(|&a| g.ty(source).shape[a]).collect(),
                strides: perm.iter().map(|&a| st[a]).collect(),
                source,
            });
            chain.iter().for_each(|&t| folded[t] = true);
        }
        if v.iter().any(Option::is_some) {
            views[i] = Some(v);
        }
    }
    (views, folded)
}

/// The single-reader transposes ending at `value` (outermost first), the value the innermost
/// one reads, and their composed permutation of it (`None` when `value` is no such transpose).
fn transposes(
    g: &Graph,
    readers: &[usize],
    value: Value,
) -> (Vec<usize>, Value, Option<Vec<usize>>) {
    let (mut chain, mut at, mut composed) = (Vec::new(), value, None::<Vec<usize>>);
    while let Op::Layout(Layout::Transpose { perm }) = &g.nodes[at.node].op {
        if readers[at.node] != 1 {
            break;
        }
        // The outer view's axis a is axis perm[outer[a]] of this transpose's input.
        composed = Some(match composed {
            None => perm.clone(),
            Some(outer) => outer.iter().map(|&a| perm[a]).collect(),
        });
        chain.push(at.node);
        at = g.nodes[at.node].inputs[0];
    }
    (chain, at, composed)
}

/// (m, n, k) of matmul node `i`'s matrices (the last two axes of its output, the depth from x),
/// when both operands are at least matrices.
fn product_dims(g: &Graph, i: usize, mm: &MatMul) -> Option<[usize; 3]> {
    let node = &g.nodes[i];
    let (x, y) = (&g.ty(node.inputs[0]).shape, &g.ty(node.inputs[1]).shape);
    let out = &node.outputs.first()?.shape;
    // A vector operand drops its axis from the output: its last two axes are not (m, n).
    let ([.., xr, xc], [_, _, ..], [.., m, n]) = (&x[..], &y[..], &out[..]) else {
        return None;
    };
    Some([*m, *n, if mm.transpose_x { *xr } else { *xc }])
}

/// The value a matmul step reads as operand `p` (input `input` of the node): the folded
/// transposes' source when `views` folds them.
pub(super) fn source(views: Option<&Views>, p: usize, input: Value) -> Value {
    match views.and_then(|v| v[p].as_ref()) {
        Some(fold) => fold.source,
        None => input,
    }
}

/// Run matmul `mm` on its step inputs `ins` read through `views` into `out[0]`.
pub(super) fn run(mm: &MatMul, views: &Views, ins: &[&Buf], out: &mut [Buf]) -> Result<()> {
    let own = [0, 1].map(|p| strides(&ins[p].shape));
    let [x, y] = [0, 1].map(|p| match &views[p] {
        Some(fold) => View {
            buf: ins[p],
            shape: &fold.shape,
            strides: &fold.strides,
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
    use super::{Layout, Op};
    use crate::compile::{compile, CompileOptions, Device};
    use crate::exec::PortData;
    use crate::graph::build::io::input;

    /// a [S, H, D] and b [S, H, D] (head-split layouts) → matmul(transpose(a, [1, 0, 2]),
    /// transpose(transpose(b, [1, 0, 2]), [0, 2, 1])), compiled twice: as is, and with the
    /// transposes also returned (so none folds). Checks the folded result bit for bit against
    /// the unfolded one and against an f64 oracle; returns the transpose steps left in each.
    fn fold_attention_scores(s: usize, h: usize, d: usize) -> (usize, usize) {
        let a = input(&[s, h, d]).unwrap();
        let b = input(&[s, h, d]).unwrap();
        let at = a.transpose(&[1, 0, 2]).unwrap();
        let bs = b.transpose(&[1, 0, 2]).unwrap();
        let bt = bs.transpose(&[0, 2, 1]).unwrap();
        let y = at.matmul(&bt).unwrap();
        let va: Vec<f32> = (0..s * h * d)
            .map(|i| ((i * 7 % 23) as f32 - 11.0) / 8.0)
            .collect();
        let vb: Vec<f32> = (0..s * h * d)
            .map(|i| ((i * 5 % 19) as f32 - 9.0) / 4.0)
            .collect();
        let run = |outs: Vec<(Option<String>, crate::graph::Tensor)>, tag: &str| {
            let dir = std::env::temp_dir()
                .join(format!("aneforge-tfold-{tag}{s}-{}", std::process::id()));
            let opts = CompileOptions {
                device: Device::Reference,
                build_dir: Some(dir.clone()),
                ..Default::default()
            };
            let mut c = compile(&outs, &opts).unwrap();
            let transposes = ref_program(c.loaded.as_mut())
                .unwrap()
                .steps
                .iter()
                .filter(|st| matches!(st.op, Op::Layout(Layout::Transpose { .. })))
                .count();
            let r = c
                .run(&[PortData::F32(&va), PortData::F32(&vb)])
                .unwrap()
                .remove(0);
            std::fs::remove_dir_all(dir).unwrap();
            (transposes, r)
        };
        let (folded, got) = run(vec![(None, y.clone())], "fold");
        let (unfolded, want_bits) =
            run(vec![(None, y), (None, at), (None, bs), (None, bt)], "plain");
        assert_eq!(unfolded, 3, "nothing folds when the transposes are outputs");
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
        (folded, unfolded)
    }

    /// A batch of transposed matrices times a vector, x [b, k, m]ᵀ · y [k] → [b, m]: the product
    /// is m×1 (off the crate's blocked path, whatever the b×m output), so the transpose that
    /// moves x's last axis stays a step.
    #[test]
    fn a_vector_operand_keeps_the_transpose_that_moves_the_last_axis() {
        let (b, k, m) = (30, 4, 20);
        let xt = input(&[b, k, m]).unwrap().transpose(&[0, 2, 1]).unwrap();
        let y = xt.matmul(&input(&[k]).unwrap()).unwrap();
        let g = crate::graph::Graph::from_outputs(&[(None, y)]).unwrap();
        let mm = (g.nodes.iter().enumerate())
            .find(|(_, nd)| matches!(nd.op, Op::MatMul(_)))
            .map(|(i, _)| i)
            .unwrap();
        let Op::MatMul(op) = &g.nodes[mm].op else {
            unreachable!()
        };
        assert_eq!(super::product_dims(&g, mm, op), Some([m, 1, k]));
        let (views, folded) = super::find(&g, &vec![false; g.nodes.len()]);
        assert!(views[mm].is_none() && !folded.contains(&true));
    }

    /// A tiny product (off the crate's blocked path): only the query's transpose (last axis
    /// kept) folds; the key's two stay steps.
    #[test]
    fn head_split_transposes_fold_into_a_tiny_matmul_bit_for_bit() {
        assert_eq!(fold_attention_scores(5, 3, 4), (2, 3));
    }

    /// A product on the blocked path (m·n = 400 > 256): the key's split and transpose fold
    /// too, composed into one view.
    #[test]
    fn key_transposes_fold_into_a_blocked_matmul_bit_for_bit() {
        assert_eq!(fold_attention_scores(20, 3, 5), (0, 3));
    }
}
