//! Executors: the `Executor` trait the ANE (e5rt) and reference (CPU) executors implement,
//! port data and zero-copy port views, and input validation shared by both.

pub mod ane;
pub mod clock;
pub mod profile;
pub mod reference;

use std::path::Path;

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
            _ => Err(Error::value(
                "compile",
                format!("unknown precision '{s}' (expected fp16 or fp32)"),
            )),
        }
    }
}

/// A backend that can run programs.
pub trait Executor {
    /// Short name reported as the device (`ane`, `reference`).
    fn name(&self) -> &'static str;
    /// Whether it can run here; the error names the exact step that failed.
    fn check(&self) -> Result<()>;
    /// Prepare a program written to `dir` (`model.mil`, `weights.bin`) for execution.
    fn load(&self, program: &Program, dir: &Path, precision: Precision) -> Result<Box<dyn Loaded>>;
}

/// Host data written into an input port.
#[derive(Clone, Copy, Debug)]
pub enum PortData<'a> {
    F32(&'a [f32]),
    F64(&'a [f64]),
    F16(&'a [f16]),
    U8(&'a [u8]),
    /// Exact integers for an int32 port.
    I32(&'a [i32]),
}

impl PortData<'_> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            PortData::F32(d) => d.len(),
            PortData::F64(d) => d.len(),
            PortData::F16(d) => d.len(),
            PortData::U8(d) => d.len(),
            PortData::I32(d) => d.len(),
        }
    }
    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A port's buffer seen in place: dense row-major elements in the port's dtype.
#[derive(Debug)]
pub enum PortView<'a> {
    F16(&'a mut [f16]),
    U8(&'a mut [u8]),
    I32(&'a mut [i32]),
}

impl PortView<'_> {
    /// Copy port data already validated by [`check_port_data`] into this buffer (floats are rounded to fp16).
    pub fn write(self, data: PortData) {
        use crate::ops::simd_fp16::narrow;
        match (self, data) {
            (PortView::F16(d), PortData::F32(x)) => narrow(x, d),
            (PortView::F16(d), PortData::F64(x)) => d
                .iter_mut()
                .zip(x)
                .for_each(|(d, &v)| *d = f16::from_f32(v as f32)),
            (PortView::F16(d), PortData::F16(x)) => d.copy_from_slice(x),
            (PortView::U8(d), PortData::U8(x)) => d.copy_from_slice(x),
            (PortView::I32(d), PortData::I32(x)) => d.copy_from_slice(x),
            _ => unreachable!("check_port_data matched the dtype"),
        }
    }
}

/// Input port `index` of `inputs`, after checking `data` against it (see [`check_port_data`]).
pub fn checked_input<'a>(
    inputs: &'a [PortSpec],
    index: usize,
    data: &PortData,
) -> Result<&'a PortSpec> {
    let port = inputs.get(index).ok_or_else(|| {
        Error::value(
            "set_input",
            format!("input index {index} out of range ({} inputs)", inputs.len()),
        )
    })?;
    check_port_data(port, data)?;
    Ok(port)
}

/// Output port `index` of `outputs`, after checking that a buffer of `buffer_len` elements fits it.
pub fn checked_output(outputs: &[PortSpec], index: usize, buffer_len: usize) -> Result<&PortSpec> {
    let port = outputs.get(index).ok_or_else(|| {
        Error::value(
            "read_output",
            format!(
                "output index {index} out of range ({} outputs)",
                outputs.len()
            ),
        )
    })?;
    if buffer_len != port.numel() {
        return Err(Error::shape(
            format!("output '{}'", port.name),
            format!(
                "needs {} elements, got a buffer of {buffer_len}",
                port.numel()
            ),
        ));
    }
    Ok(port)
}

/// The dtype error of `read_output_i32` on an output `port` that is not int32.
pub fn not_int32(port: &PortSpec) -> Error {
    Error::dtype(
        "read_output_i32",
        format!("output '{}' is {}, not int32", port.name, port.dtype),
    )
}

/// Validates `alias(output, input)`: refused once the program has executed, ports looked up by
/// name, and both must have the same dtype and shape; returns (output index, input index).
pub fn alias_ports(
    executed: bool,
    outputs: &[PortSpec],
    inputs: &[PortSpec],
    output: &str,
    input: &str,
) -> Result<(usize, usize)> {
    if executed {
        return Err(Error::value(
            "alias",
            format!("alias('{output}', '{input}') must be called before the first execute"),
        ));
    }
    let oi = port_index(outputs, Some(output), "alias", "output")?;
    let ii = port_index(inputs, Some(input), "alias", "input")?;
    let (op, ip) = (&outputs[oi], &inputs[ii]);
    if op.shape != ip.shape || op.dtype != ip.dtype {
        return Err(Error::shape(
            "alias",
            format!(
                "output '{output}' is {} {:?} but input '{input}' is {} {:?}",
                op.dtype, op.shape, ip.dtype, ip.shape
            ),
        ));
    }
    Ok((oi, ii))
}

/// Index of the port named `name` in `ports` (`None`: the only port); errors list the names.
pub fn port_index(ports: &[PortSpec], name: Option<&str>, op: &str, what: &str) -> Result<usize> {
    let names = || ports.iter().map(|p| p.name.as_str()).collect::<Vec<_>>();
    match name {
        Some(n) => ports.iter().position(|p| p.name == n).ok_or_else(|| {
            Error::value(
                op,
                format!("no {what} port named '{n}' ({what}s: {:?})", names()),
            )
        }),
        None if ports.len() == 1 => Ok(0),
        None => Err(Error::value(
            op,
            format!(
                "the program has {} {what}s {:?}; name one",
                ports.len(),
                names()
            ),
        )),
    }
}

/// A program ready to run with named input and output buffers. `Send` but not `Sync`: a
/// program is used by one thread at a time (share it across threads behind a lock).
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
    /// [`Loaded::execute`], recording spans into `profile`: per op on the reference executor,
    /// per stage in plans; by default the whole program as one [`profile::SpanKind::Program`] span.
    fn execute_profiled(&mut self, profile: &mut profile::Profile) -> Result<()> {
        let span = profile.open();
        let r = self.execute();
        let name = format!("program ({})", self.device());
        profile.close(span, name, profile::SpanKind::Program, None);
        r
    }
    /// Copy output `index` into `out` (length = the port's element count), as f32.
    fn read_output(&self, index: usize, out: &mut [f32]) -> Result<()>;
    /// Copy int32 output `index` into `out` exactly (length = the port's element count).
    fn read_output_i32(&self, index: usize, out: &mut [i32]) -> Result<()> {
        let port = checked_output(self.outputs(), index, out.len())?;
        Err(Error::NotImplemented(format!(
            "read_output_i32: output '{}' is {} and the {} executor reads int32 outputs only from int32 ports",
            port.name,
            port.dtype,
            self.device()
        )))
    }
    /// Every output, in order, as freshly allocated f32 vectors.
    fn read_outputs(&self) -> Result<Vec<Vec<f32>>> {
        (0..self.outputs().len())
            .map(|i| {
                let mut out = vec![0.0; self.outputs()[i].numel()];
                self.read_output(i, &mut out)?;
                Ok(out)
            })
            .collect()
    }
    /// After every execute, input `input` holds output `output` (resident state). Must be
    /// called before the first execute; shapes and dtypes must match.
    fn alias(&mut self, output: &str, input: &str) -> Result<()>;
    /// The buffer input `index` is read from; its address is fixed while the program is loaded.
    fn input_view(&mut self, index: usize) -> Result<PortView<'_>>;
    /// The buffer output `index` is written to; its address is fixed while the program is loaded.
    fn output_view(&mut self, index: usize) -> Result<PortView<'_>>;
    /// The planned host memory of the loaded program, where the executor plans it (the
    /// reference executor); `None` elsewhere.
    fn memory(&self) -> Option<reference::MemoryReport> {
        None
    }
    /// Make input `input` read output `output` of `producer` (loaded by the same executor) in
    /// place: `producer`'s execute writes what this program reads, nothing is copied. `Ok(false)`
    /// when this executor cannot (the caller copies between them); call before the first
    /// execute and keep `producer` alive as long as this program.
    fn bind_input(
        &mut self,
        input: usize,
        producer: &mut dyn Loaded,
        output: usize,
    ) -> Result<bool> {
        let _ = (input, producer, output);
        Ok(false)
    }
    /// This program as `Any`, for an executor to recognise its own programs in [`Loaded::bind_input`].
    fn as_any_mut(&mut self) -> Option<&mut dyn std::any::Any> {
        None
    }
}

