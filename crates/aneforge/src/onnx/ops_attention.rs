//! ONNX Attention (opset 23+) onto matmul / softmax in fp16: 3-D or 4-D Q/K/V, `scale`
//! (split as √scale on Q and K, as the spec's function body does), past key/value
//! concatenation, bool or additive `attn_mask` (padded to the key length), `is_causal` and the
//! sliding window aligned to the past length, grouped-query heads, `softcap`, and the four
//! `qk_matmul_output_mode`s. Masked keys are selected out (not added as −inf, which fp16
//! arithmetic cannot carry), and a row with no allowed key gives zeros, as the spec says.

use super::ops::{Args, OpFn, Value};
use crate::error::Result;
use crate::graph::build::elementwise::select;
use crate::graph::build::io::constant;
use crate::graph::build::layout::concat;
use crate::graph::Tensor;
use crate::ops::elementwise::Compare;
use crate::ops::io::{HostArray, HostData};

/// The mapping of `op`, or None.
pub fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "Attention" => attention,
        _ => return None,
    })
}

/// [B, S, H·D] → [B, H, S, D].
fn split_heads(t: &Tensor, heads: usize) -> Result<Tensor> {
    let s = t.shape().to_vec();
    t.reshape(&[
        s[0] as i64,
        s[1] as i64,
        heads as i64,
        (s[2] / heads) as i64,
    ])?
    .transpose(&[0, 2, 1, 3])
}

/// A [S, L] fp16 0/1 constant: 1 where query `i` may attend key `j`.
fn position_mask(
    a: &Args,
    s: usize,
    l: usize,
    allowed: impl Fn(i64, i64) -> bool,
) -> Result<Tensor> {
    let data: Vec<f64> = (0..s * l)
        .map(|k| allowed((k / l) as i64, (k % l) as i64) as u8 as f64)
        .collect();
    constant(
        &a.node.what,
        HostArray {
            shape: &[s, l],
            data: HostData::F64(&data),
        },
    )
}

/// Pad the last axis of `m` to `l` with `fill`.
fn pad_last(a: &Args, m: Tensor, l: usize, fill: f64) -> Result<Tensor> {
    let mut s = m.shape().to_vec();
    let have = *s.last().unwrap_or(&l);
    if have >= l {
        return Ok(m);
    }
    *s.last_mut().expect("rank >= 1") = l - have;
    let data = vec![fill; s.iter().product()];
    let pad = constant(
        &a.node.what,
        HostArray {
            shape: &s,
            data: HostData::F64(&data),
        },
    )?;
    concat(&[m, pad], -1)
}

