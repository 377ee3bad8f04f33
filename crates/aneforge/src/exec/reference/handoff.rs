//! Hand-offs between programs of one segmented plan without conversion passes. In fp16 mode a
//! program's port buffers are fp16 while its value buffers are f32 holding fp16-exact numbers;
//! a plan that moves a value from one region to the next (or to and from a host stage) can read
//! and write those f32 value buffers directly: no f32 → fp16 store after the producer, no
//! fp16 → f32 load before the consumer, and the numbers are the same bits either way.
//!
//! The contract: [`RefProgram::handoff_input`] marks input `j` as fed for the next execute (its
//! port buffer is skipped once); the caller writes fp16-exact values (in fp16 mode). An output
//! marked with [`RefProgram::lazy_output`] is not stored into its fp16 port buffer by execute;
//! `read_output` reads the value buffer and `output_view` / `alias` store the port on demand, so
//! every reader still sees the same numbers.

use super::{PortBuf, RefProgram};
use crate::error::{Error, Result};
use crate::exec::Loaded;
use crate::program::PortSpec;

/// Per-port hand-off state of one loaded program.
#[derive(Debug, Default)]
pub(super) struct Handoff {
    /// Inputs written through `handoff_input` since the last execute.
    fed: Vec<bool>,
    /// fp16 outputs whose port buffer is stored only on demand.
    lazy: Vec<bool>,
    /// fp16 inputs carried from an aliased output in f32 (see [`RefProgram::carry_alias`]):
    /// the value buffer is current, the port buffer is stored only on demand.
    stale: Vec<bool>,
    /// Whether fp16 aliases are carried in f32 (see [`RefProgram::carry_aliases_in_f32`]).
    carry_f32: bool,
    /// Inputs and outputs a view was taken of: their port buffers stay allocated and current
    /// after every execute, since the caller may hold the view across calls.
    viewed_in: Vec<bool>,
    viewed_out: Vec<bool>,
}

impl Handoff {
    pub(super) fn new(n_inputs: usize, n_outputs: usize) -> Handoff {
        Handoff {
            fed: vec![false; n_inputs],
            lazy: vec![false; n_outputs],
            stale: vec![false; n_inputs],
            carry_f32: false,
            viewed_in: vec![false; n_inputs],
            viewed_out: vec![false; n_outputs],
        }
    }

    /// Input `j` has a view from now on (its port buffer is kept current).
    pub(super) fn view_input(&mut self, j: usize) {
        if let Some(v) = self.viewed_in.get_mut(j) {
            *v = true;
        }
    }

    /// Whether a view of input `j` was taken.
    pub(super) fn viewed_input(&self, j: usize) -> bool {
        self.viewed_in.get(j) == Some(&true)
    }

    /// Output `o` has a view from now on: it is stored into its port at every execute.
    pub(super) fn view_output(&mut self, o: usize) {
        if let Some(v) = self.viewed_out.get_mut(o) {
            *v = true;
        }
        if let Some(l) = self.lazy.get_mut(o) {
            *l = false;
        }
    }

    /// Whether a view of output `o` was taken.
    pub(super) fn viewed_output(&self, o: usize) -> bool {
        self.viewed_out.get(o) == Some(&true)
    }

    /// Whether output `o` skips its port store.
    pub(super) fn lazy(&self, o: usize) -> bool {
        self.lazy[o]
    }

    /// Input `j`'s value buffer holds its value for the next execute (skip the port load).
    pub(super) fn feed(&mut self, j: usize) {
        if let Some(f) = self.fed.get_mut(j) {
            *f = true;
        }
    }

    /// Whether input `j` is fed (its port buffer may be stale).
    pub(super) fn fed(&self, j: usize) -> bool {
        self.fed.get(j) == Some(&true)
    }

    /// Input `j` is written through its port again (`set_input`, `input_view`).
    pub(super) fn unfeed(&mut self, j: usize) {
        if let Some(f) = self.fed.get_mut(j) {
            *f = false;
        }
        if let Some(s) = self.stale.get_mut(j) {
            *s = false;
        }
    }
}

/// Read and write back one element per 4 KiB of `v` (volatile, so neither is optimised away):
/// pages a fresh zeroed allocation has not mapped yet are mapped now; no value changes.
pub fn touch_pages<T: Copy>(v: &mut [T]) {
    let step = (4096 / std::mem::size_of::<T>().max(1)).max(1);
    for x in v.iter_mut().step_by(step) {
        let p: *mut T = x;
        // SAFETY: `p` is a valid, aligned, exclusive reference's pointer.
        unsafe { p.write_volatile(p.read_volatile()) };
    }
}