/// Check port data against its spec: element count, dtype family, and for fp16 ports that
/// every value rounds to a finite fp16 (f64 values through f32). Errors name the port and value.
pub fn check_port_data(port: &PortSpec, data: &PortData) -> Result<()> {
    // The op name is formatted only for an error (this runs on every call).
    let op = || format!("input '{}'", port.name);
    if data.len() != port.numel() {
        return Err(Error::shape(
            op(),
            format!(
                "expects {} elements (shape {:?}), got {}",
                port.numel(),
                port.shape,
                data.len()
            ),
        ));
    }
    match (port.dtype, data) {
        (DType::Uint8, PortData::U8(_)) => Ok(()),
        (DType::Uint8, _) => Err(Error::dtype(
            op(),
            format!("is a uint8 port (shape {:?}); pass uint8 data", port.shape),
        )),
        (DType::Int32, PortData::I32(_)) => Ok(()),
        (DType::Int32, _) => Err(Error::dtype(
            op(),
            format!("is an int32 port (shape {:?}); pass int32 data", port.shape),
        )),
        (DType::Fp16, PortData::U8(_) | PortData::I32(_)) => Err(Error::dtype(
            op(),
            format!("is an fp16 port (shape {:?}); pass float data", port.shape),
        )),
        (DType::Fp16, d) => {
            let bad = |i: usize, v: f64| {
                let what = if v.is_finite() {
                    "overflows fp16 (|x| > 65504)"
                } else {
                    "is not finite"
                };
                Err(Error::value(
                    op(),
                    format!("element {i} = {v} {what} (shape {:?})", port.shape),
                ))
            };
            // An f32 rounds (to nearest even) to a finite fp16 exactly when |x| < 65520; f64
            // data goes through f32 first.
            let overflows = |v: f32| v.is_nan() || v.abs() >= 65520.0;
            match d {
                // A branch-free pass first (it vectorises); the position only on failure.
                PortData::F32(x) if x.iter().fold(true, |ok, &v| ok & (v.abs() < 65520.0)) => {
                    Ok(())
                }
                PortData::F32(x) => match x.iter().position(|&v| overflows(v)) {
                    Some(i) => bad(i, x[i] as f64),
                    None => Ok(()),
                },
                PortData::F64(x) => match x.iter().position(|&v| overflows(v as f32)) {
                    Some(i) => bad(i, x[i]),
                    None => Ok(()),
                },
                PortData::F16(x) => match x.iter().position(|v| !v.is_finite()) {
                    Some(i) => bad(i, x[i].to_f64()),
                    None => Ok(()),
                },
                PortData::U8(_) | PortData::I32(_) => unreachable!("matched above"),
            }
        }
        (DType::Bool, _) => Err(Error::dtype(op(), "bool ports do not exist")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The range test agrees with rounding to fp16 (f64 through f32) at the overflow boundary.
    #[test]
    fn fp16_range_check_matches_rounding() {
        let port = PortSpec {
            name: "x".into(),
            dtype: DType::Fp16,
            shape: vec![1],
        };
        let below = f32::from_bits(65520f32.to_bits() - 1);
        for (v, finite) in [
            (below, true),
            (65520.0, false),
            (-below, true),
            (-65520.0, false),
            (f32::NAN, false),
            (f32::INFINITY, false),
        ] {
            assert_eq!(f16::from_f32(v).is_finite(), finite, "{v}");
            assert_eq!(
                check_port_data(&port, &PortData::F32(&[v])).is_ok(),
                finite,
                "{v}"
            );
            assert_eq!(
                check_port_data(&port, &PortData::F64(&[v as f64])).is_ok(),
                finite,
                "{v}"
            );
        }
        let (below64, rounds_below) = (f64::from_bits(65520f64.to_bits() - 1), 65519.99);
        assert!(
            !f16::from_f32(below64 as f32).is_finite()
                && check_port_data(&port, &PortData::F64(&[below64])).is_err()
        );
        assert!(
            f16::from_f32(rounds_below as f32).is_finite()
                && check_port_data(&port, &PortData::F64(&[rounds_below])).is_ok()
        );
    }
}
