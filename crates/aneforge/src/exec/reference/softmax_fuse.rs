//! A last-axis softmax and the add before it (an attention mask or bias broadcast onto the
//! scores) as one step: `ops::add_softmax` adds, rounds, takes the softmax and rounds its result
//! per block of 8 rows, with the bits of the two steps and the executor's rounding.

use super::row_fuse::Matcher;
use crate::graph::Value;
use crate::ops::add_softmax::add_softmax_rounded;
use crate::ops::elementwise::Binary;
use crate::ops::{Buf, Op};

/// softmax(add(x, m)) found in the graph: x has the output's shape, m broadcasts onto it.
#[derive(Debug)]
pub(super) struct AddSoftmax {
    /// x, then m.
    pub inputs: Vec<Value>,
    /// The add node, then the softmax node.
    pub nodes: Vec<usize>,
}

impl AddSoftmax {
    /// Run on the step's input buffers (x, m) into `y`.
    pub fn run(&self, ins: &[&Buf], y: &mut [f32]) {
        let (x, m) = (ins[0], ins[1]);
        add_softmax_rounded(&x.data, &m.data, &x.shape, &m.shape, y);
    }
}

impl Matcher<'_> {
    /// The add + softmax ending at softmax node `s`: the softmax is over the last axis with an
    /// fp16 output, the add is its only input, read by it alone, with one operand of the
    /// output's shape.
    pub(super) fn at_softmax(&self, s: usize) -> Option<AddSoftmax> {
        let Op::Softmax(sm) = self.g.nodes[s].op else {
            return None;
        };
        let shape = self.shape(s)?;
        let a = self.input(s, 0)?;
        let ins = self.binary_values(a, Binary::Add)?;
        let k = ins.iter().position(|v| self.g.ty(*v).shape == shape)?;
        let last = sm.axis + 1 == shape.len();
        let ok = last
            && self.sole_reader(a) == Some(s)
            && self.shape(a) == Some(shape)
            && self.fp16(a)
            && self.fp16(s);
        ok.then(|| AddSoftmax {
            inputs: vec![ins[k], ins[1 - k]],
            nodes: vec![a, s],
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::exec::reference::norm_fuse::tests::run;

    /// An attention-style mask add and softmax run as one step with the bits of the same
    /// program evaluated op by op; a mask value that is also a graph output stays out.
    #[test]
    fn mask_add_and_softmax_run_as_one_step_with_the_ops_bits() {
        let x = crate::input(&[2, 3, 20, 24]).unwrap();
        let m: Vec<f32> = (0..24)
            .map(|j| if j > 17 { -10000.0 } else { 0.0 })
            .collect();
        let mask =
            crate::constant("mask", crate::ops::io::HostArray::f32(&[1, 1, 1, 24], &m)).unwrap();
        let y = x.add(&mask).unwrap().softmax(-1).unwrap();
        let xs: Vec<f32> = (0..2 * 3 * 20 * 24)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 9.0)
            .collect();
        let (fused, steps, got, want) = run(&[y], &xs, "add-softmax");
        assert_eq!((fused, steps), (1, 1));
        crate::exec::reference::norm_fuse::tests::assert_bits(&got, &want, "add+softmax");
        let sum = x.add(&mask).unwrap();
        let (fused, steps, got, want) = run(&[sum.softmax(-1).unwrap(), sum], &xs, "add-out");
        assert_eq!((fused, steps), (0, 2));
        crate::exec::reference::norm_fuse::tests::assert_bits(&got, &want, "add output");
    }
}