/// The reference program behind `loaded`, when it is one.
pub fn ref_program(loaded: &mut dyn Loaded) -> Option<&mut RefProgram> {
    loaded.as_any_mut()?.downcast_mut::<RefProgram>()
}

/// Port `index` of `specs` exists and is fp16 (an fp16 port buffer, or none in fp32 mode).
fn check_port(op: &str, specs: &[PortSpec], index: usize, port: Option<&PortBuf>) -> Result<()> {
    let Some(spec) = specs.get(index) else {
        return Err(Error::value(
            op,
            format!("port index {index} out of range ({} ports)", specs.len()),
        ));
    };
    match port {
        None | Some(PortBuf::F16(_)) if spec.dtype == crate::DType::Fp16 => Ok(()),
        _ => Err(Error::dtype(
            op,
            format!(
                "port '{}' is {} {:?}; hand-offs are fp16 values only",
                spec.name, spec.dtype, spec.shape
            ),
        )),
    }
}

/// Exchange `a` and `b` when they hold the same number of values (port `spec`'s buffer).
fn swap_same_len(a: &mut Vec<f32>, b: &mut Vec<f32>, spec: &PortSpec) -> Result<()> {
    if a.len() != b.len() {
        return Err(Error::shape(
            format!("port '{}'", spec.name),
            format!(
                "a hand-off of {} values into a buffer of {} ({:?})",
                b.len(),
                a.len(),
                spec.shape
            ),
        ));
    }
    std::mem::swap(a, b);
    Ok(())
}

impl RefProgram {
    /// The f32 values of output `index` (fp16-exact in fp16 mode), straight from the value
    /// buffer; an fp16 or fp32-mode port only (int32 / uint8 ports are a dtype error).
    pub fn handoff_output(&self, index: usize) -> Result<&[f32]> {
        check_port(
            "handoff_output",
            &self.outputs,
            index,
            self.out_ports.get(index),
        )?;
        Ok(&self.bufs[self.output_bufs[index]].data)
    }

    /// The f32 value buffer input `index` is executed from, marked as fed for the next execute
    /// (its port buffer is not loaded). The caller writes every element, fp16-exact in fp16
    /// mode; an fp16 or fp32-mode port only.
    pub fn handoff_input(&mut self, index: usize) -> Result<&mut [f32]> {
        check_port(
            "handoff_input",
            &self.inputs,
            index,
            self.in_ports.get(index),
        )?;
        self.handoff.feed(index);
        Ok(&mut self.bufs[self.input_bufs[index]].data)
    }

    /// Exchange `buf` with the f32 value buffer input `index` executes from (same length; an
    /// fp16 or fp32-mode port, not one sharing its buffer with an aliased output): a plan moves
    /// a value into a region without copying it and swaps it back after the execute (execute
    /// never writes an input's value buffer). `feed` marks the input fed for the next execute,
    /// as [`RefProgram::handoff_input`] does (the swap in, not the swap back).
    pub fn swap_input(&mut self, index: usize, buf: &mut Vec<f32>, feed: bool) -> Result<()> {
        check_port("swap_input", &self.inputs, index, self.in_ports.get(index))?;
        if self.shared.has(index) {
            return Err(Error::value(
                "swap_input",
                format!(
                    "input '{}' shares its buffer with an aliased output",
                    self.inputs[index].name
                ),
            ));
        }
        swap_same_len(
            &mut self.bufs[self.input_bufs[index]].data,
            buf,
            &self.inputs[index],
        )?;
        if feed {
            self.handoff.feed(index);
        }
        Ok(())
    }

    /// The value buffer output `index` is written to (outputs of one value share one), for a
    /// plan to tell apart the buffers it swaps.
    pub fn output_buffer(&self, index: usize) -> Option<usize> {
        self.output_bufs.get(index).copied()
    }

    /// The f32 value buffer of output `index` (an fp16 or fp32-mode port), for a plan to lend
    /// it to its next region with [`RefProgram::swap_input`] and swap it back before anything
    /// else reads it.
    pub(crate) fn output_values_mut(&mut self, index: usize) -> Result<&mut Vec<f32>> {
        check_port(
            "output_values_mut",
            &self.outputs,
            index,
            self.out_ports.get(index),
        )?;
        Ok(&mut self.bufs[self.output_bufs[index]].data)
    }

