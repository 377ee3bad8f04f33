//! Graph → `model.mil` text + `weights.bin` image. One statement per node (plus one named
//! `const()` per compile-time parameter), arguments in alphabetical order, fp16 scalars as
//! hex floats, weights as `BLOBFILE` references to their descriptors (inline typed `BLOBFILE`
//! tensor arguments for constexpr ops).

use std::collections::HashSet;
use std::fmt::Write;

use super::blob::{Blob, Payload};
use super::literal::Literal;
use super::MilInputs;
use crate::error::{Error, Result};
use crate::graph::{Graph, Value};
use crate::ops::{Op, TensorType};
use crate::targets::Opset;

/// Header attribute line identifying the compiler generation the text was written for.
pub const BUILD_INFO: &str = r#"[buildInfo = dict<string, string>({{"coremlc-component-MIL", "3520.4.1"}, {"coremlc-version", "3520.5.1"}})]"#;
/// Function opset tag of [`print`] (the newest; [`print_for`] takes any [`Opset`]).
pub const OPSET: &str = Opset::LATEST.name();
/// Path of the weight file as MIL spells it.
pub const WEIGHTS_PATH: &str = "@model_path/weights.bin";

/// A printed program: MIL text and the weights.bin image.
#[derive(Clone, Debug, PartialEq)]
pub struct Printed {
    pub mil: String,
    pub weights: Blob,
}

/// MIL spelling of a value type: `tensor<fp16, [1, 3]>`, or `fp16` for a rank-0 value.
pub fn type_str(t: &TensorType) -> String {
    if t.shape.is_empty() {
        return t.dtype.mil().to_string();
    }
    let dims: Vec<String> = t.shape.iter().map(|d| d.to_string()).collect();
    format!("tensor<{}, [{}]>", t.dtype.mil(), dims.join(", "))
}

/// A typed `BLOBFILE` tensor value pointing at the descriptor at `offset`.
fn blobfile(dtype: &str, shape: &[usize], offset: u64) -> String {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    format!("tensor<{dtype}, [{}]>(BLOBFILE(path = string(\"{WEIGHTS_PATH}\"), offset = uint64({offset})))", dims.join(", "))
}

/// Names of every value: input names, output names, else `t{node}` / `t{node}_{port}`.
pub fn value_names(g: &Graph) -> Result<Vec<Vec<String>>> {
    let mut names: Vec<Vec<String>> = g
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| match (&n.op, n.outputs.len()) {
            (Op::Input(_), _) => vec![g.input_name(i).to_string()],
            (_, 1) => vec![format!("t{i}")],
            (_, k) => (0..k).map(|p| format!("t{i}_{p}")).collect(),
        })
        .collect();
    for (name, v) in &g.outputs {
        if matches!(g.nodes[v.node].op, Op::Input(_)) {
            return Err(Error::value(
                "compile",
                format!("output '{name}' is an input port; copy it through an op first"),
            ));
        }
        names[v.node][v.port] = name.clone();
    }
    Ok(names)
}

/// The statement name of non-const node `i`: its value name, or `t{i}` for a multi-output node.
pub fn statement_name(names: &[Vec<String>], i: usize) -> String {
    if names[i].len() > 1 {
        format!("t{i}")
    } else {
        names[i][0].clone()
    }
}

/// The name of the `const` carrying parameter `param` of statement `stmt`.
pub fn param_const_name(stmt: &str, param: &str) -> String {
    format!("{stmt}_{param}")
}

/// Print `g` for the newest opset (see [`print_for`]).
pub fn print(g: &Graph) -> Result<Printed> {
    print_for(g, Opset::LATEST)
}

/// Print `g` as MIL text for `opset` (header `program(1.x)` and `func main<iosNN>`) plus its
/// weight blob. Fails on name clashes between user port names and generated names, and on an
/// op `opset` lacks (naming the op, the opset and the first opset that has it).
pub fn print_for(g: &Graph, opset: Opset) -> Result<Printed> {
    let names = value_names(g)?;
    let mut seen: HashSet<String> = HashSet::new();
    let mut claim = |name: &str| -> Result<()> {
        if !seen.insert(name.to_string()) {
            return Err(Error::value(
                "compile",
                format!("MIL name '{name}' is generated twice; rename the port that uses it"),
            ));
        }
        Ok(())
    };
    let mut blob = Blob::new();
    let mut body = String::new();
    let name_of = |v: &Value| names[v.node][v.port].as_str();

    for (i, node) in g.nodes.iter().enumerate() {
        for n in &names[i] {
            claim(n)?;
        }
        match &node.op {
            Op::Input(_) => {}
            Op::Const(c) => {
                let ty = type_str(&node.outputs[0]);
                let val = if c.shape.is_empty() {
                    Literal::Fp16(c.values[0].to_f32()).mil_value()
                } else {
                    blobfile("fp16", &c.shape, blob.push(Payload::Fp16(c.values.clone())))
                };
                let n = &names[i][0];
                writeln!(
                    body,
                    "        {ty} {n} = const()[name = string(\"{n}\"), val = {val}];"
                )
                .expect("write to String");
            }
            op => {
                let m = op.family().mil();
                opset.require(m.op)?;
                let stmt = statement_name(&names, i);
                let mut args: Vec<(String, String)> = Vec::new();
                for (pname, lit) in &m.params {
                    let cname = param_const_name(&stmt, pname);
                    claim(&cname)?;
                    writeln!(
                        body,
                        "        {} {cname} = const()[name = string(\"{cname}\"), val = {}];",
                        lit.mil_type(),
                        lit.mil_value()
                    )
                    .expect("write to String");
                    args.push((pname.to_string(), cname));
                }
                for (aname, shape, payload) in &m.blobs {
                    args.push((
                        aname.to_string(),
                        blobfile(payload.ty().mil(), shape, blob.push(payload.clone())),
                    ));
                }
                match &m.inputs {
                    MilInputs::Named(keys) => {
                        for (k, v) in keys.iter().zip(&node.inputs) {
                            args.push((k.to_string(), name_of(v).to_string()));
                        }
                    }
                    MilInputs::Tuple(key) => {
                        let vals: Vec<&str> = node.inputs.iter().map(name_of).collect();
                        args.push((key.to_string(), format!("({})", vals.join(", "))));
                    }
                }
                args.sort();
                let outs: Vec<String> = node
                    .outputs
                    .iter()
                    .zip(&names[i])
                    .map(|(t, n)| format!("{} {n}", type_str(t)))
                    .collect();
                let args: Vec<String> = args.iter().map(|(k, v)| format!("{k} = {v}")).collect();
                writeln!(
                    body,
                    "        {} = {}({})[name = string(\"{stmt}\")];",
                    outs.join(", "),
                    m.op,
                    args.join(", ")
                )
                .expect("write to String");
            }
        }
    }

    let params: Vec<String> = g
        .inputs
        .iter()
        .map(|&i| format!("{} {}", type_str(&g.nodes[i].outputs[0]), names[i][0]))
        .collect();
    let outs: Vec<&str> = g.outputs.iter().map(|(n, _)| n.as_str()).collect();
    let mut mil = String::with_capacity(body.len() + 512);
    let version = opset.program_version();
    writeln!(
        mil,
        "program({version})\n{BUILD_INFO}\n{{\n    func main<{opset}>({}) {{",
        params.join(", ")
    )
    .expect("write to String");
    mil.push_str(&body);
    writeln!(mil, "    }} -> ({});\n}}", outs.join(", ")).expect("write to String");
    Ok(Printed { mil, weights: blob })
}
