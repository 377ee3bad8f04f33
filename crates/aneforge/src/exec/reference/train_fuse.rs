//! Elementwise fusion for the training graphs (GELU and softmax backward, the optimizer update,
//! and any other chain of elementwise ops): a run of consecutive elementwise steps whose
//! operands are all of one element count (or single values) runs as one step, op by op over
//! cache-sized chunks, each op rounded to fp16 exactly as its own step would be (so the results
//! are bit-identical). Values read only inside the run are never written to their slots.
//! A nearest-neighbour upsample joins a run as an op that gathers from its smaller input.
//!
//! Chunked order is safe with the memory plan: every operand is index-aligned (or a single value
//! read before the run starts), so for each element the run reads and writes its slots in the
//! steps' own order, whatever slots the plan shared. An upsample's input is the one operand that
//! is not: it is smaller than the run, and the plan gives slots of one element count only to
//! values of that count, so no op of the run writes into it.

use std::sync::Arc;

use rayon::prelude::*;

use super::fp16_table::Fp16Table;
use super::fused_arith::{self, Arith};
use super::{round_to_fp16, Step};
use crate::exec::profile::OpLabel;
use crate::graph::Graph;
use crate::ops::elementwise::{Binary, Compare};
use crate::ops::kernel::PAR_MIN_ELEMS;
use crate::ops::layout::{upsample_range, Layout};
use crate::ops::unary::Unary;
use crate::ops::{Buf, Op};
use crate::shape::numel;

/// Elements per chunk: every op's chunk of a run stays in L1.
const CHUNK: usize = 256;

/// The per-element computation of one fused op.
#[derive(Clone, Copy, Debug)]
enum Kernel {
    Unary(Unary),
    Binary(Binary),
    Compare(Compare),
    Select,
    /// Nearest-neighbour upsample by (h, w) factors of an input whose rows are `row` long.
    Upsample {
        row: usize,
        h: usize,
        w: usize,
    },
}

/// Where a fused op reads an operand.
#[derive(Clone, Copy, Debug)]
enum Operand {
    /// A full-length slot of the run (index into [`Fused::arrays`]).
    Array(usize),
    /// A single value read once before the run (index into [`Fused::scalars`]).
    Scalar(usize),
    /// The result of an earlier op of the run (its index).
    Local(usize),
    /// A whole smaller slot an upsample gathers from (index into [`Fused::arrays`]).
    Coarse(usize),
}

impl Kernel {
    /// The kernel as an op [`fused_arith`] evaluates with its rounding in one pass, if it is one.
    fn arith(self) -> Option<Arith> {
        match self {
            Kernel::Binary(b) => Arith::of_binary(b),
            Kernel::Unary(u) => Arith::of_unary(u),
            _ => None,
        }
    }
}

impl Operand {
    /// The array (index into [`Fused::arrays`]) the operand reads, if any.
    fn array(self) -> Option<usize> {
        match self {
            Operand::Array(a) | Operand::Coarse(a) => Some(a),
            _ => None,
        }
    }
}

/// One op of a fused run.
struct FusedOp {
    kernel: Kernel,
    ins: Vec<Operand>,
    round: bool,
    table: Option<Arc<Fp16Table>>,
    /// The array (index into [`Fused::arrays`]) its result is written to, when read after the run.
    store: Option<usize>,
}

/// A slot of full-length values the run reads or writes.
struct Array {
    slot: usize,
    written: bool,
}

/// A fused run of elementwise steps over `len` elements.
pub(super) struct Fused {
    len: usize,
    ops: Vec<FusedOp>,
    arrays: Vec<Array>,
    scalars: Vec<usize>,
    /// (slot, shape) of every written result.
    shapes: Vec<(usize, Vec<usize>)>,
}

