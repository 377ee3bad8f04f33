//! The reference executor: a CPU interpreter of the lowered graph under the fp16 contract
//! (every fp16 op output rounded to fp16, round-to-nearest-even; f32 inside ops). In fp16 mode
//! the ports are fp16 / uint8 buffers, like the device's, so views and aliasing behave the same.

mod alias;
pub(crate) mod conv_epilogue;
mod epilogue_lanes;
mod fp16_table;
mod fused_arith;
mod gguf_gemv;
mod gguf_gemv_avx2;
pub mod handoff;
mod in_place;
mod memory_plan;
mod norm_fuse;
mod packed;
mod profile;
mod reshape_move;
mod row_fuse;
mod shared_weight;
mod softmax_fuse;
pub mod threads;
pub(crate) mod train_fuse;
mod transpose_fold;

use std::path::Path;
use std::sync::Arc;

use crate::ops::simd_fp16::{narrow, widen};
use half::f16;
use half::vec::HalfBitsVecExt;

use super::profile::{OpLabel, Profile};
use super::{
    alias_ports, checked_input, checked_output, not_int32, Executor, Loaded, PortData, PortView,
    Precision,
};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::kernel::PAR_MIN_ELEMS;
use crate::ops::{Buf, Op};
use crate::program::{PortSpec, Program};
use conv_epilogue::Epilogue;
use fp16_table::Fp16Table;
pub use memory_plan::MemoryReport;
use memory_plan::{plan_slots, PlanStep};
use packed::PackedWeight;
use shared_weight::SharedWeight;

/// The CPU reference executor (always available).
#[derive(Debug, Default)]
pub struct Reference;

impl Executor for Reference {
    fn name(&self) -> &'static str {
        "reference"
    }
    fn check(&self) -> Result<()> {
        Ok(())
    }
    fn load(
        &self,
        program: &Program,
        _dir: &Path,
        precision: Precision,
    ) -> Result<Box<dyn Loaded>> {
        Ok(Box::new(RefProgram::new(program, precision)?))
    }
}

/// A port buffer in fp16 mode: what the host writes and reads, and what views point at.
enum PortBuf {
    F16(Vec<f16>),
    U8(Vec<u8>),
    I32(Vec<i32>),
}

impl PortBuf {
    /// A zeroed buffer for `port`, allocated zeroed (pages a port never uses are not touched).
    fn new(port: &PortSpec) -> PortBuf {
        match port.dtype {
            DType::Uint8 => PortBuf::U8(vec![0; port.numel()]),
            DType::Int32 => PortBuf::I32(vec![0; port.numel()]),
            _ => PortBuf::F16(vec![0u16; port.numel()].reinterpret_into()),
        }
    }

    fn view(&mut self) -> PortView<'_> {
        match self {
            PortBuf::F16(v) => PortView::F16(v),
            PortBuf::U8(v) => PortView::U8(v),
            PortBuf::I32(v) => PortView::I32(v),
        }
    }

    /// Widen into an executor value buffer (int32 values feed only `cast`, whose fp16 result
    /// is the same whether or not the f32 step rounded an integer beyond 2^24).
    fn bytes(&self) -> u64 {
        match self {
            PortBuf::F16(v) => 2 * v.len() as u64,
            PortBuf::U8(v) => v.len() as u64,
            PortBuf::I32(v) => 4 * v.len() as u64,
        }
    }

    fn load_into(&self, dst: &mut [f32]) {
        match self {
            PortBuf::F16(v) => widen(v, dst),
            PortBuf::U8(v) => dst.iter_mut().zip(v).for_each(|(d, &b)| *d = b as f32),
            PortBuf::I32(v) => dst.iter_mut().zip(v).for_each(|(d, &b)| *d = b as f32),
        }
    }

    /// Store an executor value buffer (fp16 values are already rounded; uint8 values are
    /// integers; int32 values come from `cast` of fp16, so they are integers within ±65504).
    fn store_from(&mut self, src: &[f32]) {
        match self {
            PortBuf::F16(v) => narrow(src, v),
            PortBuf::U8(v) => v.iter_mut().zip(src).for_each(|(d, &x)| *d = x as u8),
            PortBuf::I32(v) => v.iter_mut().zip(src).for_each(|(d, &x)| *d = x as i32),
        }
    }

    fn copy_from(&mut self, other: &PortBuf) {
        match (self, other) {
            (PortBuf::F16(d), PortBuf::F16(s)) => d.copy_from_slice(s),
            (PortBuf::U8(d), PortBuf::U8(s)) => d.copy_from_slice(s),
            (PortBuf::I32(d), PortBuf::I32(s)) => d.copy_from_slice(s),
            _ => unreachable!("alias checked that the dtypes match"),
        }
    }
}