    /// The f32 value buffer of input `index` when it holds the input's values (see
    /// [`RefProgram::carried_input`]), for a plan to lend it to another program with
    /// [`RefProgram::swap_input`] and swap it back before this one executes; else `None`.
    pub(crate) fn carried_values_mut(&mut self, index: usize) -> Option<&mut Vec<f32>> {
        self.carried_input(index)?;
        Some(&mut self.bufs[self.input_bufs[index]].data)
    }

    /// Store fp16 output `index` only on demand from now on (a plan reads it through
    /// [`RefProgram::handoff_output`] or `read_output`), its port buffer released until then;
    /// other ports are left as they are.
    pub fn lazy_output(&mut self, index: usize) {
        if let (Some(PortBuf::F16(v)), Some(l)) = (
            self.out_ports.get_mut(index),
            self.handoff.lazy.get_mut(index),
        ) {
            *l = true;
            *v = Vec::new();
        }
    }

    /// Map every page of the input and output value buffers and the output port buffers now
    /// (see [`touch_pages`]; no value changes), so a plan's first execute does not fault them
    /// in one by one. Other slots (which a fused run may never write) and input port buffers
    /// (which hand-offs skip) stay unmapped.
    pub fn prefault(&mut self) {
        for &b in self.input_bufs.iter().chain(&self.output_bufs) {
            touch_pages(&mut self.bufs[b].data);
        }
        for p in &mut self.out_ports {
            match p {
                PortBuf::F16(v) => touch_pages(v),
                PortBuf::U8(v) => touch_pages(v),
                PortBuf::I32(v) => touch_pages(v),
            }
        }
    }

    /// Load the input port buffers into the value buffers, except inputs fed by hand-off
    /// (whose flags are cleared for the next execute).
    pub(super) fn load_input_ports(&mut self) {
        for (j, (port, &b)) in self.in_ports.iter().zip(&self.input_bufs).enumerate() {
            if !std::mem::take(&mut self.handoff.fed[j]) {
                port.load_into(&mut self.bufs[b].data);
            }
        }
    }

    /// Store the value buffers into the output port buffers, except lazy outputs.
    pub(super) fn store_output_ports(&mut self) {
        for (o, (port, &b)) in self.out_ports.iter_mut().zip(&self.output_bufs).enumerate() {
            if !self.handoff.lazy[o] {
                port.store_from(&self.bufs[b].data);
            }
        }
    }

    /// Store lazy output `o` into its port buffer (before a view or an alias reads the port).
    pub(super) fn sync_output_port(&mut self, o: usize) {
        if self.handoff.lazy.get(o) == Some(&true) {
            self.out_ports[o].ensure_len(self.outputs[o].numel());
            self.out_ports[o].store_from(&self.bufs[self.output_bufs[o]].data);
        }
    }

    /// Carry fp16 aliases in f32 from now on (for a program whose port buffers nobody holds a
    /// view of between calls, such as the Trainer's): a view taken earlier would not see the
    /// carried values until it is taken again.
    pub fn carry_aliases_in_f32(&mut self) {
        self.handoff.carry_f32 = true;
    }

    /// Alias output `o` → input `i` after an execute. With [`RefProgram::carry_aliases_in_f32`]
    /// an fp16 input takes the output's value
    /// buffer in f32 (rounded to fp16, as a port store and load would) and skips its port at the
    /// next execute; its port buffer is stored only when a view reads it. Other ports copy
    /// their port buffers.
    pub(super) fn carry_alias(&mut self, o: usize, i: usize) {
        if !self.handoff.carry_f32
            || !matches!(self.in_ports[i], PortBuf::F16(_))
            || self.handoff.viewed_input(i)
        {
            self.sync_output_port(o);
            self.in_ports[i].copy_from(&self.out_ports[o]);
            return;
        }
        let dst = self.input_bufs[i];
        super::copy_value(&mut self.bufs, self.output_bufs[o], dst);
        super::train_fuse::round_fp16(&mut self.bufs[dst].data);
        self.handoff.fed[i] = true;
        self.handoff.stale[i] = true;
    }

    /// The f32 values fp16 input `i` executes from when a carried alias left them in its value
    /// buffer (its port buffer not yet stored) or the input shares that buffer with its aliased
    /// output (`share_alias`), else `None` (read the port).
    pub fn carried_input(&self, i: usize) -> Option<&[f32]> {
        (self.handoff.stale.get(i) == Some(&true) || self.shared.has(i))
            .then(|| self.bufs[self.input_bufs[i]].data.as_slice())
    }
}
