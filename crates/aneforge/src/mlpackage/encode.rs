//! Lowered program → Core ML `Model` message holding the MIL program, plus the weight blob it
//! references. Generic over the op set: every op is encoded from its [`MilOp`] spelling (op
//! name, named tensor arguments, compile-time parameters, inline blob tensors), exactly as the
//! text printer spells it: parameters become named `const` ops (`{op}_{param}`), fp16 weight
//! tensors become `const` ops whose value lives in `weights/weight.bin`.

use std::collections::HashMap;

use half::f16;

use super::proto::specification as spec;
use super::proto::specification::mil_spec as mil;
use super::spec_version::{ConstexprForm, CoreMlOpset};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::graph::{Graph, Value};
use crate::mil::blob::{Blob, BlobType, Payload};
use crate::mil::print::{param_const_name, statement_name, value_names};
use crate::mil::{Literal, MilInputs};
use crate::ops::{Op, TensorType};
use crate::program::{PortSpec, Program};

/// Where BLOBFILE values point, relative to the package's model directory.
pub const WEIGHT_FILE: &str = "@model_path/weights/weight.bin";
/// The name of the one function.
pub const FUNCTION: &str = "main";

/// A program encoded for an .mlpackage: the `Model` message and the weight.bin contents.
#[derive(Clone, Debug)]
pub struct EncodedModel {
    pub model: spec::Model,
    pub weights: Blob,
    pub opset: CoreMlOpset,
}

/// Encode `program` (its opset picks the spec version); NotImplemented for ports Core ML cannot
/// describe (uint8 ports that are not [1, 1 or 3, H, W] images feeding casts) and for opsets
/// without a Core ML mapping.
pub fn encode(program: &Program) -> Result<EncodedModel> {
    let opset = CoreMlOpset::of_program(program)?;
    let description = spec::ModelDescription {
        input: program
            .inputs()
            .iter()
            .map(feature)
            .collect::<Result<_>>()?,
        output: program
            .outputs()
            .iter()
            .map(feature)
            .collect::<Result<_>>()?,
        metadata: Some(spec::Metadata {
            short_description: String::new(),
            user_defined: HashMap::from([(
                "com.github.aneforge.version".to_string(),
                env!("CARGO_PKG_VERSION").to_string(),
            )]),
        }),
    };
    let mut enc = Encoder {
        g: &program.graph,
        names: value_names(&program.graph)?,
        blob: Blob::new(),
        ops: Vec::new(),
        opset,
    };
    for i in 0..enc.g.nodes.len() {
        enc.node(i)?;
    }
    let g = &program.graph;
    let function = mil::Function {
        inputs: g
            .inputs
            .iter()
            .map(|&i| function_input(&enc.names[i][0], &g.nodes[i].outputs[0]))
            .collect(),
        opset: opset.name.to_string(),
        block_specializations: HashMap::from([(
            opset.name.to_string(),
            mil::Block {
                outputs: g.outputs.iter().map(|(n, _)| n.clone()).collect(),
                operations: std::mem::take(&mut enc.ops),
            },
        )]),
    };
    let model = spec::Model {
        specification_version: opset.spec_version,
        description: Some(description),
        r#type: Some(spec::model::Type::MlProgram(mil::Program {
            version: 1,
            functions: HashMap::from([(FUNCTION.to_string(), function)]),
        })),
    };
    Ok(EncodedModel {
        model,
        weights: enc.blob,
        opset,
    })
}

/// The description of one port: an FLOAT16 multi-array for fp16 ports; an image (RGB for 3
/// channels, GRAYSCALE for 1) for uint8 ports of shape [1, C, H, W]. Other uint8 ports are
/// NotImplemented (Core ML multi-arrays have no uint8 type).
fn feature(p: &PortSpec) -> Result<spec::FeatureDescription> {
    use spec::image_feature_type::ColorSpace;
    let ty = match (p.dtype, p.shape.as_slice()) {
        (DType::Fp16, _) => {
            let array = spec::ArrayFeatureType { shape: p.shape.iter().map(|&d| d as i64).collect(), data_type: spec::array_feature_type::ArrayDataType::Float16 as i32 };
            spec::feature_type::Type::MultiArrayType(array)
        }
        (DType::Uint8, &[1, c @ (1 | 3), h, w]) => {
            let color_space = if c == 3 { ColorSpace::Rgb } else { ColorSpace::Grayscale };
            spec::feature_type::Type::ImageType(spec::ImageFeatureType { width: w as i64, height: h as i64, color_space: color_space as i32 })
        }
        _ => {
            return Err(Error::NotImplemented(format!(
                "export: port '{}' is {} {:?}; Core ML has no {} multi-array type, and only uint8 ports of shape [1, 1 or 3, H, W] export (as images)",
                p.name, p.dtype, p.shape, p.dtype
            )))
        }
    };
    Ok(spec::FeatureDescription {
        name: p.name.clone(),
        short_description: String::new(),
        r#type: Some(spec::FeatureType {
            is_optional: false,
            r#type: Some(ty),
        }),
    })
}