fn attention(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let (q, k, v) = (a.ftensor(0)?, a.ftensor(1)?, a.ftensor(2)?);
    let three_d = q.rank() == 3;
    let (q, k, v) = if three_d {
        let hq = n.int("q_num_heads", 0)?;
        let hk = n.int("kv_num_heads", 0)?;
        if hq < 1 || hk < 1 || q.shape()[2] % hq as usize != 0 || k.shape()[2] % hk as usize != 0 {
            return Err(n.bad(format!(
                "3-D inputs need q_num_heads and kv_num_heads dividing the hidden sizes (got {hq}, {hk} for {:?}, {:?})",
                q.shape(),
                k.shape()
            )));
        }
        (
            split_heads(&q, hq as usize)?,
            split_heads(&k, hk as usize)?,
            split_heads(&v, hk as usize)?,
        )
    } else if q.rank() == 4 && k.rank() == 4 && v.rank() == 4 {
        (q, k, v)
    } else {
        return Err(n.bad(format!(
            "Q, K, V must all be 3-D or 4-D, got {:?}, {:?}, {:?}",
            q.shape(),
            k.shape(),
            v.shape()
        )));
    };
    if a.get(6).is_some() {
        return Err(n.unsupported(
            "input 6 (nonpad_kv_seqlen): per-batch key padding from runtime lengths",
        ));
    }
    let past = a.get(4).is_some();
    let (k, v) = if past {
        (
            concat(&[a.ftensor(4)?, k], 2)?,
            concat(&[a.ftensor(5)?, v], 2)?,
        )
    } else {
        (k, v)
    };
    let past_len = if past { a.req(4)?.dims()[2] } else { 0 } as i64;
    let (hq, hk, s, l) = (q.shape()[1], k.shape()[1], q.shape()[2], k.shape()[2]);
    let d = q.shape()[3];
    let scale = if n.has("scale") {
        n.float("scale", 1.0)? as f64
    } else {
        1.0 / (d as f64).sqrt()
    };
    let root = scale.sqrt() as f32;
    // Grouped heads: each KV head repeated for its group of query heads ([h0, h0, h1, h1, ...]).
    let (kr, vr) = if hq != hk {
        if hq % hk != 0 {
            return Err(n.bad(format!("q heads {hq} are not a multiple of kv heads {hk}")));
        }
        let rep = |t: &Tensor| -> Result<Tensor> {
            let sh = t.shape().to_vec();
            let t5 = t.expand_dims(&[2])?;
            concat(&vec![t5; hq / hk], 2)?.reshape(&[
                sh[0] as i64,
                hq as i64,
                sh[2] as i64,
                sh[3] as i64,
            ])
        };
        (rep(&k)?, rep(&v)?)
    } else {
        (k.clone(), v.clone())
    };
    let mut qk = q
        .mul_scalar(root)?
        .matmul(&kr.mul_scalar(root)?.transpose(&[0, 1, 3, 2])?)?;
    let softcap = n.float("softcap", 0.0)?;
    if softcap > 0.0 {
        qk = qk.div_scalar(softcap)?.tanh()?.mul_scalar(softcap)?;
    }
    // allowed: fp16 0/1, broadcast against [B, H, S, L]; bias: the additive float mask.
    let mut allowed: Option<Tensor> = None;
    let mut bias: Option<Tensor> = None;
    if let Some(m) = a.get(3) {
        if m.elem() == super::tensor::Elem::Bool {
            allowed = Some(pad_last(a, a.ftensor(3)?, l, 0.0)?);
        } else {
            let m = a.ftensor(3)?;
            let have = *m.shape().last().unwrap_or(&l);
            if have < l {
                allowed =
                    Some(position_mask(a, 1, l, |_, j| j < have as i64)?.reshape(&[l as i64])?);
            }
            bias = Some(pad_last(a, m, l, 0.0)?);
        }
    }
    let window = (
        n.int("left_window_size", -1)?,
        n.int("right_window_size", -1)?,
    );
    let causal = n.int("is_causal", 0)? != 0;
    if causal || window.0 >= 0 || window.1 >= 0 {
        let pos = position_mask(a, s, l, |i, j| {
            let diff = i + past_len - j;
            (!causal || diff >= 0)
                && (window.0 < 0 || diff <= window.0)
                && (window.1 < 0 || -diff <= window.1)
        })?;
        allowed = Some(match allowed {
            Some(m) => m.mul(&pos)?,
            None => pos,
        });
    }
    let mut scores = match &bias {
        Some(b) => qk.add(b)?,
        None => qk.clone(),
    };
    let row_any = match &allowed {
        Some(m) => {
            let full = m.add(&scores.mul_scalar(0.0)?)?;
            let keep = full.compare_scalar(Compare::NotEqual, 0.0)?;
            scores = select(
                &keep,
                &scores,
                &scores.mul_scalar(0.0)?.add_scalar(-65504.0)?,
            )?;
            Some(full.amax(&[-1], true)?)
        }
        None => None,
    };
    let mut probs = scores.softmax(-1)?;
    if let Some(r) = &row_any {
        probs = probs.mul(r)?;
    }
    let qk_out = match n.int("qk_matmul_output_mode", 0)? {
        0 | 1 => qk,
        2 => scores.clone(),
        3 => probs.clone(),
        other => return Err(n.bad(format!("qk_matmul_output_mode = {other} is not 0..=3"))),
    };
    let mut y = probs.matmul(&vr)?;
    if three_d {
        let sh = y.shape().to_vec();
        y = y.transpose(&[0, 2, 1, 3])?.reshape(&[
            sh[0] as i64,
            sh[2] as i64,
            (sh[1] * sh[3]) as i64,
        ])?;
    }
    let elem = a.req(0)?.elem();
    Ok([y, k, v, qk_out]
        .into_iter()
        .map(|t| Value::Graph { t, elem })
        .collect())
}
