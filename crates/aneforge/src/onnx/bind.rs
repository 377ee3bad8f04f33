//! Model inputs bound to constants at import (`input_values`): a static-shape compiler needs
//! the values of shape- or attribute-determining inputs (axes, Resize sizes/scales, TopK k,
//! Trilu k ...) before folding. A bound input is no port of the program: it is a host constant
//! like an initializer. An op that finds such an input still runtime names it in its error.

use std::collections::HashMap;

use super::ops::Value;
use super::proto::{self, type_proto};
use super::tensor::{checked_numel, Elem, HostTensor};
use crate::error::{Error, Result};

/// One model input bound to a constant at import: its ONNX name, its dims (None: the input's
/// declared dims, which must then all be fixed) and its values in C order (converted to the
/// input's declared element type; a value that type cannot hold exactly is an error).
#[derive(Clone, Debug, PartialEq)]
pub struct InputValue {
    pub name: String,
    pub dims: Option<Vec<usize>>,
    pub data: Vec<f64>,
}

/// The error text of an op that needs input `name` (a runtime value) at import.
pub fn needs_value(name: &str) -> String {
    format!("needs its value at import: pass input_values={{'{name}': ...}} (or bind the model inputs it is computed from; Rust: InputValue, CLI: --input-value)")
}

/// Insert each bound input into `values` as a host constant; errors name the input when the
/// model has no such input (or it is an initializer), when the dims disagree with the declared
/// ones or the value count, and when a value does not fit the declared element type.
pub(super) fn bind(
    graph: &proto::GraphProto,
    given: &[InputValue],
    values: &mut HashMap<String, Value>,
) -> Result<()> {
    for b in given {
        let what = format!("onnx input_values '{}'", b.name);
        let input = graph
            .input
            .iter()
            .find(|v| v.name() == b.name)
            .ok_or_else(|| Error::value(&what, "the model has no such input"))?;
        if values.contains_key(&b.name) {
            return Err(Error::value(
                &what,
                "is an initializer, not a runtime input",
            ));
        }
        let Some(type_proto::Value::TensorType(tt)) =
            input.r#type.as_ref().and_then(|t| t.value.as_ref())
        else {
            return Err(Error::value(&what, "only tensor inputs can be bound"));
        };
        let elem = Elem::from_code(tt.elem_type(), &what)?;
        let declared: Option<Vec<Option<usize>>> = tt.shape.as_ref().map(|s| {
            s.dim
                .iter()
                .map(|d| match d.value {
                    Some(proto::tensor_shape_proto::dimension::Value::DimValue(x)) if x >= 0 => {
                        Some(x as usize)
                    }
                    _ => None,
                })
                .collect()
        });
        let dims = match (&b.dims, &declared) {
            (Some(d), _) => d.clone(),
            (None, Some(decl)) if decl.iter().all(Option::is_some) => {
                decl.iter().flatten().copied().collect()
            }
            _ => {
                return Err(Error::shape(
                    &what,
                    "the input's declared shape is not fixed; give the value's dims",
                ))
            }
        };
        if let Some(decl) = &declared {
            let agrees = decl.len() == dims.len()
                && decl
                    .iter()
                    .zip(&dims)
                    .all(|(d, &g)| d.is_none_or(|d| d == g));
            if !agrees {
                return Err(Error::shape(
                    &what,
                    format!("dims {dims:?} disagree with the declared {decl:?}"),
                ));
            }
        }
        if checked_numel(&dims, &what)? != b.data.len() {
            return Err(Error::shape(
                &what,
                format!("{} values for dims {dims:?}", b.data.len()),
            ));
        }
        let mut data = Vec::with_capacity(b.data.len());
        for (k, &v) in b.data.iter().enumerate() {
            let c = elem.convert(v);
            if !elem.is_float() && c != v {
                return Err(Error::value(
                    &what,
                    format!("value {k} = {v} is not a {elem:?}"),
                ));
            }
            data.push(c);
        }
        values.insert(
            b.name.clone(),
            Value::host(HostTensor::new(elem, dims, data, &what)?),
        );
    }
    Ok(())
}
