//! A program loaded through e5rt (ane-dispatch §2.4): compiled from the program directory's
//! `model.mil`, one host buffer per port, one stream; encoded on the first execute.

use std::ffi::CString;
use std::path::Path;

use half::f16;
use half::slice::HalfFloatSliceExt;

use super::e5rt::{call, create, Ctx};
use super::handles::Handle;
use super::{Ane, Slot};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::exec::{
    alias_ports, checked_input, checked_output, not_int32, Loaded, PortData, PortView,
};
use crate::program::{PortSpec, Program};

/// Bytes of a port's data: numel × 2 for fp16, numel rounded up to even for uint8 (§3.1),
/// numel × 4 for int32.
fn port_bytes(port: &PortSpec) -> usize {
    match port.dtype {
        DType::Uint8 => port.numel().div_ceil(2) * 2,
        DType::Int32 => port.numel() * 4,
        _ => port.numel() * 2,
    }
}

/// Allocation size of a port buffer: its bytes rounded up to a multiple of 64, at least 64.
fn alloc_bytes(bytes: usize) -> usize {
    bytes.div_ceil(64).max(1) * 64
}

/// One bound port. Fields drop in order: the buffer, then the port.
struct Port {
    /// `None` once `alias` bound another port's buffer here (that port owns it).
    buffer: Option<Handle>,
    port: Handle,
    data: *mut u8,
}

/// A program on the ANE. Fields drop in declaration order, which is the e5rt teardown order
/// (§2.4 step 7): stream, port buffers and ports, operation, its options, function, library.
pub struct AneProgram {
    stream: Handle,
    /// Inputs, then outputs.
    ports: Vec<Port>,
    /// Input buffers replaced by `alias`, kept until teardown so earlier views stay valid.
    displaced: Vec<Handle>,
    op: Handle,
    _op_options: Handle,
    _function: Handle,
    _library: Handle,
    _slot: Slot,
    inputs: Vec<PortSpec>,
    outputs: Vec<PortSpec>,
    ctx: Ctx,
    encoded: bool,
}

// SAFETY: e5rt objects and their host buffers are not tied to the thread that created them;
// `Loaded` is `Send` but not `Sync`, so one thread at a time uses a program (callers lock).
unsafe impl Send for AneProgram {}

fn cstring(what: &str, s: &str) -> Result<CString> {
    CString::new(s)
        .map_err(|_| Error::value("ane load", format!("{what} '{s}' contains a NUL byte")))
}

fn path_cstring(p: &Path) -> Result<CString> {
    cstring(
        "path",
        p.to_str().ok_or_else(|| {
            Error::value("ane load", format!("path {} is not UTF-8", p.display()))
        })?,
    )
}

/// Compile `dir/model.mil` with `opts` into a program library (the compiler objects are released
/// on return), caching in `cache` (`cache-<arch>` with a target).
pub(super) fn compile(ctx: Ctx, opts: &Ane, dir: &Path) -> Result<Handle> {
    let cache = super::cross::cache_dir(dir, opts.target.as_deref());
    std::fs::create_dir_all(&cache).map_err(|e| Error::io(&cache, e))?;
    let (cache, mil) = (path_cstring(&cache)?, path_cstring(&dir.join("model.mil"))?);
    let config = create!(ctx, out, e5rt_e5_compiler_config_options_create(out) => e5rt_e5_compiler_config_options_release)?;
    call!(
        ctx,
        e5rt_e5_compiler_config_options_set_cache_bundle_location(config.raw(), cache.as_ptr())
    )?;
    let compiler = create!(ctx, out, e5rt_e5_compiler_create_with_config(out, config.raw()) => e5rt_e5_compiler_release)?;
    let options = create!(ctx, out, e5rt_e5_compiler_options_create(out) => e5rt_e5_compiler_options_release)?;
    call!(
        ctx,
        e5rt_e5_compiler_options_set_compute_device_types_mask(options.raw(), opts.mask)
    )?;
    call!(
        ctx,
        e5rt_e5_compiler_options_set_force_recompilation(options.raw(), 1)
    )?;
    let graph = cstring("segmenter", "graph")?;
    call!(
        ctx,
        e5rt_e5_compiler_options_set_segmenter(options.raw(), graph.as_ptr())
    )?;
    if let Some(arch) = &opts.target {
        let set = ctx.e5.set_custom_ane_compiler_options.ok_or_else(|| Error::Unavailable {
            executor: "ane",
            step: "symbol".into(),
            reason: "e5rt_e5_compiler_options_set_custom_ane_compiler_options is not exported (needed for target=)".into(),
        })?;
        let custom = cstring("target", &format!("TargetArchitecture={arch}"))?;
        // SAFETY: a live options object and a NUL-terminated string that outlives the call.
        ctx.check(
            "e5rt_e5_compiler_options_set_custom_ane_compiler_options",
            unsafe { set(options.raw(), custom.as_ptr()) },
        )?;
    }
    create!(ctx, out, e5rt_e5_compiler_compile(compiler.raw(), mil.as_ptr(), options.raw(), out) => e5rt_program_library_release)
}