/// One op to run: indices into the slot table (see [`memory_plan`]) and the output shapes.
struct Step {
    op: Op,
    ins: Vec<usize>,
    outs: Vec<usize>,
    out_shapes: Vec<Vec<usize>>,
    round: Vec<bool>,
    /// fp16 mode, costly unary ops: the lookup table that replaces kernel + rounding.
    table: Option<Arc<Fp16Table>>,
    /// A matmul over a compressed weight kept compressed (see `packed`).
    packed: Option<PackedWeight>,
    /// A matmul over a dense fp16 weight expanded once per process, or a GEMV reading an fp16
    /// weight in place (see `shared_weight`).
    shared: Option<SharedWeight>,
    /// A conv whose following elementwise ops run in its output pass (see `conv_epilogue`).
    epilogue: Option<Epilogue>,
    /// A binary elementwise op whose kernel rounds its fp16 output in its own pass.
    rounds_in_kernel: bool,
    /// What a profile reports for this step.
    label: OpLabel,
    /// A reshape that takes its dying input's buffer (see `reshape_move`).
    moves_input: bool,
    /// A matmul reading transposes folded into it (see `transpose_fold`).
    views: Option<transpose_fold::Views>,
    /// A run of elementwise steps executed as one (see `train_fuse`); the fields above are unused.
    fused: Option<Box<train_fuse::Fused>>,
    /// Ops run as one row kernel (a norm, an add + softmax: see `row_fuse`).
    row: Option<Box<row_fuse::RowStep>>,
}

/// A program loaded on the reference executor: one buffer per slot of its memory plan.
pub struct RefProgram {
    steps: Vec<Step>,
    bufs: Vec<Buf>,
    /// Elements read and written by all steps (the thread policy's measure of work).
    work: usize,
    memory: MemoryReport,
    inputs: Vec<PortSpec>,
    input_bufs: Vec<usize>,
    outputs: Vec<PortSpec>,
    output_bufs: Vec<usize>,
    /// fp16 mode: the input and output port buffers; empty in fp32 mode (values stay f32).
    in_ports: Vec<PortBuf>,
    out_ports: Vec<PortBuf>,
    /// (output index, input index) pairs from `alias`.
    aliases: Vec<(usize, usize)>,
    executed: bool,
    /// Set only during `execute_profiled`: each step becomes one op span.
    timing: Option<Profile>,
    /// Plan hand-offs that bypass the port buffers (see [`handoff`]).
    handoff: handoff::Handoff,
    /// Aliased inputs sharing their output's value buffer (see [`alias`]).
    shared: alias::Shared,
}

/// Copy value buffer `src` into `dst` (same length; nothing when they are the same slot).
fn copy_value(bufs: &mut [Buf], src: usize, dst: usize) {
    if src != dst {
        let (lo, hi) = bufs.split_at_mut(src.max(dst));
        let (s, d) = if src < dst {
            (&lo[src], &mut hi[0])
        } else {
            (&hi[0], &mut lo[dst])
        };
        d.data.copy_from_slice(&s.data);
    }
}

/// Round every element to the nearest fp16 (ties to even; overflow to ±inf), on the rayon
/// pool for large buffers (each element is rounded on its own, so the split changes no bit).
pub fn round_to_fp16(data: &mut [f32]) {
    use rayon::prelude::*;
    let round = crate::ops::simd_fp16::round_in_place;
    if data.len() >= PAR_MIN_ELEMS {
        data.par_chunks_mut(PAR_MIN_ELEMS / 4).for_each(round);
    } else {
        round(data);
    }
}