/// The kernel of `step` when it is a plain elementwise step with one output.
fn kernel(step: &Step) -> Option<Kernel> {
    if step.packed.is_some()
        || step.epilogue.is_some()
        || step.row.is_some()
        || step.outs.len() != 1
    {
        return None;
    }
    op_kernel(&step.op, &step.out_shapes[0])
}

/// The kernel of an elementwise `op` with one output of shape `out`.
fn op_kernel(op: &Op, out: &[usize]) -> Option<Kernel> {
    match *op {
        Op::Unary(u) => Some(Kernel::Unary(u)),
        Op::Binary(b) => Some(Kernel::Binary(b)),
        Op::Compare(c) => Some(Kernel::Compare(c)),
        Op::Select(_) => Some(Kernel::Select),
        Op::Layout(Layout::Upsample { scale_h, scale_w }) if scale_h * scale_w > 1 => {
            Some(Kernel::Upsample {
                row: out.last()? / scale_w,
                h: scale_h,
                w: scale_w,
            })
        }
        _ => None,
    }
}

/// The element count `n` of a step with `kernel`, output count `n` and input counts `ins` when
/// it can join a run: every operand is `n` long or a single value (an upsample's input is the
/// `n`-element output's coarse grid).
fn run_len(kernel: Kernel, n: usize, mut ins: impl Iterator<Item = usize>) -> Option<usize> {
    let fits = |m: usize| match kernel {
        Kernel::Upsample { h, w, .. } => m * h * w == n,
        _ => m == n || m == 1,
    };
    (n > 0 && ins.all(fits)).then_some(n)
}

/// `ops` (the steps' nodes of `g` in graph order) with each fusable elementwise node whose
/// value is read by exactly one step moved to just before that step, when it is a fusable
/// node of the same element count (so both join one fused run: a max-pool backward's masks,
/// computed from forward values, run with the selects that read them instead of in a run of
/// their own that stores them). The order stays topological: a moved node's inputs are either
/// earlier in graph order than the node's new place or moved to just before it. `step_of[j]` is
/// the node whose step runs node j: j itself, or the last node of its conv chain or norm.
pub(super) fn sink(g: &Graph, ops: &[usize], step_of: &[usize]) -> Vec<usize> {
    let n = g.nodes.len();
    // The last node of each conv chain or norm runs a step of its own kind (not elementwise).
    let mut grouped = vec![false; n];
    (0..n)
        .filter(|&j| step_of[j] != j)
        .for_each(|j| grouped[step_of[j]] = true);
    let len: Vec<Option<usize>> = (0..n)
        .map(|i| {
            let node = &g.nodes[i];
            let [out] = &node.outputs[..] else {
                return None;
            };
            let k = op_kernel(&node.op, &out.shape).filter(|_| !grouped[i])?;
            let ins = node.inputs.iter();
            run_len(k, numel(&out.shape), ins.map(|v| numel(&g.ty(*v).shape)))
        })
        .collect();
    // The one step reading each node's values (None: none yet; usize::MAX: several or a port).
    let mut reader: Vec<Option<usize>> = vec![None; n];
    let mut read_by = |v: usize, r: usize| {
        reader[v] = match reader[v] {
            Some(s) if s != r => Some(usize::MAX),
            _ => Some(r),
        }
    };
    for (j, node) in g.nodes.iter().enumerate() {
        node.inputs.iter().for_each(|v| read_by(v.node, step_of[j]));
    }
    g.outputs
        .iter()
        .for_each(|(_, v)| read_by(v.node, usize::MAX));
    let mut before: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut moved = vec![false; n];
    for &i in ops {
        if let Some(r) = reader[i].filter(|&r| r != usize::MAX && len[i].is_some()) {
            if len[r] == len[i] {
                before[r].push(i);
                moved[i] = true;
            }
        }
    }
    // Each unmoved node in graph order, preceded by what moved before it (depth first).
    let mut order = Vec::with_capacity(ops.len());
    for &top in ops.iter().filter(|&&i| !moved[i]) {
        let mut stack = vec![(top, 0)];
        while let Some((node, k)) = stack.pop() {
            match before[node].get(k) {
                Some(&child) => stack.extend([(node, k + 1), (child, 0)]),
                None => order.push(node),
            }
        }
    }
    order
}

