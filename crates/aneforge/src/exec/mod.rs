//! Executors: the `Executor` trait the ANE (e5rt) and reference (CPU) executors implement,
//! port data, and input validation shared by both.

pub mod ane;
pub mod reference;

use half::f16;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::program::{PortSpec, Program};

/// Numeric mode of the reference executor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Precision {
    /// Every op output rounded to fp16 (the device contract).
    #[default]
    Fp16,
    /// No rounding between ops or of inputs (for gradient checks and measuring fp16's cost).
    Fp32,
}

impl Precision {
    /// Parse `fp16` / `float16` or `fp32` / `float32`.
    pub fn parse(s: &str) -> Result<Precision> {
        match s {
            "fp16" | "float16" => Ok(Precision::Fp16),
            "fp32" | "float32" => Ok(Precision::Fp32),
            _ => Err(Error::value("compile", format!("unknown precision '{s}' (expected fp16 or fp32)"))),
        }
    }
}

/// A backend that can run programs.
pub trait Executor {
    /// Short name reported as the device (`ane`, `reference`).
    fn name(&self) -> &'static str;
    /// Whether it can run here; the error names the exact step that failed.
    fn check(&self) -> Result<()>;
    /// Prepare a program for execution (buffers allocated, constants loaded).
    fn load(&self, program: &Program, precision: Precision) -> Result<Box<dyn Loaded>>;
}

/// Host data written into an input port.
#[derive(Clone, Copy, Debug)]
pub enum PortData<'a> {
    F32(&'a [f32]),
    F64(&'a [f64]),
    F16(&'a [f16]),
    U8(&'a [u8]),
}

impl PortData<'_> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            PortData::F32(d) => d.len(),
            PortData::F64(d) => d.len(),
            PortData::F16(d) => d.len(),
            PortData::U8(d) => d.len(),
        }
    }
    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A program ready to run with named input and output buffers.
pub trait Loaded: Send {
    /// Name of the executor running it.
    fn device(&self) -> &'static str;
    /// Input ports in feeding order.
    fn inputs(&self) -> &[PortSpec];
    /// Output ports.
    fn outputs(&self) -> &[PortSpec];
    /// Write input `index` (length, dtype and value checks; see [`check_port_data`]).
    fn set_input(&mut self, index: usize, data: PortData) -> Result<()>;
    /// Run the program on the current inputs.
    fn execute(&mut self) -> Result<()>;
    /// Copy output `index` into `out` (length = the port's element count), as f32.
    fn read_output(&self, index: usize, out: &mut [f32]) -> Result<()>;
    /// After every execute, input `input` holds output `output` (resident state). Must be
    /// called before the first execute; shapes and dtypes must match.
    fn alias(&mut self, output: &str, input: &str) -> Result<()>;
}

/// Check port data against its spec: element count, dtype family, and for fp16 ports that
/// every value is finite and representable (|x| ≤ 65504). Errors name the port and the value.
pub fn check_port_data(port: &PortSpec, data: &PortData) -> Result<()> {
    let op = format!("input '{}'", port.name);
    if data.len() != port.numel() {
        return Err(Error::shape(op, format!("expects {} elements (shape {:?}), got {}", port.numel(), port.shape, data.len())));
    }
    match (port.dtype, data) {
        (DType::Uint8, PortData::U8(_)) => Ok(()),
        (DType::Uint8, _) => Err(Error::dtype(op, format!("is a uint8 port (shape {:?}); pass uint8 data", port.shape))),
        (DType::Fp16, PortData::U8(_)) => Err(Error::dtype(op, format!("is an fp16 port (shape {:?}); pass float data", port.shape))),
        (DType::Fp16, d) => {
            let bad = |i: usize, v: f64| {
                let what = if v.is_finite() { "overflows fp16 (|x| > 65504)" } else { "is not finite" };
                Err(Error::value(op.clone(), format!("element {i} = {v} {what} (shape {:?})", port.shape)))
            };
            match d {
                PortData::F32(x) => match x.iter().position(|v| !f16::from_f32(*v).is_finite()) {
                    Some(i) => bad(i, x[i] as f64),
                    None => Ok(()),
                },
                PortData::F64(x) => match x.iter().position(|v| !f16::from_f64(*v).is_finite()) {
                    Some(i) => bad(i, x[i]),
                    None => Ok(()),
                },
                PortData::F16(x) => match x.iter().position(|v| !v.is_finite()) {
                    Some(i) => bad(i, x[i].to_f64()),
                    None => Ok(()),
                },
                PortData::U8(_) => unreachable!("matched above"),
            }
        }
        (DType::Bool, _) => Err(Error::dtype(op, "bool ports do not exist")),
    }
}