/// The table of a costly unary step whose one output is rounded to fp16 (built once per
/// distinct op in `cache`), or `None`.
fn step_table(op: &Op, round: &[bool], cache: &mut Vec<Arc<Fp16Table>>) -> Option<Arc<Fp16Table>> {
    let Op::Unary(u) = op else { return None };
    if round != [true] {
        return None;
    }
    if let Some(t) = cache.iter().find(|t| t.op() == *u) {
        return Some(t.clone());
    }
    let t = Arc::new(Fp16Table::new(*u)?);
    cache.push(t.clone());
    Some(t)
}

impl RefProgram {
    /// Elements its steps read and write per execute (the thread policy's measure of work).
    pub fn work(&self) -> usize {
        self.work
    }

    /// Plan and allocate the slots, evaluate constants, and order the steps.
    pub fn new(program: &Program, precision: Precision) -> Result<RefProgram> {
        let g = &program.graph;
        // Graph values, numbered node by node, port by port.
        let mut value = Vec::with_capacity(g.nodes.len());
        let mut shapes: Vec<&[usize]> = Vec::new();
        for n in &g.nodes {
            value.push((shapes.len()..shapes.len() + n.outputs.len()).collect::<Vec<_>>());
            shapes.extend(n.outputs.iter().map(|t| t.shape.as_slice()));
        }
        let numel: Vec<usize> = shapes.iter().map(|s| crate::shape::numel(s)).collect();
        let is_const = |i: usize| matches!(g.nodes[i].op, Op::Const(_) | Op::Constexpr(_));
        // Weights read only by packed matmuls stay in their stored form (no dense copy).
        let mut packed = packed::packed_matmuls(g);
        let mut shared = shared_weight::shared_weights(g);
        let weight_step: Vec<bool> = (packed.iter().zip(&shared))
            .map(|(p, s)| p.is_some() || s.is_some())
            .collect();
        let only_packed = shared_weight::only_weight_uses(g, &weight_step);
        let mut pinned = vec![false; numel.len()];
        let outputs_v: Vec<usize> = g
            .outputs
            .iter()
            .map(|(_, v)| value[v.node][v.port])
            .collect();
        let inputs_v: Vec<usize> = g.inputs.iter().map(|&i| value[i][0]).collect();
        let consts_v: Vec<usize> = (0..g.nodes.len())
            .filter(|&i| is_const(i))
            .map(|i| value[i][0])
            .collect();
        for &v in inputs_v.iter().chain(&outputs_v).chain(&consts_v) {
            pinned[v] = true;
        }
        let (mut chains, mut absorbed) = conv_epilogue::find_chains_after(g, &weight_step);
        let heads: Vec<bool> = (weight_step.iter().zip(&chains))
            .map(|(&w, c)| w || c.is_some())
            .collect();
        let (mut views, folded) = transpose_fold::find(g, &heads);
        absorbed.iter_mut().zip(&folded).for_each(|(a, &f)| *a |= f);
        let taken: Vec<bool> = (0..g.nodes.len())
            .map(|i| absorbed[i] || heads[i] || views[i].is_some())
            .collect();
        let (mut rows, in_row) = if precision == Precision::Fp16 {
            row_fuse::find(g, &taken)
        } else {
            ((0..g.nodes.len()).map(|_| None).collect(), vec![])
        };
        absorbed.iter_mut().zip(&in_row).for_each(|(a, &f)| *a |= f);
        let ops: Vec<usize> = (0..g.nodes.len())
            .filter(|&i| !is_const(i) && !absorbed[i] && !matches!(g.nodes[i].op, Op::Input(_)))
            .collect();
        let mut step_of: Vec<usize> = (0..g.nodes.len()).collect();
        for (last, chain) in chains.iter().enumerate() {
            for j in chain
                .iter()
                .flat_map(|c| std::iter::once(c.conv).chain(c.folded()))
            {
                step_of[j] = last;
            }
        }
        for (last, row) in rows.iter().enumerate() {
            row.iter()
                .flat_map(|r| r.nodes())
                .for_each(|&j| step_of[j] = last);
        }
        let ops = train_fuse::sink(g, &ops, &step_of);
        let step_ins: Vec<Vec<usize>> = ops
            .iter()
            .map(|&i| match (&chains[i], &rows[i]) {
                (Some(c), _) => c.inputs(g).iter().map(|v| value[v.node][v.port]).collect(),
                (_, Some(r)) => r.inputs().iter().map(|v| value[v.node][v.port]).collect(),
                _ => (g.nodes[i].inputs.iter().enumerate())
                    .map(|(p, &v)| transpose_fold::source(views[i].as_ref(), p, v))
                    .map(|v| value[v.node][v.port])
                    .collect(),
            })
            .collect();
        let plan_steps: Vec<PlanStep> = ops
            .iter()
            .zip(&step_ins)
            .map(|(&i, ins)| PlanStep {
                ins,
                outs: &value[i],
            })
            .collect();
        let plan = plan_slots(&numel, &pinned, &plan_steps);
        let slot = |v: usize| plan.slot_of[v];
        // Slots of constants kept packed get no buffer (allocating and freeing them would leave
        // touched heap pages behind).
        let mut packed_slot = vec![false; plan.slot_len.len()];
        for i in (0..g.nodes.len()).filter(|&i| only_packed[i]) {
            packed_slot[slot(value[i][0])] = true;
        }
        let mut bufs: Vec<Buf> = (plan.slot_len.iter().zip(&packed_slot))
            .map(|(&l, &p)| Buf::zeros(&[if p { 0 } else { l }]))
            .collect();
        for (v, s) in shapes.iter().enumerate().filter(|&(v, _)| pinned[v]) {
            bufs[slot(v)].shape = s.to_vec();
        }
        // Constants, compressed ones included, are evaluated once at load.
        for i in (0..g.nodes.len()).filter(|&i| is_const(i) && !only_packed[i]) {
            let b = &mut bufs[slot(value[i][0])];
            g.nodes[i].op.family().eval(&[], std::slice::from_mut(b))?;
        }
        let mut steps = Vec::new();
        let mut tables = Vec::new();
        let mut work = 0usize;
        let rounds = |i: usize| -> Vec<bool> {
            g.nodes[i]
                .outputs
                .iter()
                .map(|t| precision == Precision::Fp16 && t.dtype == DType::Fp16)
                .collect()
        };
        for (k, (&i, ins)) in ops.iter().zip(&step_ins).enumerate() {
            let n = &g.nodes[i];
            let round = rounds(i);
            work = ins
                .iter()
                .chain(&value[i])
                .fold(work, |w, &v| w.saturating_add(numel[v]));
            let chain = chains[i].take();
            let epilogue = chain
                .as_ref()
                .map(|c| {
                    c.epilogue(
                        g,
                        |j| rounds(j) == [true],
                        |op| step_table(op, &[true], &mut tables),
                    )
                })
                .or_else(|| Epilogue::bare(g, i, round == [true]));
            let run = chain.as_ref().map_or(i, |c| c.conv);
            let row = rows[i].take().map(Box::new);
            let rounds_in_kernel = matches!(n.op, Op::Binary(_))
                && round == [true]
                && epilogue.is_none()
                && row.is_none();
            let label = match &row {
                Some(r) => profile::group_label(g, i, r.name(), r.nodes(), r.inputs()),
                None => profile::step_label(g, i, chain.as_ref()),
            };
            steps.push(Step {
                op: g.nodes[run].op.clone(),
                ins: ins.iter().map(|&v| slot(v)).collect(),
                outs: value[i].iter().map(|&v| slot(v)).collect(),
                out_shapes: n.outputs.iter().map(|t| t.shape.clone()).collect(),
                table: step_table(&n.op, &round, &mut tables).filter(|_| epilogue.is_none()),
                packed: packed[run].take(),
                shared: shared[run].take(),
                epilogue,
                rounds_in_kernel,
                label,
                moves_input: reshape_move::moves_input(
                    &n.op,
                    chain.is_some(),
                    k,
                    ins,
                    &plan.last_use,
                    &pinned,
                ),
                views: views[i].take(),
                round,
                fused: None,
                row,
            })
        }
        let step_values: Vec<(Vec<usize>, Vec<usize>)> = ops
            .iter()
            .zip(step_ins)
            .map(|(&i, ins)| (ins, value[i].clone()))
            .collect();
        let steps = train_fuse::fuse(steps, &step_values, &numel, &pinned);
        let (inputs, outputs) = (program.inputs(), program.outputs());
        let fp16 = precision == Precision::Fp16;
        let ports = |specs: &[PortSpec]| -> Vec<PortBuf> {
            if fp16 {
                specs.iter().map(PortBuf::new).collect()
            } else {
                Vec::new()
            }
        };
        let (in_ports, out_ports) = (ports(&inputs), ports(&outputs));
        let bytes =
            |vs: &mut dyn Iterator<Item = usize>| -> u64 { vs.map(|v| 4 * numel[v] as u64).sum() };
        let dense_consts = (0..g.nodes.len()).filter(|&i| is_const(i) && !only_packed[i]);
        let weight_bytes = bytes(&mut dense_consts.map(|i| value[i][0]))
            + steps
                .iter()
                .filter_map(|s| s.packed.as_ref())
                .map(PackedWeight::stored_bytes)
                .sum::<u64>()
            + steps
                .iter()
                .filter_map(|s| s.shared.as_ref())
                .map(SharedWeight::bytes)
                .sum::<u64>();
        let mut io_v: Vec<usize> = inputs_v
            .iter()
            .chain(&outputs_v)
            .copied()
            .filter(|v| !consts_v.contains(v))
            .collect();
        io_v.sort_unstable();
        io_v.dedup();
        let io_bytes = bytes(&mut io_v.into_iter())
            + in_ports
                .iter()
                .chain(&out_ports)
                .map(PortBuf::bytes)
                .sum::<u64>();
        // Values folded into a conv epilogue have no slot.
        let mut planned: Vec<usize> = (0..numel.len())
            .filter(|&v| !pinned[v])
            .map(slot)
            .filter(|&s| s != usize::MAX)
            .collect();
        planned.sort_unstable();
        planned.dedup();
        let activation_bytes = planned.iter().map(|&s| 4 * plan.slot_len[s] as u64).sum();
        let unplanned_activation_bytes = bytes(&mut (0..numel.len()).filter(|&v| !pinned[v]));
        Ok(RefProgram {
            handoff: handoff::Handoff::new(inputs.len(), outputs.len()),
            steps,
            work,
            memory: MemoryReport {
                weight_bytes,
                activation_bytes,
                io_bytes,
                peak_bytes: weight_bytes + activation_bytes + io_bytes,
                unplanned_activation_bytes,
            },
            in_ports,
            out_ports,
            inputs,
            input_bufs: inputs_v.iter().map(|&v| slot(v)).collect(),
            outputs,
            output_bufs: outputs_v.iter().map(|&v| slot(v)).collect(),
            bufs,
            aliases: Vec::new(),
            executed: false,
            timing: None,
            shared: alias::Shared::default(),
        })
    }