/// Replace each run of two or more consecutive fusable steps by one fused step. `values[k]` are
/// step k's (input, output) graph values, `numel` and `pinned` per value, as in the memory plan.
pub(super) fn fuse(
    steps: Vec<Step>,
    values: &[(Vec<usize>, Vec<usize>)],
    numel: &[usize],
    pinned: &[bool],
) -> Vec<Step> {
    let mut last_read = vec![0usize; numel.len()];
    for (k, (ins, _)) in values.iter().enumerate() {
        for &v in ins {
            last_read[v] = k;
        }
    }
    // The element count of each fusable step (all operands of it or of one element).
    let len: Vec<Option<usize>> = steps
        .iter()
        .zip(values)
        .map(|(s, (ins, outs))| run_len(kernel(s)?, numel[outs[0]], ins.iter().map(|&v| numel[v])))
        .collect();
    let mut out = Vec::with_capacity(steps.len());
    let mut run: Vec<Step> = Vec::new();
    let mut start = 0;
    for (k, step) in steps.into_iter().enumerate() {
        if !run.is_empty() && (len[k].is_none() || len[k] != len[start]) {
            flush(&mut run, start, values, numel, pinned, &last_read, &mut out);
        }
        if len[k].is_some() {
            if run.is_empty() {
                start = k;
            }
            run.push(step);
        } else {
            out.push(step);
        }
    }
    flush(&mut run, start, values, numel, pinned, &last_read, &mut out);
    out
}

/// Emit `run` (steps `start..`) into `out`: as is when shorter than two steps, else fused.
fn flush(
    run: &mut Vec<Step>,
    start: usize,
    values: &[(Vec<usize>, Vec<usize>)],
    numel: &[usize],
    pinned: &[bool],
    last_read: &[usize],
    out: &mut Vec<Step>,
) {
    if run.len() < 2 {
        out.append(run);
        return;
    }
    let end = start + run.len() - 1;
    let produced: Vec<usize> = values[start..=end].iter().map(|(_, o)| o[0]).collect();
    let len = numel[produced[0]];
    let mut f = Fused {
        len,
        ops: Vec::new(),
        arrays: Vec::new(),
        scalars: Vec::new(),
        shapes: Vec::new(),
    };
    let array = |slot: usize, written: bool, arrays: &mut Vec<Array>| -> usize {
        match arrays.iter().position(|a| a.slot == slot) {
            Some(i) => {
                arrays[i].written |= written;
                i
            }
            None => {
                arrays.push(Array { slot, written });
                arrays.len() - 1
            }
        }
    };
    let (mut bytes, mut flops, mut names) = (0, 0, Vec::new());
    for (i, step) in run.drain(..).enumerate() {
        let (ins, outs) = &values[start + i];
        let upsample = matches!(kernel(&step), Some(Kernel::Upsample { .. }));
        let operands = ins
            .iter()
            .zip(&step.ins)
            .map(
                |(v, &slot)| match produced[..i].iter().position(|p| p == v) {
                    Some(j) => Operand::Local(j),
                    None if upsample => Operand::Coarse(array(slot, false, &mut f.arrays)),
                    None if numel[*v] == len => Operand::Array(array(slot, false, &mut f.arrays)),
                    None => {
                        f.scalars.push(slot);
                        Operand::Scalar(f.scalars.len() - 1)
                    }
                },
            )
            .collect();
        let v = outs[0];
        let store = (pinned[v] || last_read[v] > end).then(|| {
            f.shapes.push((step.outs[0], step.out_shapes[0].clone()));
            array(step.outs[0], true, &mut f.arrays)
        });
        bytes += step.label.bytes;
        flops += step.label.flops;
        names.push(step.label.op.clone());
        f.ops.push(FusedOp {
            kernel: kernel(&step).expect("a fusable step"),
            ins: operands,
            round: step.round[0],
            table: step.table.clone(),
            store,
        });
        if i == end - start {
            out.push(Step {
                ins: Vec::new(),
                outs: Vec::new(),
                out_shapes: Vec::new(),
                round: Vec::new(),
                table: None,
                packed: None,
                shared: None,
                epilogue: None,
                rounds_in_kernel: false,
                moves_input: false,
                views: None,
                label: OpLabel {
                    op: names.join("+"),
                    shape: step.out_shapes[0].clone(),
                    bytes,
                    flops,
                },
                op: step.op,
                fused: None,
                row: None,
            });
        }
    }
    out.last_mut().expect("pushed above").fused = Some(Box::new(f));
}

