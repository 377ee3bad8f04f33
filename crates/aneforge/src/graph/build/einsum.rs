//! Builders for the einsum ops.

use crate::error::{Error, Result};
use crate::graph::Tensor;
use crate::ops::einsum::Einsum;
use crate::ops::Op;

/// The native MIL einsum of `x` and `y` for a native equation (see [`Einsum`]); others are a NotImplemented error.
pub fn einsum_native(equation: &str, x: &Tensor, y: &Tensor) -> Result<Tensor> {
    Tensor::apply1(
        Op::Einsum(Einsum::parse(equation)?),
        vec![x.clone(), y.clone()],
    )
}

/// Role of one index letter in a two-operand contraction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// In both operands and the output.
    Batch,
    /// In both operands, not the output (summed by the matmul).
    Contracted,
    /// In one operand and the output.
    Free,
    /// In one operand only (summed before the matmul).
    Summed,
}

/// General two-operand einsum (`"ij,jk->ik"`, `"bij,bjk->bik"`, implicit `"ij,jk"` = NumPy's rule:
/// letters seen once, sorted). Lowered to reduce_sum (letters in one operand only), transpose,
/// reshape, one matmul (batch letters as the batch axis, contracted letters as K), reshape and
/// transpose. Shared letters need equal extents. Errors: more or fewer than two operands,
/// repeated letters in one operand (diagonals), ellipsis → NotImplemented; a malformed equation,
/// letters/rank mismatch or a scalar result → Value/Shape.
pub fn einsum(equation: &str, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    const OP: &str = "einsum";
    let (ins, out) = crate::ops::einsum::split_equation(OP, equation)?;
    if ins.len() != 2 {
        return Err(Error::NotImplemented(format!(
            "{OP}: '{equation}' has {} operands; only two-operand einsum is supported",
            ins.len()
        )));
    }
    let (la, lb) = (&ins[0], &ins[1]);
    for (l, t, which) in [(la, a, "first"), (lb, b, "second")] {
        if l.len() != t.rank() {
            return Err(Error::shape(
                OP,
                format!(
                    "'{equation}': the {which} operand has {} letters but shape {:?}",
                    l.len(),
                    t.shape()
                ),
            ));
        }
        if let Some(c) = l.iter().find(|c| l.iter().filter(|d| d == c).count() > 1) {
            return Err(Error::NotImplemented(format!("{OP}: '{equation}' repeats '{c}' in the {which} operand (diagonal/trace) — not supported")));
        }
    }
    let out = out.unwrap_or_else(|| {
        let mut once: Vec<char> = la
            .iter()
            .chain(lb)
            .copied()
            .filter(|c| la.iter().chain(lb).filter(|d| *d == c).count() == 1)
            .collect();
        once.sort_unstable();
        once
    });
    if let Some(c) = out
        .iter()
        .find(|c| out.iter().filter(|d| d == c).count() > 1)
    {
        return Err(Error::value(
            OP,
            format!("'{equation}' repeats '{c}' in the output"),
        ));
    }
    if let Some(c) = out.iter().find(|c| !la.contains(c) && !lb.contains(c)) {
        return Err(Error::value(
            OP,
            format!("'{equation}': output letter '{c}' is in neither operand"),
        ));
    }
    if out.is_empty() {
        return Err(Error::shape(
            OP,
            format!("'{equation}' has a scalar result; keep at least one output axis"),
        ));
    }
    let extent = |c: char| -> usize {
        la.iter()
            .position(|&d| d == c)
            .map(|i| a.shape()[i])
            .or_else(|| lb.iter().position(|&d| d == c).map(|i| b.shape()[i]))
            .unwrap_or(1)
    };
    for (i, c) in la.iter().enumerate() {
        if let Some(j) = lb.iter().position(|d| d == c) {
            if a.shape()[i] != b.shape()[j] {
                return Err(Error::shape(
                    OP,
                    format!(
                        "'{equation}': '{c}' is {} in {:?} but {} in {:?}",
                        a.shape()[i],
                        a.shape(),
                        b.shape()[j],
                        b.shape()
                    ),
                ));
            }
        }
    }
    let role = |c: char| match (la.contains(&c) && lb.contains(&c), out.contains(&c)) {
        (true, true) => Role::Batch,
        (true, false) => Role::Contracted,
        (false, true) => Role::Free,
        (false, false) => Role::Summed,
    };
    let letters = |l: &[char], r: Role| -> Vec<char> {
        l.iter().copied().filter(|&c| role(c) == r).collect()
    };
    let (batch, contracted) = (letters(la, Role::Batch), letters(la, Role::Contracted));
    let (left, right) = (letters(la, Role::Free), letters(lb, Role::Free));
    let prod = |v: &[char]| v.iter().map(|&c| extent(c)).product::<usize>();
    // Operand a as [batch.., left.., contracted..] → [B, M, K]; b as [batch.., contracted.., right..] → [B, K, N].
    let a3 = arrange(
        a,
        la,
        &[&batch[..], &left, &contracted].concat(),
        &letters(la, Role::Summed),
        &[prod(&batch), prod(&left), prod(&contracted)],
    )?;
    let b3 = arrange(
        b,
        lb,
        &[&batch[..], &contracted, &right].concat(),
        &letters(lb, Role::Summed),
        &[prod(&batch), prod(&contracted), prod(&right)],
    )?;
    let mid: Vec<char> = [&batch[..], &left, &right].concat();
    let y = reshape_to(
        &a3.matmul(&b3)?,
        &mid.iter().map(|&c| extent(c)).collect::<Vec<_>>(),
    )?;
    permute(&y, &mid, &out)
}