    /// Port `index` of `n` as a view; fp32 programs have no port buffers.
    fn view<'a>(
        ports: &'a mut [PortBuf],
        index: usize,
        n: usize,
        op: &str,
    ) -> Result<PortView<'a>> {
        if index >= n {
            return Err(Error::value(
                op,
                format!("port index {index} out of range ({n} ports)"),
            ));
        }
        match ports.get_mut(index) {
            Some(p) => Ok(p.view()),
            None => Err(Error::value(op, "views need precision='fp16' (this program was loaded with precision='fp32', whose values are not fp16 buffers)")),
        }
    }
}

/// Run `steps` in order on the slot buffers `bufs`; each output slot takes its value's shape.
fn run_steps(steps: &[Step], bufs: &mut [Buf], timing: &mut Option<Profile>) -> Result<()> {
    let mut outs: Vec<Buf> = Vec::new();
    for step in steps {
        let span = profile::begin(timing);
        if let Some(f) = &step.fused {
            f.run(bufs);
            profile::end(timing, span, &step.label);
            continue;
        }
        if let Some(r) = &step.row {
            let o = step.outs[0];
            let mut y = std::mem::take(&mut bufs[o].data);
            let ins: Vec<&Buf> = step.ins.iter().map(|&s| &bufs[s]).collect();
            r.run(&ins, &mut y);
            bufs[o].data = y;
            bufs[o].shape.clone_from(&step.out_shapes[0]);
            profile::end(timing, span, &step.label);
            continue;
        }
        if step.moves_input {
            reshape_move::run(step, bufs);
            profile::end(timing, span, &step.label);
            continue;
        }
        if let Some(p) = in_place::aliased_operand(step) {
            in_place::run(step, p, bufs)?;
            profile::end(timing, span, &step.label);
            continue;
        }
        if let Some(t) = &step.table {
            let (i, o) = (step.ins[0], step.outs[0]);
            let mut y = std::mem::take(&mut bufs[o].data);
            t.eval(&bufs[i].data, &mut y);
            bufs[o].data = y;
            bufs[o].shape.clone_from(&step.out_shapes[0]);
            profile::end(timing, span, &step.label);
            continue;
        }
        if step.packed.is_some() || step.shared.is_some() {
            let (i, o) = (step.ins[0], step.outs[0]);
            let mut y = std::mem::take(&mut bufs[o].data);
            let r = match &step.packed {
                Some(w) => w.matmul(&bufs[i], &mut y),
                None => step
                    .shared
                    .as_ref()
                    .map_or(Ok(()), |w| w.run(bufs, &step.ins, &mut y)),
            };
            bufs[o].shape.clone_from(&step.out_shapes[0]);
            let mut out = Buf {
                data: y,
                shape: std::mem::take(&mut bufs[o].shape),
            };
            match &step.epilogue {
                Some(e) => {
                    let ins: Vec<&Buf> = step.ins.iter().map(|&s| &bufs[s]).collect();
                    e.run_rows(&ins, &mut out);
                }
                None if step.round[0] => round_to_fp16(&mut out.data),
                None => {}
            }
            bufs[o] = out;
            r?;
            profile::end(timing, span, &step.label);
            continue;
        }
        outs.clear();
        outs.extend(step.outs.iter().zip(&step.out_shapes).map(|(&o, shape)| {
            let mut b = std::mem::replace(
                &mut bufs[o],
                Buf {
                    shape: vec![],
                    data: vec![],
                },
            );
            b.shape.clone_from(shape);
            b
        }));
        let ins: Vec<&Buf> = step.ins.iter().map(|&i| &bufs[i]).collect();
        let r = match (&step.op, &step.epilogue, &step.views) {
            (Op::Binary(b), ..) if step.rounds_in_kernel => {
                b.eval_rounded(&ins, &mut outs);
                Ok(())
            }
            (Op::Conv(c), Some(e), _) => e.run_conv(c, &ins, &mut outs),
            (Op::MatMul(mm), _, Some(v)) => transpose_fold::run(mm, v, &ins, &mut outs),
            (op, ..) => op.family().eval(&ins, &mut outs),
        };
        for ((o, b), &round) in step.outs.iter().zip(outs.drain(..)).zip(&step.round) {
            bufs[*o] = b;
            if round && step.epilogue.is_none() && !step.rounds_in_kernel {
                round_to_fp16(&mut bufs[*o].data);
            }
        }
        r?;
        profile::end(timing, span, &step.label);
    }
    Ok(())
}