/// A function input: Core ML feeds image ports as fp32 pixel values (0..=255), so a uint8
/// port becomes an fp32 tensor; its only consumers are casts to fp16 (checked when encoding).
fn function_input(name: &str, t: &TensorType) -> mil::NamedValueType {
    let dtype = if t.dtype == DType::Uint8 {
        mil::DataType::Float32
    } else {
        data_type(t.dtype)
    };
    mil::NamedValueType {
        name: name.to_string(),
        r#type: Some(tensor_type(dtype, &t.shape)),
    }
}

/// MIL element type of a graph dtype.
fn data_type(d: DType) -> mil::DataType {
    match d {
        DType::Fp16 => mil::DataType::Float16,
        DType::Uint8 => mil::DataType::Uint8,
        DType::Bool => mil::DataType::Bool,
        DType::Int32 => mil::DataType::Int32,
    }
}

/// MIL element type of a blob payload type.
fn blob_data_type(t: BlobType) -> mil::DataType {
    match t {
        BlobType::Fp16 => mil::DataType::Float16,
        BlobType::Int8 => mil::DataType::Int8,
        BlobType::Uint4 => mil::DataType::Uint4,
        BlobType::Uint1 => mil::DataType::Uint1,
    }
}

/// A tensor value type of `dtype` and static `shape` (rank 0 = scalar).
pub fn tensor_type(dtype: mil::DataType, shape: &[usize]) -> mil::ValueType {
    let dimensions = shape
        .iter()
        .map(|&d| mil::Dimension {
            dimension: Some(mil::dimension::Dimension::Constant(
                mil::dimension::ConstantDimension { size: d as u64 },
            )),
        })
        .collect();
    mil::ValueType {
        r#type: Some(mil::value_type::Type::TensorType(mil::TensorType {
            data_type: dtype as i32,
            rank: shape.len() as i64,
            dimensions,
        })),
    }
}

fn named(name: &str, t: &TensorType) -> mil::NamedValueType {
    mil::NamedValueType {
        name: name.to_string(),
        r#type: Some(tensor_type(data_type(t.dtype), &t.shape)),
    }
}

/// An inline value of `dtype` and `shape` with contents `tensor`.
fn immediate(
    dtype: mil::DataType,
    shape: &[usize],
    tensor: mil::tensor_value::Value,
) -> mil::Value {
    mil::Value {
        r#type: Some(tensor_type(dtype, shape)),
        value: Some(mil::value::Value::ImmediateValue(
            mil::value::ImmediateValue {
                value: Some(mil::value::immediate_value::Value::Tensor(
                    mil::TensorValue {
                        value: Some(tensor),
                    },
                )),
            },
        )),
    }
}

