//! Running a plan: each region loaded on the chosen executor, host stages in-process. Every plan
//! value has one host slot (f32 storage of fp16, exact int32); a region reads its inputs from
//! the slots and writes its outputs back, a host kernel works on the slots directly. fp16
//! outputs of host kernels are rounded to fp16 (the reference executor's contract) unless the
//! plan runs with `precision="fp32"`.

use std::collections::HashMap;
use std::path::Path;

use half::slice::HalfFloatSliceExt;

use super::file::REGIONS;
use super::{Plan, Stage};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::exec::profile::{Profile, SpanKind};
use crate::exec::reference::round_to_fp16;
use crate::exec::{
    alias_ports, checked_input, checked_output, not_int32, Executor, Loaded, PortData, PortView,
    Precision,
};
use crate::ops::host::{Elems, HostOp, HostTensor};
use crate::ops::Family;
use crate::program::{PortSpec, KEY_LEN};

enum Step {
    Region {
        loaded: Box<dyn Loaded>,
        ins: Vec<usize>,
        outs: Vec<usize>,
    },
    Host {
        op: HostOp,
        ins: Vec<usize>,
        outs: Vec<usize>,
    },
}

/// A plan loaded on an executor: implements [`Loaded`], so it runs wherever one program does.
pub struct PlanLoaded {
    device: &'static str,
    steps: Vec<Step>,
    slots: Vec<HostTensor>,
    inputs: Vec<PortSpec>,
    input_slots: Vec<usize>,
    outputs: Vec<PortSpec>,
    output_slots: Vec<usize>,
    round: bool,
    aliases: Vec<(usize, usize)>,
    executed: bool,
    /// Set only during `execute_profiled`: each stage becomes one span.
    timing: Option<Profile>,
}

fn port(v: &super::CutValue) -> PortSpec {
    PortSpec {
        name: v.name.clone(),
        dtype: v.ty.dtype,
        shape: v.ty.shape.clone(),
    }
}

/// Name the stage in an error raised while it ran (op-naming variants get a `stage k` prefix).
fn in_stage(e: Error, k: usize, what: &str) -> Error {
    let tag = |op: String| format!("stage {k} ({what}): {op}");
    match e {
        Error::Shape { op, msg } => Error::Shape { op: tag(op), msg },
        Error::DType { op, msg } => Error::DType { op: tag(op), msg },
        Error::Value { op, msg } => Error::Value { op: tag(op), msg },
        Error::Runtime { op, msg } => Error::Runtime { op: tag(op), msg },
        other => other,
    }
}

impl PlanLoaded {
    /// Load every region of `plan` (written under `dir/regions/`) on `executor`; the plan was
    /// fully checked before, so a failure here is the executor's (and releases what loaded).
    pub fn load(
        plan: &Plan,
        dir: &Path,
        executor: &dyn Executor,
        precision: Precision,
    ) -> Result<PlanLoaded> {
        let index: HashMap<&str, usize> = plan
            .values
            .iter()
            .enumerate()
            .map(|(i, v)| (v.name.as_str(), i))
            .collect();
        let slot = |name: &str| -> Result<usize> {
            index.get(name).copied().ok_or_else(|| {
                Error::value("plan", format!("value '{name}' is not in the values table"))
            })
        };
        let slots_of = |names: &mut dyn Iterator<Item = &str>| -> Result<Vec<usize>> {
            names.map(slot).collect()
        };
        let mut steps = Vec::with_capacity(plan.stages.len());
        for stage in &plan.stages {
            steps.push(match stage {
                Stage::Region { program, .. } => {
                    let rdir = dir.join(REGIONS).join(&program.sha256[..KEY_LEN]);
                    let loaded = executor.load(program, &rdir, precision)?;
                    let ins = slots_of(&mut loaded.inputs().iter().map(|p| p.name.as_str()))?;
                    let outs = slots_of(&mut loaded.outputs().iter().map(|p| p.name.as_str()))?;
                    Step::Region { loaded, ins, outs }
                }
                Stage::Host {
                    op,
                    inputs,
                    outputs,
                } => Step::Host {
                    op: op.clone(),
                    ins: slots_of(&mut inputs.iter().map(String::as_str))?,
                    outs: slots_of(&mut outputs.iter().map(String::as_str))?,
                },
            });
        }
        let slots = plan
            .values
            .iter()
            .map(|v| HostTensor::zeros(&v.ty))
            .collect::<Result<Vec<_>>>()?;
        Ok(PlanLoaded {
            device: executor.name(),
            steps,
            slots,
            inputs: plan.inputs.iter().map(port).collect(),
            input_slots: slots_of(&mut plan.inputs.iter().map(|v| v.name.as_str()))?,
            outputs: plan.outputs.iter().map(port).collect(),
            output_slots: slots_of(&mut plan.outputs.iter().map(|v| v.name.as_str()))?,
            round: precision == Precision::Fp16,
            aliases: Vec::new(),
            executed: false,
            timing: None,
        })
    }