/// Sum `t` (letters `l`) over `summed`, move its axes into `order`, and reshape to `dims`
/// (a leading batch extent of 1 is dropped, so an unbatched contraction is a plain 2-D matmul).
fn arrange(
    t: &Tensor,
    l: &[char],
    order: &[char],
    summed: &[char],
    dims: &[usize; 3],
) -> Result<Tensor> {
    let mut t = t.clone();
    let mut l = l.to_vec();
    if !summed.is_empty() {
        let axes: Vec<i64> = summed
            .iter()
            .map(|c| l.iter().position(|d| d == c).unwrap_or(0) as i64)
            .collect();
        t = if axes.len() == l.len() {
            t.sum(&axes, true)?
        } else {
            t.sum(&axes, false)?
        };
        if axes.len() < l.len() {
            l.retain(|c| !summed.contains(c));
        } else {
            l.clear();
        }
    }
    let t = if l.is_empty() {
        t
    } else {
        permute(&t, &l, order)?
    };
    let dims = if dims[0] == 1 { &dims[1..] } else { &dims[..] };
    reshape_to(&t, dims)
}

/// Transpose `t` whose axes are lettered `from` into the order `to` (no op when already in order).
fn permute(t: &Tensor, from: &[char], to: &[char]) -> Result<Tensor> {
    let perm: Vec<i64> = to
        .iter()
        .map(|c| from.iter().position(|d| d == c).unwrap_or(0) as i64)
        .collect();
    if perm.iter().enumerate().all(|(i, &p)| p == i as i64) {
        return Ok(t.clone());
    }
    t.transpose(&perm)
}

/// Reshape `t` to `dims` (an empty `dims` means [1]; no op when the shape already matches).
fn reshape_to(t: &Tensor, dims: &[usize]) -> Result<Tensor> {
    let dims: Vec<usize> = if dims.is_empty() {
        vec![1]
    } else {
        dims.to_vec()
    };
    if t.shape() == dims {
        return Ok(t.clone());
    }
    t.reshape(&dims.iter().map(|&d| d as i64).collect::<Vec<_>>())
}
