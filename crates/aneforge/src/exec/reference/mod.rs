//! The reference executor: a CPU interpreter of the lowered graph under the fp16 contract
//! (every fp16 op output rounded to fp16, round-to-nearest-even; f32 inside ops). In fp16 mode
//! the ports are fp16 / uint8 buffers, like the device's, so views and aliasing behave the same.

mod fp16_table;
mod profile;

use std::path::Path;
use std::sync::Arc;

use half::f16;
use half::slice::HalfFloatSliceExt;

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
use fp16_table::Fp16Table;

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
    fn new(port: &PortSpec) -> PortBuf {
        match port.dtype {
            DType::Uint8 => PortBuf::U8(vec![0; port.numel()]),
            DType::Int32 => PortBuf::I32(vec![0; port.numel()]),
            _ => PortBuf::F16(vec![f16::ZERO; port.numel()]),
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
    fn load_into(&self, dst: &mut [f32]) {
        match self {
            PortBuf::F16(v) => v.convert_to_f32_slice(dst),
            PortBuf::U8(v) => dst.iter_mut().zip(v).for_each(|(d, &b)| *d = b as f32),
            PortBuf::I32(v) => dst.iter_mut().zip(v).for_each(|(d, &b)| *d = b as f32),
        }
    }

    /// Store an executor value buffer (fp16 values are already rounded; uint8 values are
    /// integers; int32 values come from `cast` of fp16, so they are integers within ±65504).
    fn store_from(&mut self, src: &[f32]) {
        match self {
            PortBuf::F16(v) => v.convert_from_f32_slice(src),
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

/// One op to run: indices into the buffer table.
struct Step {
    op: Op,
    ins: Vec<usize>,
    outs: Vec<usize>,
    round: Vec<bool>,
    /// fp16 mode, costly unary ops: the lookup table that replaces kernel + rounding.
    table: Option<Arc<Fp16Table>>,
    /// What a profile reports for this step.
    label: OpLabel,
}

/// A program loaded on the reference executor: one buffer per graph value.
pub struct RefProgram {
    steps: Vec<Step>,
    bufs: Vec<Buf>,
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
}

/// Round every element to the nearest fp16 (ties to even; overflow to ±inf), on the rayon
/// pool for large buffers (each element is rounded on its own, so the split changes no bit).
pub fn round_to_fp16(data: &mut [f32]) {
    use rayon::prelude::*;
    let round = |chunk: &mut [f32]| {
        let mut tmp = [f16::ZERO; 256];
        for c in chunk.chunks_mut(256) {
            let t = &mut tmp[..c.len()];
            t.convert_from_f32_slice(c);
            t.convert_to_f32_slice(c);
        }
    };
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
    /// Allocate buffers, evaluate constants, and order the steps.
    pub fn new(program: &Program, precision: Precision) -> Result<RefProgram> {
        let g = &program.graph;
        let mut slot = Vec::with_capacity(g.nodes.len());
        let mut bufs = Vec::new();
        for n in &g.nodes {
            slot.push((bufs.len()..bufs.len() + n.outputs.len()).collect::<Vec<_>>());
            bufs.extend(n.outputs.iter().map(|t| Buf::zeros(&t.shape)));
        }
        let mut steps = Vec::new();
        let mut tables = Vec::new();
        for (i, n) in g.nodes.iter().enumerate() {
            match &n.op {
                Op::Input(_) => {}
                // Constants, compressed ones included, are evaluated once at load.
                Op::Const(_) | Op::Constexpr(_) => {
                    let b = &mut bufs[slot[i][0]];
                    n.op.family().eval(&[], std::slice::from_mut(b))?;
                }
                op => {
                    let round: Vec<bool> = n
                        .outputs
                        .iter()
                        .map(|t| precision == Precision::Fp16 && t.dtype == DType::Fp16)
                        .collect();
                    steps.push(Step {
                        op: op.clone(),
                        ins: n.inputs.iter().map(|v| slot[v.node][v.port]).collect(),
                        outs: slot[i].clone(),
                        table: step_table(op, &round, &mut tables),
                        round,
                        label: profile::step_label(g, i),
                    })
                }
            }
        }
        let (inputs, outputs) = (program.inputs(), program.outputs());
        let fp16 = precision == Precision::Fp16;
        Ok(RefProgram {
            steps,
            in_ports: if fp16 {
                inputs.iter().map(PortBuf::new).collect()
            } else {
                Vec::new()
            },
            out_ports: if fp16 {
                outputs.iter().map(PortBuf::new).collect()
            } else {
                Vec::new()
            },
            inputs,
            input_bufs: g.inputs.iter().map(|&i| slot[i][0]).collect(),
            outputs,
            output_bufs: g
                .outputs
                .iter()
                .map(|(_, v)| slot[v.node][v.port])
                .collect(),
            bufs,
            aliases: Vec::new(),
            executed: false,
            timing: None,
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
        match self.in_ports.get_mut(index) {
            Some(p) => p.view().write(data),
            None => {
                let dst = &mut self.bufs[self.input_bufs[index]].data;
                match data {
                    PortData::F32(x) => dst.copy_from_slice(x),
                    PortData::F64(x) => dst.iter_mut().zip(x).for_each(|(d, &v)| *d = v as f32),
                    PortData::F16(x) => x.convert_to_f32_slice(dst),
                    PortData::U8(x) => dst.iter_mut().zip(x).for_each(|(d, &v)| *d = v as f32),
                    PortData::I32(x) => dst.iter_mut().zip(x).for_each(|(d, &v)| *d = v as f32),
                }
            }
        }
        Ok(())
    }

    fn execute(&mut self) -> Result<()> {
        for (port, &b) in self.in_ports.iter().zip(&self.input_bufs) {
            port.load_into(&mut self.bufs[b].data);
        }
        let mut outs: Vec<Buf> = Vec::new();
        for step in &self.steps {
            let span = profile::begin(&mut self.timing);
            if let Some(t) = &step.table {
                let (i, o) = (step.ins[0], step.outs[0]);
                let mut y = std::mem::take(&mut self.bufs[o].data);
                t.eval(&self.bufs[i].data, &mut y);
                self.bufs[o].data = y;
                profile::end(&mut self.timing, span, &step.label);
                continue;
            }
            outs.clear();
            outs.extend(step.outs.iter().map(|&o| {
                std::mem::replace(
                    &mut self.bufs[o],
                    Buf {
                        shape: vec![],
                        data: vec![],
                    },
                )
            }));
            let ins: Vec<&Buf> = step.ins.iter().map(|&i| &self.bufs[i]).collect();
            let r = step.op.family().eval(&ins, &mut outs);
            for ((o, b), &round) in step.outs.iter().zip(outs.drain(..)).zip(&step.round) {
                self.bufs[*o] = b;
                if round {
                    round_to_fp16(&mut self.bufs[*o].data);
                }
            }
            r?;
            profile::end(&mut self.timing, span, &step.label);
        }
        for (port, &b) in self.out_ports.iter_mut().zip(&self.output_bufs) {
            port.store_from(&self.bufs[b].data);
        }
        for &(o, i) in &self.aliases {
            if self.in_ports.is_empty() {
                let (src, dst) = (self.output_bufs[o], self.input_bufs[i]);
                if src != dst {
                    let (lo, hi) = self.bufs.split_at_mut(src.max(dst));
                    let (s, d) = if src < dst {
                        (&lo[src], &mut hi[0])
                    } else {
                        (&hi[0], &mut lo[dst])
                    };
                    d.data.copy_from_slice(&s.data);
                }
            } else {
                self.in_ports[i].copy_from(&self.out_ports[o]);
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
            Some(p) => p.load_into(out),
            None => out.copy_from_slice(&self.bufs[self.output_bufs[index]].data),
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
        Ok(())
    }

    fn input_view(&mut self, index: usize) -> Result<PortView<'_>> {
        Self::view(&mut self.in_ports, index, self.inputs.len(), "input_view")
    }

    fn output_view(&mut self, index: usize) -> Result<PortView<'_>> {
        Self::view(
            &mut self.out_ports,
            index,
            self.outputs.len(),
            "output_view",
        )
    }
}