impl Fused {
    /// Whether the run writes value slot `slot`.
    pub(super) fn writes(&self, slot: usize) -> bool {
        self.arrays.iter().any(|a| a.slot == slot && a.written)
    }

    /// Whether the run reads value slot `slot` (as an operand, not as its own result).
    pub(super) fn reads(&self, slot: usize) -> bool {
        self.scalars.contains(&slot)
            || (self.arrays.iter().enumerate()).any(|(a, arr)| {
                arr.slot == slot
                    && (self.ops.iter()).any(|op| op.ins.iter().any(|o| o.array() == Some(a)))
            })
    }

    /// Whether the result the run stores into slot `out` may be stored into slot `input`
    /// instead (see [`Fused::rename`]): `out` is written once and never read as an operand,
    /// and `input` is read only as a full-length operand, by the storing op or ops before it
    /// (per element each chunk then reads `input` before the store overwrites it).
    pub(super) fn can_share(&self, out: usize, input: usize) -> bool {
        let (Some(ao), ai) = (
            self.arrays.iter().position(|a| a.slot == out && a.written),
            self.arrays.iter().position(|a| a.slot == input),
        ) else {
            return false;
        };
        let reads_at = |a: usize| {
            (self.ops.iter().enumerate())
                .filter(move |(_, op)| op.ins.iter().any(|o| o.array() == Some(a)))
                .map(|(k, _)| k)
        };
        let stores: Vec<usize> = (0..self.ops.len())
            .filter(|&k| self.ops[k].store == Some(ao))
            .collect();
        let [k] = stores[..] else { return false };
        !self.scalars.contains(&input)
            && !self.scalars.contains(&out)
            && reads_at(ao).next().is_none()
            && ai.is_none_or(|ai| !self.arrays[ai].written && reads_at(ai).all(|j| j <= k))
    }

    /// Use slot `input` wherever the run used slot `out`: the result it stored there (checked
    /// by [`Fused::can_share`] for the run that writes it) goes into `input`, whose reads then
    /// take that array; a run that only reads `out` reads `input` instead.
    pub(super) fn rename(&mut self, out: usize, input: usize) {
        let written = self.arrays.iter().position(|a| a.slot == out && a.written);
        let slots = (self.scalars.iter_mut()).chain(self.shapes.iter_mut().map(|(s, _)| s));
        for slot in slots.chain(self.arrays.iter_mut().map(|a| &mut a.slot)) {
            if *slot == out {
                *slot = input;
            }
        }
        let Some(mut ao) = written else { return };
        while let Some(ai) =
            (self.arrays.iter().enumerate()).position(|(a, arr)| a != ao && arr.slot == input)
        {
            self.arrays.remove(ai);
            let remap = move |a: usize| match a {
                a if a == ai => ao - usize::from(ao > ai),
                a if a > ai => a - 1,
                a => a,
            };
            for op in &mut self.ops {
                for o in &mut op.ins {
                    if let Operand::Array(a) = o {
                        *a = remap(*a);
                    }
                }
                op.store = op.store.map(remap);
            }
            ao = remap(ao);
        }
    }
}

