//! Exact GELU written out as x·½·(1 + erf(x/√2)) — torch.onnx exports of `nn.GELU` before
//! opset 20 and Hugging Face BERT-family models — is imported as one `gelu` op (mode EXACT),
//! as ONNX Runtime fuses it: one fp16 rounding of the same function instead of one per step
//! (more accurate, and one op instead of five on either executor). Any association and operand
//! order of the two Muls matches, with x/√2 as `Div(x, √2)` or `Mul(x, 1/√2)`; the constants
//! must be one-element initializers or Constant nodes of rank 0 or 1 (a rank-3 ½ would make the
//! product rank 3 for a rank-2 x, which `gelu(x)` is not). Steps of the pattern whose values
//! something else reads are still imported for those readers.

use std::collections::HashMap;

use super::proto::{GraphProto, NodeProto};

/// How far a constant may be from √2 or 1/√2 (f32 spellings of them differ in the last bits).
const TOLERANCE: f64 = 1e-6;

/// Per final Mul node of an exact GELU in `graph`, the name of its input x; `scalar(name,
/// producer)` gives the value of a one-element constant (`producer`: the node making it).
pub fn gelu_nodes(
    graph: &GraphProto,
    scalar: impl Fn(&str, Option<&NodeProto>) -> Option<f64>,
) -> HashMap<usize, String> {
    let producer: HashMap<&str, &NodeProto> = (graph.node.iter())
        .flat_map(|n| n.output.iter().map(move |o| (o.as_str(), n)))
        .collect();
    let made_by = |name: &str, op: &str| {
        producer
            .get(name)
            .filter(|n| n.op_type() == op && n.input.len() == 2)
            .map(|n| [n.input[0].as_str(), n.input[1].as_str()])
    };
    let is = |name: &str, value: f64| {
        let v = scalar(name, producer.get(name).copied());
        v.is_some_and(|v| (v - value).abs() <= TOLERANCE)
    };
    // x when `name` is 1 + erf(x/√2).
    let erf_arm = |name: &str| -> Option<String> {
        let [p, q] = made_by(name, "Add")?;
        let e = if is(p, 1.0) {
            q
        } else {
            is(q, 1.0).then_some(p)?
        };
        let erf = producer
            .get(e)
            .filter(|n| n.op_type() == "Erf" && n.input.len() == 1)?;
        let s = erf.input[0].as_str();
        if let Some([x, c]) = made_by(s, "Div") {
            return is(c, std::f64::consts::SQRT_2).then(|| x.to_string());
        }
        let [a, b] = made_by(s, "Mul")?;
        let half_sqrt = std::f64::consts::FRAC_1_SQRT_2;
        let x = if is(b, half_sqrt) {
            a
        } else {
            is(a, half_sqrt).then_some(b)?
        };
        Some(x.to_string())
    };
    // Whether the three factors are x, ½ and 1 + erf(x/√2) in some order.
    let matches = |f: [&str; 3]| -> Option<String> {
        (0..3).find_map(|h| {
            let rest: Vec<&str> = (0..3).filter(|&k| k != h).map(|k| f[k]).collect();
            if !is(f[h], 0.5) {
                return None;
            }
            (0..2).find_map(|e| erf_arm(rest[e]).filter(|x| x == rest[1 - e]))
        })
    };
    let mut found = HashMap::new();
    for (i, n) in graph.node.iter().enumerate() {
        let Some([a, b]) = (n.op_type() == "Mul" && n.input.len() == 2)
            .then(|| [n.input[0].as_str(), n.input[1].as_str()])
        else {
            continue;
        };
        let left = made_by(a, "Mul").and_then(|[p, q]| matches([p, q, b]));
        if let Some(x) = left.or_else(|| made_by(b, "Mul").and_then(|[p, q]| matches([a, p, q]))) {
            found.insert(i, x);
        }
    }
    found
}
