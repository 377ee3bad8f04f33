//! Reshapes that move instead of copy. A `reshape`, `squeeze` or `expand_dims` step whose input
//! dies at it (no later step reads it; not a graph input, constant or output) takes the input's
//! buffer and leaves its own in the input's slot: both slots hold the same element count, so
//! every slot keeps its length (see `memory_plan`). The values are those the copy would give:
//! in fp16 mode every fp16 value is already fp16-exact, so the copy's rounding changes nothing.

use super::Step;
use crate::ops::layout::Layout;
use crate::ops::{Buf, Op};

/// Whether step number `k` running `op` (with no ops folded into it) on the values `ins` may
/// move its input: a reshape-like op whose single input is read for the last time at step
/// `last_use[v]` = k and is not `pinned`.
pub(super) fn moves_input(
    op: &Op,
    folded: bool,
    k: usize,
    ins: &[usize],
    last_use: &[Option<usize>],
    pinned: &[bool],
) -> bool {
    let reshape = matches!(
        op,
        Op::Layout(Layout::Reshape { .. } | Layout::Squeeze { .. } | Layout::ExpandDims { .. })
    );
    reshape && !folded && matches!(ins, [v] if last_use[*v] == Some(k) && !pinned[*v])
}

/// Run a moving reshape `step` (see [`moves_input`]): swap its input and output buffers.
pub(super) fn run(step: &Step, bufs: &mut [Buf]) {
    let (i, o) = (step.ins[0], step.outs[0]);
    let data = std::mem::take(&mut bufs[i].data);
    bufs[i].data = std::mem::replace(&mut bufs[o].data, data);
    bufs[o].shape.clone_from(&step.out_shapes[0]);
}

#[cfg(test)]
mod tests {
    use super::super::handoff::ref_program;
    use super::super::test_support::compile_reference_for_test;
    use crate::exec::{PortData, Precision};
    use crate::graph::build::io::input;

    /// x [2, 6] → relu → reshape [3, 4] (moves: relu's value dies) → sigmoid (s) → reshape [12]
    /// (copies: s is read again) → reshape [3, 4] (moves) → + s → + reshape(x) (copies: x is
    /// the graph input). Run three times (the moved buffers rotate through the slots) against
    /// the formula in f64.
    #[test]
    fn dying_inputs_move_and_live_ones_are_copied() {
        let x = input(&[2, 6]).unwrap();
        let s = x
            .relu()
            .unwrap()
            .reshape(&[3, 4])
            .unwrap()
            .sigmoid()
            .unwrap();
        let r = s.reshape(&[12]).unwrap().reshape(&[3, 4]).unwrap();
        let y = r
            .add(&s)
            .unwrap()
            .add(&x.reshape(&[3, 4]).unwrap())
            .unwrap();
        for precision in [Precision::Fp16, Precision::Fp32] {
            let (mut c, dir) = compile_reference_for_test(&y, precision, "reshape-move");
            let p = ref_program(c.loaded.as_mut()).unwrap();
            let moves: Vec<(String, bool)> = p
                .steps
                .iter()
                .map(|s| (s.label.op.clone(), s.moves_input))
                .collect();
            // The two adds run fused as one step (`train_fuse`), after the reshape of x.
            let want = [
                ("relu", false),
                ("reshape", true),
                ("sigmoid", false),
                ("reshape", false),
                ("reshape", true),
                ("reshape", false),
                ("add+add", false),
            ];
            let want: Vec<(String, bool)> = want.iter().map(|(o, m)| (o.to_string(), *m)).collect();
            assert_eq!(moves, want, "{precision:?}");
            for call in 0..3 {
                let xs: Vec<f32> = (0..12)
                    .map(|i| (i as f32 - 5.5 + call as f32) / 3.0)
                    .collect();
                let got = c.run(&[PortData::F32(&xs)]).unwrap().remove(0);
                for (g, &v) in got.iter().zip(&xs) {
                    let v = half::f16::from_f32(v).to_f64();
                    let w = 2.0 / (1.0 + (-v.max(0.0)).exp()) + v;
                    assert!(
                        (*g as f64 - w).abs() < 4e-3,
                        "{precision:?} call {call} x={v}: {g} vs {w}"
                    );
                }
            }
            std::fs::remove_dir_all(dir).unwrap();
        }
    }
}