/// Round every element to the nearest fp16 (ties to even) in place, bit-identical to
/// [`round_to_fp16`] (which converts through `half`: F16C when the CPU has it, else in software)
/// but in one pass of F16C conversions when available.
pub(crate) fn round_fp16(y: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") && std::arch::is_x86_feature_detected!("f16c") {
        // SAFETY: the CPU features the function enables were just detected.
        unsafe { round_f16c(y) };
        return;
    }
    round_to_fp16(y);
}

/// [`round_fp16`] with F16C: 8 values to fp16 and back per instruction pair (round to nearest
/// even, the mode `half` converts with); the tail through [`round_to_fp16`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx,f16c")]
unsafe fn round_f16c(y: &mut [f32]) {
    use std::arch::x86_64::{
        _mm256_cvtph_ps, _mm256_cvtps_ph, _mm256_loadu_ps, _mm256_storeu_ps,
        _MM_FROUND_TO_NEAREST_INT,
    };
    let mut chunks = y.chunks_exact_mut(8);
    for c in &mut chunks {
        let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm256_loadu_ps(c.as_ptr()));
        _mm256_storeu_ps(c.as_mut_ptr(), _mm256_cvtph_ps(h));
    }
    round_to_fp16(chunks.into_remainder());
}

/// out[i] = f(a[i], b[i]) over one chunk.
fn map2(out: &mut [f32], a: &[f32], b: &[f32], f: impl Fn(f32, f32) -> f32) {
    out.iter_mut()
        .zip(a.iter().zip(b))
        .for_each(|(o, (&x, &y))| *o = f(x, y));
}

/// Evaluate `kernel` on one chunk of operands (each `out.len()` long, but an upsample's whole
/// input), elements `at..` of the run, without rounding.
fn apply(kernel: Kernel, ins: &[&[f32]], at: usize, out: &mut [f32]) {
    // A constant op per arm, so each loop is specialised (and vectorised) for it.
    macro_rules! binary {
        ($b:expr, $($k:ident),*) => {
            match $b {
                $(Binary::$k => map2(out, ins[0], ins[1], |x, y| Binary::$k.apply(x, y)),)*
            }
        };
    }
    macro_rules! compare {
        ($c:expr, $($k:ident),*) => {
            match $c {
                $(Compare::$k => map2(out, ins[0], ins[1], |x, y| {
                    f32::from(u8::from(Compare::$k.apply(x, y)))
                }),)*
            }
        };
    }
    match kernel {
        Kernel::Unary(u) => u.map(ins[0], out),
        Kernel::Binary(b) => {
            binary!(b, Add, Sub, Mul, RealDiv, Maximum, Minimum, Pow)
        }
        Kernel::Compare(c) => {
            compare!(c, Greater, Less, Equal, NotEqual, LessEqual, GreaterEqual)
        }
        // Zipped (no bounds checks) and chosen by a bit mask (all ones where c != 0, NaN
        // included), so the choice compiles to vector ands.
        Kernel::Select => out
            .iter_mut()
            .zip(ins[0].iter().zip(ins[1].iter().zip(ins[2])))
            .for_each(|(o, (&c, (&a, &b)))| {
                let m = u32::from(c != 0.0).wrapping_neg();
                *o = f32::from_bits((a.to_bits() & m) | (b.to_bits() & !m));
            }),
        Kernel::Upsample { row, h, w } => upsample_range(ins[0], [row, h, w], at, out),
    }
}