/// Retain port `spec` of `op`, allocate its zeroed host buffer and bind it.
fn bind_port(ctx: Ctx, op: &Handle, spec: &PortSpec, input: bool) -> Result<Port> {
    let name = cstring("port name", &spec.name)?;
    let port = if input {
        create!(ctx, out, e5rt_execution_stream_operation_retain_input_port(op.raw(), name.as_ptr(), out) => e5rt_io_port_release)?
    } else {
        create!(ctx, out, e5rt_execution_stream_operation_retain_output_port(op.raw(), name.as_ptr(), out) => e5rt_io_port_release)?
    };
    let size = alloc_bytes(port_bytes(spec));
    let buffer =
        create!(ctx, out, e5rt_buffer_object_alloc(out, size, 0) => e5rt_buffer_object_release)?;
    let mut data = std::ptr::null_mut();
    call!(
        ctx,
        e5rt_buffer_object_get_data_ptr(buffer.raw(), &mut data)
    )?;
    if data.is_null() || !(data as usize).is_multiple_of(4) {
        let message = format!("buffer of port '{}' has an unusable data pointer {data:p} (null or not 4-byte aligned)", spec.name);
        return Err(Error::E5rt {
            function: "e5rt_buffer_object_get_data_ptr",
            status: 0,
            message,
        });
    }
    // SAFETY: e5rt allocated `size` bytes at `data` for this buffer, which is alive.
    unsafe { std::ptr::write_bytes(data.cast::<u8>(), 0, size) };
    call!(
        ctx,
        e5rt_io_port_bind_buffer_object(port.raw(), buffer.raw())
    )?;
    Ok(Port {
        buffer: Some(buffer),
        port,
        data: data.cast(),
    })
}

impl AneProgram {
    /// Compile and prepare `program` (written to `dir`) with `opts`, taking one live-program slot.
    pub fn load(ctx: Ctx, opts: &Ane, program: &Program, dir: &Path) -> Result<AneProgram> {
        let (inputs, outputs) = (program.inputs(), program.outputs());
        if let Some(p) = inputs
            .iter()
            .chain(&outputs)
            .find(|p| !matches!(p.dtype, DType::Fp16 | DType::Uint8 | DType::Int32))
        {
            return Err(Error::dtype(
                "ane load",
                format!(
                    "port '{}' is {}; e5rt ports are fp16, uint8 or int32",
                    p.name, p.dtype
                ),
            ));
        }
        let slot = Slot::acquire()?;
        let library = compile(ctx, opts, dir)?;
        let main = cstring("function", "main")?;
        let function = create!(ctx, out, e5rt_program_library_retain_program_function(library.raw(), main.as_ptr(), out) => e5rt_program_function_release)?;
        let op_options = create!(ctx, out, e5rt_precompiled_compute_op_create_options_create_with_program_function(out, function.raw()) => e5rt_precompiled_compute_op_create_options_release)?;
        call!(
            ctx,
            e5rt_precompiled_compute_op_create_options_set_operation_name(
                op_options.raw(),
                main.as_ptr()
            )
        )?;
        call!(
            ctx,
            e5rt_precompiled_compute_op_create_options_set_allocate_intermediate_buffers(
                op_options.raw(),
                1
            )
        )?;
        let op = create!(ctx, out, e5rt_execution_stream_operation_create_precompiled_compute_operation_with_options(out, op_options.raw()) => e5rt_execution_stream_operation_release)?;
        let mut ports = Vec::with_capacity(inputs.len() + outputs.len());
        for (spec, input) in inputs
            .iter()
            .map(|p| (p, true))
            .chain(outputs.iter().map(|p| (p, false)))
        {
            ports.push(bind_port(ctx, &op, spec, input)?);
        }
        let stream =
            create!(ctx, out, e5rt_execution_stream_create(out) => e5rt_execution_stream_release)?;
        Ok(AneProgram {
            stream,
            ports,
            displaced: Vec::new(),
            op,
            _op_options: op_options,
            _function: function,
            _library: library,
            _slot: slot,
            inputs,
            outputs,
            ctx,
            encoded: false,
        })
    }

    /// Input (or output) `index` as a view of its buffer.
    fn view(&mut self, index: usize, output: bool, op: &str) -> Result<PortView<'_>> {
        let specs = if output { &self.outputs } else { &self.inputs };
        let spec = specs.get(index).ok_or_else(|| {
            Error::value(
                op,
                format!("port index {index} out of range ({} ports)", specs.len()),
            )
        })?;
        let (numel, dtype) = (spec.numel(), spec.dtype);
        let data = self.ports[if output {
            self.inputs.len() + index
        } else {
            index
        }]
        .data;
        // SAFETY: `data` is the live, zeroed, 4-byte-aligned buffer of this port, at least
        // `port_bytes` long; the returned borrow of `self` keeps the program alive and unaliased.
        Ok(unsafe {
            match dtype {
                DType::Uint8 => PortView::U8(std::slice::from_raw_parts_mut(data, numel)),
                DType::Int32 => {
                    PortView::I32(std::slice::from_raw_parts_mut(data.cast::<i32>(), numel))
                }
                _ => PortView::F16(std::slice::from_raw_parts_mut(data.cast::<f16>(), numel)),
            }
        })
    }
}