/// A literal as an inline value, in the TensorValue field Core ML reads for its type: fp16,
/// int8 and uint32 as little-endian `bytes`, fp32 as `floats`, int32 as `ints`.
pub fn literal_value(lit: &Literal) -> mil::Value {
    use mil::tensor_value::{
        RepeatedBools, RepeatedBytes, RepeatedFloats, RepeatedInts, RepeatedStrings, Value as T,
    };
    let bytes = |values: Vec<u8>| T::Bytes(RepeatedBytes { values });
    match lit {
        Literal::Fp16(v) => immediate(
            mil::DataType::Float16,
            &[],
            bytes(f16::from_f32(*v).to_le_bytes().to_vec()),
        ),
        Literal::Fp32(v) => immediate(
            mil::DataType::Float32,
            &[],
            T::Floats(RepeatedFloats { values: vec![*v] }),
        ),
        Literal::Int32(v) => immediate(
            mil::DataType::Int32,
            &[],
            T::Ints(RepeatedInts { values: vec![*v] }),
        ),
        Literal::Int8(v) => immediate(mil::DataType::Int8, &[], bytes(v.to_le_bytes().to_vec())),
        Literal::Uint32(v) => {
            immediate(mil::DataType::Uint32, &[], bytes(v.to_le_bytes().to_vec()))
        }
        Literal::Bool(v) => immediate(
            mil::DataType::Bool,
            &[],
            T::Bools(RepeatedBools { values: vec![*v] }),
        ),
        Literal::Str(s) => immediate(
            mil::DataType::String,
            &[],
            T::Strings(RepeatedStrings {
                values: vec![s.clone()],
            }),
        ),
        Literal::Ints(v) => immediate(
            mil::DataType::Int32,
            &[v.len()],
            T::Ints(RepeatedInts { values: v.clone() }),
        ),
    }
}

/// An argument bound to the value named `name`.
fn by_name(name: &str) -> mil::Argument {
    by_names([name])
}

/// A (tuple) argument bound to the values named `names`.
fn by_names<'a>(names: impl IntoIterator<Item = &'a str>) -> mil::Argument {
    mil::Argument {
        arguments: names
            .into_iter()
            .map(|n| mil::argument::Binding {
                binding: Some(mil::argument::binding::Binding::Name(n.to_string())),
            })
            .collect(),
    }
}

/// An argument given inline (iOS18 constexpr tensors).
fn inline(v: mil::Value) -> mil::Argument {
    mil::Argument {
        arguments: vec![mil::argument::Binding {
            binding: Some(mil::argument::binding::Binding::Value(v)),
        }],
    }
}

/// The single `name` attribute every op carries, plus `extra`.
fn attributes(name: &str, extra: Vec<(String, mil::Value)>) -> HashMap<String, mil::Value> {
    let mut a: HashMap<String, mil::Value> = extra.into_iter().collect();
    a.insert(
        "name".into(),
        literal_value(&Literal::Str(name.to_string())),
    );
    a
}

/// Walks the graph, appending operations and blob payloads.
struct Encoder<'g> {
    g: &'g Graph,
    names: Vec<Vec<String>>,
    blob: Blob,
    ops: Vec<mil::Operation>,
    opset: CoreMlOpset,
}