impl Fused {
    /// Run the fused steps on the slot buffers (split over the rayon pool for long runs).
    pub(super) fn run(&self, bufs: &mut [Buf]) {
        let scalars: Vec<f32> = self.scalars.iter().map(|&s| bufs[s].data[0]).collect();
        let mut owned: Vec<Vec<f32>> = self
            .arrays
            .iter()
            .filter(|a| a.written)
            .map(|a| std::mem::take(&mut bufs[a.slot].data))
            .collect();
        {
            let shared: Vec<&[f32]> = self
                .arrays
                .iter()
                .filter(|a| !a.written)
                .map(|a| bufs[a.slot].data.as_slice())
                .collect();
            let threads = rayon::current_num_threads();
            if self.len >= PAR_MIN_ELEMS && threads > 1 {
                let part = self.len.div_ceil(threads).div_ceil(CHUNK) * CHUNK;
                let mut parts: Vec<Vec<&mut [f32]>> =
                    (0..self.len.div_ceil(part)).map(|_| Vec::new()).collect();
                for o in &mut owned {
                    for (t, c) in o.chunks_mut(part).enumerate() {
                        parts[t].push(c);
                    }
                }
                parts.into_par_iter().enumerate().for_each(|(t, mut p)| {
                    let first = t * part;
                    let count = part.min(self.len - first);
                    self.range(first, count, &shared, &mut p, &scalars);
                });
            } else {
                let mut parts: Vec<&mut [f32]> = owned.iter_mut().map(Vec::as_mut_slice).collect();
                self.range(0, self.len, &shared, &mut parts, &scalars);
            }
        }
        let written = self.arrays.iter().filter(|a| a.written);
        for (a, data) in written.zip(owned) {
            bufs[a.slot].data = data;
        }
        for (slot, shape) in &self.shapes {
            bufs[*slot].shape.clone_from(shape);
        }
    }

