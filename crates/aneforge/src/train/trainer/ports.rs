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

/// A value buffer of a reference program that [`execute_lent`] lends to another program.
#[derive(Clone, Copy, Debug)]
pub(super) enum Source {
    /// Input `index` holding a carried or shared alias (the update program's weights).
    Carried(usize),
    /// Output `index` (the training program's gradients).
    Output(usize),
}

/// The buffer `s` of `rp`, when it holds values to lend.
fn source(rp: &mut RefProgram, s: Source) -> Option<&mut Vec<f32>> {
    match s {
        Source::Carried(i) => rp.carried_values_mut(i),
        Source::Output(o) => rp.output_values_mut(o).ok(),
    }
}

/// Execute `to` with each (source of `from`, input of `to`) pair of `lent` fed by swapping the
/// source's value buffer into the input (no copy), swapped back after the execute whatever its
/// result (execute writes no input buffer). The sources must hold what [`feed_exact`] would
/// write. `None`, with nothing run, unless both are reference programs and the sources are
/// distinct buffers of their inputs' lengths: the caller then feeds copies.
pub(super) fn execute_lent(
    from: &mut Compiled,
    to: &mut Compiled,
    lent: &[(Source, usize)],
) -> Option<Result<()>> {
    let lens: Vec<usize> = (lent.iter())
        .map(|&(_, i)| to.inputs().get(i).map(|p| p.numel()))
        .collect::<Option<_>>()?;
    let src = ref_program(&mut *from.loaded)?;
    let dst = ref_program(&mut *to.loaded)?;
    let mut seen = Vec::with_capacity(lent.len());
    for (&(s, _), &n) in lent.iter().zip(&lens) {
        let buf = source(src, s)?;
        if n == 0 || buf.len() != n || seen.contains(&buf.as_ptr()) {
            return None;
        }
        seen.push(buf.as_ptr());
    }
    let swap = |dst: &mut RefProgram, src: &mut RefProgram, (s, i): (Source, usize), feed| {
        let buf = source(src, s).expect("checked above");
        dst.swap_input(i, buf, feed)
    };
    let swapped = lent
        .iter()
        .take_while(|&&pair| swap(dst, src, pair, true).is_ok())
        .count();
    let run = (swapped == lent.len()).then(|| to.loaded.execute());
    let dst = ref_program(&mut *to.loaded).expect("a reference program above");
    for &pair in lent[..swapped].iter().rev() {
        swap(dst, src, pair, false).expect("the buffer swapped in swaps back");
    }
    run
}

#[cfg(test)]
mod tests {
    use super::{execute_lent, Source};
    use crate::exec::reference::test_support::compile_reference_for_test;
    use crate::exec::{PortData, Precision};

    /// A program's output lent to another's input runs the second on those values (the bits of
    /// a copied feed) and is swapped back: the first program's output reads as before. A source
    /// lent to two inputs, or an input holding no carried alias, is refused with nothing run.
    #[test]
    fn lent_outputs_feed_the_next_program_and_come_back() {
        let n = 37;
        let x = crate::input(&[n]).unwrap();
        let (mut a, da) =
            compile_reference_for_test(&x.mul_scalar(3.0).unwrap(), Precision::Fp16, "lend-a");
        let v = crate::input(&[n]).unwrap();
        let (mut b, db) =
            compile_reference_for_test(&v.add_scalar(0.5).unwrap(), Precision::Fp16, "lend-b");
        let (v1, v2) = (crate::input(&[n]).unwrap(), crate::input(&[n]).unwrap());
        let (mut c, dc) =
            compile_reference_for_test(&v1.sub(&v2).unwrap(), Precision::Fp16, "lend-c");
        // Read back from the value buffer, as the Trainer reads gradients.
        super::lazy(&mut a, &[0]);
        let xs: Vec<f32> = (0..n).map(|i| i as f32 * 0.37 - 5.0).collect();
        a.loaded.set_input(0, PortData::F32(&xs)).unwrap();
        a.loaded.execute().unwrap();
        let mut y = vec![0.0; n];
        a.loaded.read_output(0, &mut y).unwrap();
        let want = b.run(&[PortData::F32(&y)]).unwrap().concat();
        // b's own input buffer holds other values before each loan.
        b.run(&[PortData::F32(&vec![7.0; n])]).unwrap();
        for k in 0..3 {
            execute_lent(&mut a, &mut b, &[(Source::Output(0), 0)])
                .expect("lent")
                .unwrap();
            let mut got = vec![0.0; n];
            b.loaded.read_output(0, &mut got).unwrap();
            assert_eq!(got, want, "call {k}: the lent values");
            let mut again = vec![0.0; n];
            a.loaded.read_output(0, &mut again).unwrap();
            assert_eq!(again, y, "call {k}: the source after the loan");
            b.loaded.set_input(0, PortData::F32(&vec![7.0; n])).unwrap();
        }
        let twice = [(Source::Output(0), 0), (Source::Output(0), 1)];
        assert!(execute_lent(&mut a, &mut c, &twice).is_none());
        assert!(execute_lent(&mut b, &mut a, &[(Source::Carried(0), 0)]).is_none());
        for d in [da, db, dc] {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}