impl Loaded for AneProgram {
    fn device(&self) -> &'static str {
        "ane"
    }
    fn inputs(&self) -> &[PortSpec] {
        &self.inputs
    }
    fn outputs(&self) -> &[PortSpec] {
        &self.outputs
    }

    fn set_input(&mut self, index: usize, data: PortData) -> Result<()> {
        checked_input(&self.inputs, index, &data)?;
        self.view(index, false, "set_input")?.write(data);
        Ok(())
    }

    fn execute(&mut self) -> Result<()> {
        if !self.encoded {
            call!(
                self.ctx,
                e5rt_execution_stream_encode_operation(self.stream.raw(), self.op.raw())
            )?;
            self.encoded = true;
        }
        call!(
            self.ctx,
            e5rt_execution_stream_execute_sync(self.stream.raw())
        )
    }

    fn read_output(&self, index: usize, out: &mut [f32]) -> Result<()> {
        let port = checked_output(&self.outputs, index, out.len())?;
        let (data, n) = (self.ports[self.inputs.len() + index].data, out.len());
        // SAFETY: the port's live buffer holds `n` elements of its dtype; only read here.
        unsafe {
            match port.dtype {
                DType::Uint8 => out
                    .iter_mut()
                    .zip(std::slice::from_raw_parts(data, n))
                    .for_each(|(o, &b)| *o = b as f32),
                DType::Int32 => out
                    .iter_mut()
                    .zip(std::slice::from_raw_parts(data.cast::<i32>(), n))
                    .for_each(|(o, &v)| *o = v as f32),
                _ => std::slice::from_raw_parts(data.cast::<f16>(), n).convert_to_f32_slice(out),
            }
        }
        Ok(())
    }

    fn read_output_i32(&self, index: usize, out: &mut [i32]) -> Result<()> {
        let port = checked_output(&self.outputs, index, out.len())?;
        if port.dtype != DType::Int32 {
            return Err(not_int32(port));
        }
        let data = self.ports[self.inputs.len() + index].data;
        // SAFETY: the port's live, 4-byte-aligned buffer holds `out.len()` int32 elements.
        out.copy_from_slice(unsafe { std::slice::from_raw_parts(data.cast::<i32>(), out.len()) });
        Ok(())
    }

    fn alias(&mut self, output: &str, input: &str) -> Result<()> {
        let (oi, ii) = alias_ports(self.encoded, &self.outputs, &self.inputs, output, input)?;
        let src = &self.ports[self.inputs.len() + oi];
        let Some(buffer) = src.buffer.as_ref().map(Handle::raw) else {
            return Err(Error::value(
                "alias",
                format!("output '{output}' has no buffer of its own"),
            ));
        };
        let data = src.data;
        call!(
            self.ctx,
            e5rt_io_port_bind_buffer_object(self.ports[ii].port.raw(), buffer)
        )?;
        let dst = &mut self.ports[ii];
        self.displaced.extend(dst.buffer.take());
        dst.data = data;
        Ok(())
    }

    fn input_view(&mut self, index: usize) -> Result<PortView<'_>> {
        self.view(index, false, "input_view")
    }

    fn output_view(&mut self, index: usize) -> Result<PortView<'_>> {
        self.view(index, true, "output_view")
    }

    /// Bind `producer`'s output buffer to this input port (`e5rt_io_port_bind_buffer_object`):
    /// both programs then use one buffer; this port's own buffer is released.
    fn bind_input(
        &mut self,
        input: usize,
        producer: &mut dyn Loaded,
        output: usize,
    ) -> Result<bool> {
        let Some(src) = producer
            .as_any_mut()
            .and_then(|a| a.downcast_mut::<AneProgram>())
        else {
            return Ok(false);
        };
        let (want, have) = match (self.inputs.get(input), src.outputs.get(output)) {
            (Some(w), Some(h)) => (w, h),
            _ => {
                return Err(Error::value(
                    "bind_input",
                    format!("input {input} or producer output {output} is out of range"),
                ))
            }
        };
        if self.encoded || want.dtype != have.dtype || want.shape != have.shape {
            return Err(Error::shape(
                "bind_input",
                format!(
                    "input '{}' ({} {:?}) cannot read output '{}' ({} {:?}){}",
                    want.name,
                    want.dtype,
                    want.shape,
                    have.name,
                    have.dtype,
                    have.shape,
                    if self.encoded {
                        " after the first execute"
                    } else {
                        ""
                    }
                ),
            ));
        }
        let from = &src.ports[src.inputs.len() + output];
        let Some(buffer) = from.buffer.as_ref().map(Handle::raw) else {
            return Ok(false);
        };
        let data = from.data;
        call!(
            self.ctx,
            e5rt_io_port_bind_buffer_object(self.ports[input].port.raw(), buffer)
        )?;
        let dst = &mut self.ports[input];
        dst.data = data;
        drop(dst.buffer.take());
        Ok(true)
    }

    fn as_any_mut(&mut self) -> Option<&mut dyn std::any::Any> {
        Some(self)
    }
}