    fn run_step(
        step: &mut Step,
        slots: &mut [HostTensor],
        round: bool,
        timing: Option<&mut Profile>,
    ) -> Result<()> {
        match step {
            Step::Region { loaded, ins, outs } => {
                for (k, &s) in ins.iter().enumerate() {
                    feed(loaded.as_mut(), k, &slots[s])?;
                }
                match timing {
                    Some(p) => loaded.execute_profiled(p)?,
                    None => loaded.execute()?,
                }
                for (k, &s) in outs.iter().enumerate() {
                    match &mut slots[s].data {
                        Elems::F32(v) => loaded.read_output(k, v)?,
                        Elems::I32(v) => loaded.read_output_i32(k, v)?,
                    }
                }
                Ok(())
            }
            Step::Host { op, ins, outs } => {
                let mut results: Vec<HostTensor> = outs
                    .iter()
                    .map(|&s| std::mem::replace(&mut slots[s], empty()))
                    .collect();
                let args: Vec<&HostTensor> = ins.iter().map(|&s| &slots[s]).collect();
                let r = op.kernel().run(&args, &mut results);
                for (&s, mut t) in outs.iter().zip(results) {
                    if let (true, Elems::F32(v)) = (round, &mut t.data) {
                        round_to_fp16(v);
                    }
                    slots[s] = t;
                }
                r
            }
        }
    }
}

fn empty() -> HostTensor {
    HostTensor {
        shape: Vec::new(),
        data: Elems::F32(Vec::new()),
    }
}

/// Write slot `t` into input `k` of a region (fp16 values go in as f32, int32 exactly, uint8 narrowed).
fn feed(loaded: &mut dyn Loaded, k: usize, t: &HostTensor) -> Result<()> {
    match (&t.data, loaded.inputs()[k].dtype) {
        (Elems::F32(v), DType::Uint8) => {
            let bytes: Vec<u8> = v.iter().map(|&x| x as u8).collect();
            loaded.set_input(k, PortData::U8(&bytes))
        }
        (Elems::F32(v), _) => loaded.set_input(k, PortData::F32(v)),
        (Elems::I32(v), _) => loaded.set_input(k, PortData::I32(v)),
    }
}

impl Loaded for PlanLoaded {
    fn device(&self) -> &'static str {
        self.device
    }
    fn inputs(&self) -> &[PortSpec] {
        &self.inputs
    }
    fn outputs(&self) -> &[PortSpec] {
        &self.outputs
    }

    fn set_input(&mut self, index: usize, data: PortData) -> Result<()> {
        checked_input(&self.inputs, index, &data)?;
        let slot = &mut self.slots[self.input_slots[index]];
        match (&mut slot.data, data) {
            (Elems::I32(d), PortData::I32(x)) => d.copy_from_slice(x),
            (Elems::F32(d), PortData::F32(x)) => d.copy_from_slice(x),
            (Elems::F32(d), PortData::F64(x)) => {
                d.iter_mut().zip(x).for_each(|(d, &v)| *d = v as f32)
            }
            (Elems::F32(d), PortData::F16(x)) => x.convert_to_f32_slice(d),
            (Elems::F32(d), PortData::U8(x)) => {
                d.iter_mut().zip(x).for_each(|(d, &v)| *d = v as f32)
            }
            _ => unreachable!("checked_input matched the port dtype"),
        }
        if let (true, Elems::F32(d)) = (self.round, &mut slot.data) {
            round_to_fp16(d);
        }
        Ok(())
    }

    fn execute(&mut self) -> Result<()> {
        for (k, step) in self.steps.iter_mut().enumerate() {
            let what = match step {
                Step::Region { .. } => "region",
                Step::Host { op, .. } => op.name(),
            };
            let span = self.timing.as_mut().map(|p| {
                p.stage = Some(k);
                p.open()
            });
            let r = Self::run_step(step, &mut self.slots, self.round, self.timing.as_mut());
            if let (Some(p), Some(o)) = (self.timing.as_mut(), span) {
                p.close(o, format!("stage {k} ({what})"), SpanKind::Stage, None);
                p.stage = None;
            }
            r.map_err(|e| in_stage(e, k, what))?;
        }
        for &(o, i) in &self.aliases {
            let (src, dst) = (self.output_slots[o], self.input_slots[i]);
            if src != dst {
                self.slots[dst] = self.slots[src].clone();
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
        match &self.slots[self.output_slots[index]].data {
            Elems::F32(v) => out.copy_from_slice(v),
            Elems::I32(v) => out.iter_mut().zip(v).for_each(|(o, &x)| *o = x as f32),
        }
        Ok(())
    }

    fn read_output_i32(&self, index: usize, out: &mut [i32]) -> Result<()> {
        let port = checked_output(&self.outputs, index, out.len())?;
        match &self.slots[self.output_slots[index]].data {
            Elems::I32(v) => out.copy_from_slice(v),
            Elems::F32(_) => return Err(not_int32(port)),
        }
        Ok(())
    }

    fn alias(&mut self, output: &str, input: &str) -> Result<()> {
        let (oi, ii) = alias_ports(self.executed, &self.outputs, &self.inputs, output, input)?;
        self.aliases.push((oi, ii));
        Ok(())
    }

    fn input_view(&mut self, _index: usize) -> Result<PortView<'_>> {
        Err(Error::NotImplemented("input_view: views of a segmented plan's ports are not implemented (pass arrays to the call instead)".into()))
    }

    fn output_view(&mut self, _index: usize) -> Result<PortView<'_>> {
        Err(Error::NotImplemented("output_view: views of a segmented plan's ports are not implemented (read the call's result instead)".into()))
    }
}
