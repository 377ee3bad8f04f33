//! The reference executor: a CPU interpreter of the lowered graph under the fp16 contract
//! (every fp16 op output rounded to fp16, round-to-nearest-even; f32 inside ops).

use half::f16;

use super::{check_port_data, Executor, Loaded, PortData, Precision};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::{Buf, Family, Op};
use crate::program::{PortSpec, Program};

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
    fn load(&self, program: &Program, precision: Precision) -> Result<Box<dyn Loaded>> {
        Ok(Box::new(RefProgram::new(program, precision)?))
    }
}

/// One op to run: indices into the buffer table.
struct Step {
    op: Op,
    ins: Vec<usize>,
    outs: Vec<usize>,
    round: Vec<bool>,
}

/// A program loaded on the reference executor: one buffer per graph value.
pub struct RefProgram {
    steps: Vec<Step>,
    bufs: Vec<Buf>,
    inputs: Vec<PortSpec>,
    input_bufs: Vec<usize>,
    outputs: Vec<PortSpec>,
    output_bufs: Vec<usize>,
    aliases: Vec<(usize, usize)>,
    precision: Precision,
    executed: bool,
}

/// Round every element to the nearest fp16 (ties to even; overflow to ±inf).
pub fn round_to_fp16(data: &mut [f32]) {
    use half::slice::HalfFloatSliceExt;
    let mut tmp = [f16::ZERO; 256];
    for chunk in data.chunks_mut(256) {
        let t = &mut tmp[..chunk.len()];
        t.convert_from_f32_slice(chunk);
        t.convert_to_f32_slice(chunk);
    }
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
        for (i, n) in g.nodes.iter().enumerate() {
            match &n.op {
                Op::Input(_) => {}
                Op::Const(c) => {
                    let b = &mut bufs[slot[i][0]];
                    c.eval(&[], std::slice::from_mut(b))?;
                }
                op => steps.push(Step {
                    op: op.clone(),
                    ins: n.inputs.iter().map(|v| slot[v.node][v.port]).collect(),
                    outs: slot[i].clone(),
                    round: n.outputs.iter().map(|t| precision == Precision::Fp16 && t.dtype == DType::Fp16).collect(),
                }),
            }
        }
        Ok(RefProgram {
            steps,
            inputs: program.inputs(),
            input_bufs: g.inputs.iter().map(|&i| slot[i][0]).collect(),
            outputs: program.outputs(),
            output_bufs: g.outputs.iter().map(|(_, v)| slot[v.node][v.port]).collect(),
            bufs,
            aliases: Vec::new(),
            precision,
            executed: false,
        })
    }

    fn port<'a>(ports: &'a [PortSpec], name: &str, what: &str) -> Result<(usize, &'a PortSpec)> {
        ports.iter().enumerate().find(|(_, p)| p.name == name).ok_or_else(|| {
            let names: Vec<&str> = ports.iter().map(|p| p.name.as_str()).collect();
            Error::value("alias", format!("no {what} port named '{name}' (ports: {names:?})"))
        })
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
        let port = self.inputs.get(index).ok_or_else(|| Error::value("set_input", format!("input index {index} out of range ({} inputs)", self.inputs.len())))?;
        check_port_data(port, &data)?;
        let dst = &mut self.bufs[self.input_bufs[index]].data;
        match data {
            PortData::F32(x) => dst.copy_from_slice(x),
            PortData::F64(x) => dst.iter_mut().zip(x).for_each(|(d, &v)| *d = v as f32),
            PortData::F16(x) => dst.iter_mut().zip(x).for_each(|(d, v)| *d = v.to_f32()),
            PortData::U8(x) => dst.iter_mut().zip(x).for_each(|(d, &v)| *d = v as f32),
        }
        if self.precision == Precision::Fp16 && port.dtype == DType::Fp16 && !matches!(data, PortData::F16(_)) {
            round_to_fp16(dst);
        }
        Ok(())
    }

    fn execute(&mut self) -> Result<()> {
        let mut outs: Vec<Buf> = Vec::new();
        for step in &self.steps {
            outs.clear();
            outs.extend(step.outs.iter().map(|&o| std::mem::replace(&mut self.bufs[o], Buf { shape: vec![], data: vec![] })));
            let ins: Vec<&Buf> = step.ins.iter().map(|&i| &self.bufs[i]).collect();
            let r = step.op.family().eval(&ins, &mut outs);
            for ((o, b), &round) in step.outs.iter().zip(outs.drain(..)).zip(&step.round) {
                self.bufs[*o] = b;
                if round {
                    round_to_fp16(&mut self.bufs[*o].data);
                }
            }
            r?;
        }
        for &(out, inp) in &self.aliases {
            let (a, b) = if out < inp { let (l, r) = self.bufs.split_at_mut(inp); (&l[out], &mut r[0]) } else { let (l, r) = self.bufs.split_at_mut(out); (&r[0], &mut l[inp]) };
            b.data.copy_from_slice(&a.data);
        }
        self.executed = true;
        Ok(())
    }

    fn read_output(&self, index: usize, out: &mut [f32]) -> Result<()> {
        let port = self.outputs.get(index).ok_or_else(|| Error::value("read_output", format!("output index {index} out of range ({} outputs)", self.outputs.len())))?;
        if out.len() != port.numel() {
            return Err(Error::shape(format!("output '{}'", port.name), format!("needs {} elements, got a buffer of {}", port.numel(), out.len())));
        }
        out.copy_from_slice(&self.bufs[self.output_bufs[index]].data);
        Ok(())
    }

    fn alias(&mut self, output: &str, input: &str) -> Result<()> {
        if self.executed {
            return Err(Error::value("alias", format!("alias('{output}', '{input}') must be called before the first execute")));
        }
        let (oi, op) = Self::port(&self.outputs, output, "output")?;
        let (ii, ip) = Self::port(&self.inputs, input, "input")?;
        if op.shape != ip.shape || op.dtype != ip.dtype {
            return Err(Error::shape("alias", format!("output '{output}' is {} {:?} but input '{input}' is {} {:?}", op.dtype, op.shape, ip.dtype, ip.shape)));
        }
        self.aliases.push((self.output_bufs[oi], self.input_bufs[ii]));
        Ok(())
    }
}