impl Loaded for RefProgram {
    fn device(&self) -> &'static str {
        "reference"
    }
    fn inputs(&self) -> &[PortSpec] {
        &self.inputs
    }
    fn outputs(&self) -> &[PortSpec] {
        &self.outputs
    }

    fn set_input(&mut self, index: usize, data: PortData) -> Result<()> {
        checked_input(&self.inputs, index, &data)?;
        if self.set_shared_input(index, &data) {
            return Ok(());
        }
        self.handoff.unfeed(index);
        match self.in_ports.get_mut(index) {
            Some(p) => p.view().write(data),
            None => {
                let dst = &mut self.bufs[self.input_bufs[index]].data;
                match data {
                    PortData::F32(x) => dst.copy_from_slice(x),
                    PortData::F64(x) => dst.iter_mut().zip(x).for_each(|(d, &v)| *d = v as f32),
                    PortData::F16(x) => widen(x, dst),
                    PortData::U8(x) => dst.iter_mut().zip(x).for_each(|(d, &v)| *d = v as f32),
                    PortData::I32(x) => dst.iter_mut().zip(x).for_each(|(d, &v)| *d = v as f32),
                }
            }
        }
        Ok(())
    }

    fn execute(&mut self) -> Result<()> {
        self.load_input_ports();
        let (steps, bufs, timing) = (&self.steps, &mut self.bufs, &mut self.timing);
        threads::run(self.work, || run_steps(steps, bufs, timing))?;
        self.store_output_ports();
        for a in 0..self.aliases.len() {
            let (o, i) = self.aliases[a];
            if self.shared.has(i) {
                self.after_shared_execute(i);
            } else if self.in_ports.is_empty() {
                copy_value(&mut self.bufs, self.output_bufs[o], self.input_bufs[i]);
            } else {
                self.carry_alias(o, i);
            }
        }
        self.executed = true;
        Ok(())
    }

    fn execute_profiled(&mut self, profile: &mut Profile) -> Result<()> {
        self.timing = Some(std::mem::take(profile));
        let r = self.execute();
        *profile = self.timing.take().unwrap_or_default();
        r
    }

    fn read_output(&self, index: usize, out: &mut [f32]) -> Result<()> {
        checked_output(&self.outputs, index, out.len())?;
        match self.out_ports.get(index) {
            Some(p) if !self.handoff.lazy(index) => p.load_into(out),
            _ => out.copy_from_slice(&self.bufs[self.output_bufs[index]].data),
        }
        Ok(())
    }

    fn read_output_i32(&self, index: usize, out: &mut [i32]) -> Result<()> {
        let port = checked_output(&self.outputs, index, out.len())?;
        match self.out_ports.get(index) {
            Some(PortBuf::I32(v)) => out.copy_from_slice(v),
            None if port.dtype == DType::Int32 => {
                let src = &self.bufs[self.output_bufs[index]].data;
                out.iter_mut().zip(src).for_each(|(o, &v)| *o = v as i32);
            }
            _ => return Err(not_int32(port)),
        }
        Ok(())
    }

    fn alias(&mut self, output: &str, input: &str) -> Result<()> {
        let (oi, ii) = alias_ports(self.executed, &self.outputs, &self.inputs, output, input)?;
        self.aliases.push((oi, ii));
        self.share_alias(oi, ii);
        Ok(())
    }

    fn memory(&self) -> Option<MemoryReport> {
        Some(self.memory)
    }

    fn as_any_mut(&mut self) -> Option<&mut dyn std::any::Any> {
        Some(self)
    }

    fn input_view(&mut self, index: usize) -> Result<PortView<'_>> {
        self.sync_input_port(index);
        self.handoff.unfeed(index);
        self.handoff.view_input(index);
        Self::view(&mut self.in_ports, index, self.inputs.len(), "input_view")
    }

    fn output_view(&mut self, index: usize) -> Result<PortView<'_>> {
        self.sync_output_port(index);
        self.handoff.view_output(index);
        Self::view(
            &mut self.out_ports,
            index,
            self.outputs.len(),
            "output_view",
        )
    }
}

/// Helpers shared by the executor's unit tests.
#[cfg(test)]
pub(crate) mod test_support {
    /// Test helper: `y` compiled for the reference executor at `precision` into a per-process temp
    /// build dir named by `tag`; returns the program and that dir (the caller removes it).
    pub(crate) fn compile_reference_for_test(
        y: &crate::graph::Tensor,
        precision: crate::exec::Precision,
        tag: &str,
    ) -> (crate::compile::Compiled, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!(
            "aneforge-{tag}-{}-{precision:?}",
            std::process::id()
        ));
        let opts = crate::compile::CompileOptions {
            device: crate::compile::Device::Reference,
            precision,
            build_dir: Some(dir.clone()),
            ..Default::default()
        };
        let compiled = crate::compile::compile(&[(None, y.clone())], &opts).unwrap();
        (compiled, dir)
    }
}
