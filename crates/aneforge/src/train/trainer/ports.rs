//! Port I/O of the training programs. On the reference executor inputs are written straight
//! into the program's f32 value buffers (rounded to fp16 in fp16 mode, as a port write and load
//! would) and outputs are read from them, skipping the fp16 port round trip
//! (`exec::reference::handoff`); other executors go through the ports.

use half::slice::HalfFloatSliceExt;

use crate::compile::Compiled;
use crate::error::Result;
use crate::exec::reference::handoff::ref_program;
use crate::exec::reference::train_fuse::round_fp16;
use crate::exec::reference::RefProgram;
use crate::exec::{checked_input, PortData, Precision};
use crate::DType;

/// Write `data` to input `index` of `c` (checked like `set_input`); f32 and fp16 data for an
/// fp16 port of a reference program go straight into its value buffer.
pub(super) fn feed(
    c: &mut Compiled,
    index: usize,
    data: PortData,
    precision: Precision,
) -> Result<()> {
    checked_input(c.inputs(), index, &data)?;
    let direct = c.inputs()[index].dtype == DType::Fp16
        && matches!(data, PortData::F32(_) | PortData::F16(_));
    match ref_program(&mut *c.loaded).filter(|_| direct) {
        Some(rp) => {
            let dst = rp.handoff_input(index)?;
            match data {
                PortData::F32(x) => {
                    dst.copy_from_slice(x);
                    if precision == Precision::Fp16 {
                        round_fp16(dst);
                    }
                }
                PortData::F16(x) => x.convert_to_f32_slice(dst),
                _ => unreachable!("direct feeds are f32 or fp16"),
            }
            Ok(())
        }
        None => c.loaded.set_input(index, data),
    }
}

/// [`feed`] of f32 values that are already fp16-exact (another fp16 program's value buffer):
/// a reference program takes them without the rounding pass, which would change nothing.
pub(super) fn feed_exact(c: &mut Compiled, index: usize, x: &[f32]) -> Result<()> {
    feed(c, index, PortData::F32(x), Precision::Fp32)
}

/// Outputs `idx` (fp16 ports) of `c` as f32 slices: a reference program's value buffers, else
/// copies read into `store`.
pub(super) fn outputs<'a>(
    c: &'a mut Compiled,
    idx: &[usize],
    store: &'a mut Vec<Vec<f32>>,
) -> Result<Vec<&'a [f32]>> {
    if ref_program(&mut *c.loaded).is_none() {
        *store = idx
            .iter()
            .map(|&i| {
                let mut v = vec![0.0; c.outputs()[i].numel()];
                c.loaded.read_output(i, &mut v)?;
                Ok(v)
            })
            .collect::<Result<_>>()?;
        return Ok(store.iter().map(Vec::as_slice).collect());
    }
    let rp: &'a RefProgram = ref_program(&mut *c.loaded).expect("checked above");
    idx.iter().map(|&i| rp.handoff_output(i)).collect()
}

/// The f32 values input `index` of a reference program holds in its value buffer after a
/// carried alias (see `RefProgram::carried_input`), else `None`.
pub(super) fn carried(c: &mut Compiled, index: usize) -> Option<&[f32]> {
    ref_program(&mut *c.loaded)?.carried_input(index)
}

/// Carry a reference program's fp16 aliases in f32 (the Trainer holds no port views); a no-op
/// on other executors.
pub(super) fn carry_in_f32(c: &mut Compiled) {
    if let Some(rp) = ref_program(&mut *c.loaded) {
        rp.carry_aliases_in_f32();
    }
}

/// Store outputs `idx` of a reference program into their port buffers only on demand (they are
/// read through [`outputs`] or carried by an alias); a no-op on other executors.
pub(super) fn lazy(c: &mut Compiled, idx: &[usize]) {
    if let Some(rp) = ref_program(&mut *c.loaded) {
        idx.iter().for_each(|&i| rp.lazy_output(i));
    }
}