impl Encoder<'_> {
    /// A value stored in weight.bin (the offset is the payload's descriptor).
    fn blob_value(&mut self, shape: &[usize], payload: Payload) -> mil::Value {
        let dtype = blob_data_type(payload.ty());
        let offset = self.blob.push(payload);
        mil::Value {
            r#type: Some(tensor_type(dtype, shape)),
            value: Some(mil::value::Value::BlobFileValue(
                mil::value::BlobFileValue {
                    file_name: WEIGHT_FILE.into(),
                    offset,
                },
            )),
        }
    }

    /// A `const` op named `name` holding `val`.
    fn push_const(&mut self, name: &str, val: mil::Value) {
        let output = mil::NamedValueType {
            name: name.to_string(),
            r#type: val.r#type.clone(),
        };
        let attributes = attributes(name, vec![("val".into(), val)]);
        self.ops.push(mil::Operation {
            r#type: "const".into(),
            inputs: HashMap::new(),
            outputs: vec![output],
            attributes,
        });
    }

    fn name_of(&self, v: &Value) -> &str {
        &self.names[v.node][v.port]
    }

    /// Encode node `i` (inputs are function inputs, not ops).
    fn node(&mut self, i: usize) -> Result<()> {
        let node = &self.g.nodes[i];
        let image = node.inputs.iter().find(|v| {
            matches!(self.g.nodes[v.node].op, Op::Input(_)) && self.g.ty(**v).dtype == DType::Uint8
        });
        if let (Some(v), false) = (image, matches!(node.op, Op::Cast(_))) {
            return Err(Error::NotImplemented(format!(
                "export: uint8 port '{}' feeds {}; an exported image port may only feed casts",
                self.name_of(v),
                node.op.family().name()
            )));
        }
        match &node.op {
            Op::Input(_) => {}
            Op::Const(c) => {
                let val = if c.shape.is_empty() {
                    literal_value(&Literal::Fp16(c.values[0].to_f32()))
                } else {
                    self.blob_value(&c.shape, Payload::Fp16(c.values.clone()))
                };
                let name = self.names[i][0].clone();
                self.push_const(&name, val);
            }
            op => {
                let m = op.family().mil();
                let stmt = statement_name(&self.names, i);
                let form = self.opset.constexpr_form(m.op);
                let mut inputs: HashMap<String, mil::Argument> = HashMap::new();
                let mut extra: Vec<(String, mil::Value)> = Vec::new();
                for (pname, lit) in &m.params {
                    match form {
                        Some(ConstexprForm::Attributes) => {
                            extra.push((pname.to_string(), literal_value(lit)))
                        }
                        Some(ConstexprForm::Inline) => {
                            inputs.insert(pname.to_string(), inline(literal_value(lit)));
                        }
                        None => {
                            let cname = param_const_name(&stmt, pname);
                            self.push_const(&cname, literal_value(lit));
                            inputs.insert(pname.to_string(), by_name(&cname));
                        }
                    }
                }
                for (aname, shape, payload) in &m.blobs {
                    let v = self.blob_value(shape, payload.clone());
                    match form {
                        Some(ConstexprForm::Attributes) => extra.push((aname.to_string(), v)),
                        _ => {
                            inputs.insert(aname.to_string(), inline(v));
                        }
                    }
                }
                match &m.inputs {
                    MilInputs::Named(keys) => {
                        for (k, v) in keys.iter().zip(&node.inputs) {
                            inputs.insert(k.to_string(), by_name(self.name_of(v)));
                        }
                    }
                    MilInputs::Tuple(key) => {
                        let arg = by_names(node.inputs.iter().map(|v| self.name_of(v)));
                        inputs.insert(key.to_string(), arg);
                    }
                }
                let outputs = node
                    .outputs
                    .iter()
                    .zip(&self.names[i])
                    .map(|(t, n)| named(n, t))
                    .collect();
                self.ops.push(mil::Operation {
                    r#type: m.op.to_string(),
                    inputs,
                    outputs,
                    attributes: attributes(&stmt, extra),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes_of(v: &mil::Value) -> (i32, Vec<u8>) {
        let Some(mil::value::Value::ImmediateValue(mil::value::ImmediateValue {
            value: Some(mil::value::immediate_value::Value::Tensor(t)),
        })) = &v.value
        else {
            panic!("not inline")
        };
        let Some(mil::tensor_value::Value::Bytes(b)) = &t.value else {
            panic!("not bytes: {t:?}")
        };
        let Some(mil::value_type::Type::TensorType(tt)) = &v.r#type.as_ref().unwrap().r#type else {
            panic!()
        };
        (tt.data_type, b.values.clone())
    }

    /// Sub-32-bit and fp16 scalars travel as little-endian bytes, as Core ML reads them.
    #[test]
    fn byte_encoded_literals() {
        assert_eq!(
            bytes_of(&literal_value(&Literal::Fp16(1.5))),
            (mil::DataType::Float16 as i32, vec![0x00, 0x3e])
        );
        assert_eq!(
            bytes_of(&literal_value(&Literal::Fp16(-0.1))),
            (
                mil::DataType::Float16 as i32,
                0xae66u16.to_le_bytes().to_vec()
            )
        );
        assert_eq!(
            bytes_of(&literal_value(&Literal::Int8(-3))),
            (mil::DataType::Int8 as i32, vec![0xfd])
        );
        assert_eq!(
            bytes_of(&literal_value(&Literal::Uint32(258))),
            (mil::DataType::Uint32 as i32, vec![2, 1, 0, 0])
        );
    }

    /// Vectors carry their length as a rank-1 shape; scalars are rank 0.
    #[test]
    fn literal_types_carry_shape() {
        let v = literal_value(&Literal::Ints(vec![3, -1, 2]));
        let Some(mil::value_type::Type::TensorType(t)) = v.r#type.unwrap().r#type else {
            panic!()
        };
        assert_eq!(
            (t.data_type, t.rank, t.dimensions.len()),
            (mil::DataType::Int32 as i32, 1, 1)
        );
        let s = literal_value(&Literal::Str("x".into()));
        let Some(mil::value_type::Type::TensorType(t)) = s.r#type.unwrap().r#type else {
            panic!()
        };
        assert_eq!((t.data_type, t.rank), (mil::DataType::String as i32, 0));
    }
}