    /// Elements `first..first + count` (the range every `owned` part covers): each chunk
    /// through every op in order.
    fn range(
        &self,
        first: usize,
        count: usize,
        shared: &[&[f32]],
        owned: &mut [&mut [f32]],
        scalars: &[f32],
    ) {
        let n_ops = self.ops.len();
        let mut local = vec![0f32; (n_ops + scalars.len()) * CHUNK];
        let (results, splat) = local.split_at_mut(n_ops * CHUNK);
        for (s, &v) in splat.chunks_mut(CHUNK).zip(scalars) {
            s.fill(v);
        }
        // Written and read-only arrays in `arrays` order.
        let src: Vec<(bool, usize)> = {
            let (mut w, mut r) = (0, 0);
            self.arrays
                .iter()
                .map(|a| {
                    let k = if a.written { &mut w } else { &mut r };
                    *k += 1;
                    (a.written, *k - 1)
                })
                .collect()
        };
        for off in (0..count).step_by(CHUNK) {
            let n = CHUNK.min(count - off);
            let (at, abs) = (off..off + n, first + off..first + off + n);
            for (i, op) in self.ops.iter().enumerate() {
                let (done, rest) = results.split_at_mut(i * CHUNK);
                let y = &mut rest[..n];
                {
                    let operand = |o: &Operand| -> &[f32] {
                        match *o {
                            Operand::Local(j) => &done[j * CHUNK..j * CHUNK + n],
                            Operand::Scalar(k) => &splat[k * CHUNK..k * CHUNK + n],
                            Operand::Array(a) => match src[a] {
                                (true, w) => &owned[w][at.clone()],
                                (false, r) => &shared[r][abs.clone()],
                            },
                            // Never written by the run (see the module doc).
                            Operand::Coarse(a) => match src[a] {
                                (true, w) => &owned[w][..],
                                (false, r) => shared[r],
                            },
                        }
                    };
                    let mut ins: [&[f32]; 3] = [&[]; 3];
                    for (d, o) in ins.iter_mut().zip(&op.ins) {
                        *d = operand(o);
                    }
                    match (&op.table, op.kernel.arith()) {
                        (Some(t), _) => t.eval(ins[0], y),
                        (None, Some(a)) if op.round => fused_arith::rounded(a, ins[0], ins[1], y),
                        (None, _) => {
                            apply(op.kernel, &ins, abs.start, y);
                            if op.round {
                                round_fp16(y);
                            }
                        }
                    }
                }
                if let Some(a) = op.store {
                    owned[src[a].1][at.clone()].copy_from_slice(y);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use half::f16;

    use crate::exec::reference::handoff::ref_program;
    use crate::exec::reference::test_support::compile_reference_for_test;
    use crate::exec::{PortData, Precision};
    use crate::ops::elementwise::Compare;

    /// Round to the nearest fp16, as the contract rounds every op's output.
    fn r(v: f32) -> f32 {
        f16::from_f32(v).to_f32()
    }

    /// The one-pass rounding equals the executor's rounding pass bit for bit on a spread of f32
    /// bit patterns (every fp16 tie and overflow region is hit), NaN payloads included, for
    /// lengths with and without an 8-element tail.
    #[test]
    fn round_fp16_matches_round_to_fp16_bit_for_bit() {
        let mut x: Vec<f32> = (0..=u32::MAX / 4093)
            .map(|k| f32::from_bits(k.wrapping_mul(4093)))
            .collect();
        x.extend([
            f32::NAN,
            -0.0,
            65520.0,
            65519.99,
            f32::from_bits(0x7f80_0001),
        ]);
        for len in [x.len(), x.len() - 3] {
            let (mut got, mut want) = (x[..len].to_vec(), x[..len].to_vec());
            super::round_fp16(&mut got);
            super::round_to_fp16(&mut want);
            for (g, w) in got.iter().zip(&want) {
                assert_eq!(g.to_bits(), w.to_bits());
            }
        }
    }

    /// A chain of IEEE-exact ops (a scalar input, a value read twice, a comparison and a select)
    /// runs as one fused step and matches the per-op rounded arithmetic written out here bit for
    /// bit, on a short run and on one long enough for the rayon split.
    #[test]
    fn a_fused_chain_matches_per_op_rounding_bit_for_bit() {
        for (rows, n) in [(1, 1000), (7, 70_007)] {
            let x = crate::input(&[rows, n / rows]).unwrap();
            let s = crate::input(&[1]).unwrap();
            let a = x.mul_scalar(0.3).unwrap().add_scalar(1.0).unwrap();
            let b = a.sqrt().unwrap().sub(&x).unwrap().div(&a).unwrap();
            let pos = b.compare_scalar(Compare::Greater, 0.0).unwrap();
            let y = crate::select(&pos, &b.mul(&s).unwrap(), &a).unwrap();
            let (mut net, dir) = compile_reference_for_test(&y, Precision::Fp16, "train-fuse");
            let rp = ref_program(&mut *net.loaded).expect("a reference program");
            assert_eq!(rp.steps.iter().filter(|st| st.fused.is_some()).count(), 1);
            assert_eq!(rp.steps.len(), 1, "every step fused");
            let xs: Vec<f32> = (0..n).map(|i| (i * 37 % 400) as f32 / 50.0).collect();
            let sv = 1.7f32;
            let got = net
                .run(&[PortData::F32(&xs), PortData::F32(&[sv])])
                .unwrap();
            let _ = std::fs::remove_dir_all(dir);
            let sv = r(sv);
            for (i, &g) in got[0].iter().enumerate() {
                let x = r(xs[i]);
                let a = r(r(x * r(0.3)) + 1.0);
                let b = r(r(r(a.sqrt()) - x) / a);
                let want = if b > 0.0 { r(b * sv) } else { a };
                assert_eq!(
                    g.to_bits(),
                    want.to_bits(),
                    "n = {n}, element {i}: {g} vs {want}"
                );
            }
        }
    }

    /// A max-pool-backward-like graph: the mask `x == up(y)` is built before a step of
    /// another length (`g = 2·y + 1`), and is read once by the select of `up(g)`. The mask and
    /// its upsample move down to the select and run in its fused step (2 steps, not 3), and
    /// the results match the per-op rounded arithmetic written out here bit for bit.
    #[test]
    fn single_reader_masks_sink_into_their_run() {
        let [n, c, h, w] = [2, 3, 4, 6];
        let x = crate::input(&[n, c, 2 * h, 2 * w]).unwrap();
        let y = crate::input(&[n, c, h, w]).unwrap();
        let eq = x
            .compare(Compare::Equal, &y.upsample(2, 2).unwrap())
            .unwrap();
        let g = y.mul_scalar(2.0).unwrap().add_scalar(1.0).unwrap();
        let z = crate::select(&eq, &g.upsample(2, 2).unwrap(), &x).unwrap();
        let (mut net, dir) = compile_reference_for_test(&z, Precision::Fp16, "sink-masks");
        let rp = ref_program(&mut *net.loaded).expect("a reference program");
        assert_eq!(rp.steps.len(), 2, "the mask runs with the select");
        let up = |i: usize| (i / (2 * w) / 2) * w + i % (2 * w) / 2;
        let ys: Vec<f32> = (0..n * c * h * w).map(|i| (i % 7) as f32 / 4.0).collect();
        let xs: Vec<f32> = (0..4 * ys.len())
            .map(|i| if i % 3 == 0 { ys[up(i)] } else { 9.0 })
            .collect();
        let got = net.run(&[PortData::F32(&xs), PortData::F32(&ys)]).unwrap();
        let _ = std::fs::remove_dir_all(dir);
        for (i, &got) in got[0].iter().enumerate() {
            let yv = r(ys[up(i)]);
            let want = if r(xs[i]) == yv {
                r(r(yv * 2.0) + 1.0)
            } else {
                r(xs[i])
            };
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "element {i}: {got} vs {want}"
            );
        }
    }

    /// Nearest-neighbour upsamples join a run (2×2 and 1×3 factors; rows that cut across the
    /// chunks and the rayon split): one fused step whose results match the per-op rounded
    /// arithmetic written out here bit for bit, the upsampled value never stored.
    #[test]
    fn upsamples_fuse_and_match_per_op_rounding_bit_for_bit() {
        for ([n, c, h, w], [sh, sw]) in [([2, 3, 4, 5], [2, 2]), ([4, 8, 50, 21], [1, 3])] {
            let x = crate::input(&[n, c, h, w]).unwrap();
            let y = crate::input(&[n, c, h * sh, w * sw]).unwrap();
            let u = x.upsample(sh, sw).unwrap();
            let eq = y.compare(Compare::Equal, &u).unwrap();
            let z = crate::select(&eq, &y.mul(&u).unwrap(), &y).unwrap();
            let (mut net, dir) = compile_reference_for_test(&z, Precision::Fp16, "fuse-upsample");
            let rp = ref_program(&mut *net.loaded).expect("a reference program");
            assert_eq!(rp.steps.len(), 1, "every step fused");
            let (ow, len) = (w * sw, n * c * h * sh * w * sw);
            let xs: Vec<f32> = (0..n * c * h * w)
                .map(|i| (i * 37 % 101) as f32 / 8.0)
                .collect();
            let up = |i: usize| xs[(i / ow / sh) * w + i % ow / sw];
            let ys: Vec<f32> = (0..len)
                .map(|i| if i % 3 == 0 { up(i) } else { (i % 13) as f32 })
                .collect();
            let got = net.run(&[PortData::F32(&xs), PortData::F32(&ys)]).unwrap();
            let _ = std::fs::remove_dir_all(dir);
            for (i, &g) in got[0].iter().enumerate() {
                let (uv, yv) = (r(up(i)), r(ys[i]));
                let want = if yv == uv { r(yv * uv) } else { yv };
                assert_eq!(g.to_bits(), want.to_bits(), "element {i}: {g} vs {want}");
            }
        }
    }
}
