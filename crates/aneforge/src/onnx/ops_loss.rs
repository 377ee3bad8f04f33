//! NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss with runtime int labels: the labels
//! become one-hot rows on the host (`one_hot`), the picked log-probabilities and class weights
//! are sums over the class axis in fp16, and `ignore_index` labels give zero loss and weight.
//! Reductions none / sum / mean (mean divides by the summed weights of the kept labels).

use super::ops::{Args, OpFn, Value};
use super::ops_int::{int_tensor, int_tensor_const, is_runtime_int};
use crate::dtype::DType;
use crate::error::Result;
use crate::graph::build::host::host;
use crate::graph::Tensor;
use crate::ops::host::HostOp;
use crate::ops::host_int::{IntElementwise, IntKind, IntOp};
use crate::ops::host_scan::OneHot;

/// The mapping of `op`, or None.
pub fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "NegativeLogLikelihoodLoss" | "SoftmaxCrossEntropyLoss" => loss,
        _ => return None,
    })
}

fn int_op(op: IntOp, ins: Vec<Tensor>) -> Result<Tensor> {
    let k = IntElementwise {
        op,
        kind: IntKind::I64,
    };
    Ok(host(HostOp::IntElementwise(k), ins)?.remove(0))
}

fn loss(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let sce = n.op() == "SoftmaxCrossEntropyLoss";
    let x = a.ftensor(0)?;
    let r = x.rank();
    if r < 2 {
        return Err(n.bad(format!("input must be [N, C, ...], got {:?}", x.shape())));
    }
    let c = x.shape()[1];
    let logp = if sce {
        x.sub(&x.log_sum_exp(&[1], true)?)?
    } else {
        x
    };
    if !a.get(1).is_some_and(is_runtime_int) && !matches!(a.get(1), Some(Value::Host(_))) {
        return Err(n.bad("input 1 (labels) must be integers"));
    }
    let mut labels = int_tensor(a, 1)?;
    // kept: fp16 1 where the label counts; ignored labels are replaced by class 0 for one_hot.
    let kept = if n.has("ignore_index") {
        let ii = n.int("ignore_index", 0)?;
        let ii_t = int_tensor_const(a, ii)?;
        let hit = int_op(IntOp::Equal, vec![labels.clone(), ii_t])?;
        let zero = int_tensor_const(a, 0)?;
        labels = int_op(IntOp::Where, vec![hit.clone(), zero, labels])?;
        Some(hit.cast(DType::Fp16)?.mul_scalar(-1.0)?.add_scalar(1.0)?)
    } else {
        None
    };
    let onehot = host(HostOp::OneHot(OneHot { depth: c }), vec![labels])?.remove(0);
    // [N, d..., C] → [N, C, d...]
    let mut perm: Vec<i64> = vec![0, (r - 1) as i64];
    perm.extend(1..(r - 1) as i64);
    let onehot = onehot.transpose(&perm)?;
    let picked = onehot.mul(&logp)?.sum(&[1], false)?.neg()?;
    let mut w = match a.get(2) {
        Some(_) => {
            let mut shape = vec![1i64; r];
            shape[1] = c as i64;
            let wt = a.ftensor(2)?.reshape(&shape)?;
            Some(onehot.mul(&wt)?.sum(&[1], false)?)
        }
        None => None,
    };
    if let Some(k) = &kept {
        w = Some(match w {
            Some(w) => w.mul(k)?,
            None => k.clone(),
        });
    }
    let per = match &w {
        Some(w) => picked.mul(w)?,
        None => picked,
    };
    let all: Vec<i64> = (0..per.rank() as i64).collect();
    let out = match n.string("reduction", "mean")?.as_str() {
        "none" => per,
        "sum" => per.sum(&all, true)?.reshape(&[1])?,
        "mean" => {
            let total = per.sum(&all, true)?.reshape(&[1])?;
            match &w {
                Some(w) => total.div(&w.sum(&all, true)?.reshape(&[1])?)?,
                None => total.div_scalar(per.shape().iter().product::<usize>() as f32)?,
            }
        }
        other => return Err(n.bad(format!("reduction = '{other}' is not none, sum or mean"))),
    };
    let elem = a.req(0)?.elem();
    let mut outs = vec![Value::Graph { t: out, elem }];
    if sce {
        outs.push(Value::Graph { t: logp, elem });
    }
    Ok(outs)
}
