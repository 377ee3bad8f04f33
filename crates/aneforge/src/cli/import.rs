//! `aneforge import MODEL.onnx -o DIR [--input-shape name=1,3,224,224] [--compress ...]`: an
//! ONNX model as a program directory (then `aneforge run DIR`).

use std::path::Path;

use crate::compile::{export, CompileOptions};
use crate::error::{Error, Result};
use crate::onnx::InputValue;

/// `name=d0,d1,...` as (name, dims); errors quote the bad flag.
fn parse_shape(flag: &str) -> Result<(String, Vec<usize>)> {
    let bad = || {
        Error::value(
            "--input-shape",
            format!("'{flag}' is not NAME=D0,D1,... with positive integers"),
        )
    };
    let (name, dims) = flag.split_once('=').ok_or_else(bad)?;
    let dims = dims
        .split(',')
        .map(|d| {
            d.trim()
                .parse::<usize>()
                .ok()
                .filter(|&d| d > 0)
                .ok_or_else(bad)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((name.to_string(), dims))
}

/// `name=v0,v1,...` as an input bound at import (dims: the input's declared ones); errors
/// quote the bad flag.
fn parse_value(flag: &str) -> Result<InputValue> {
    let bad = || {
        Error::value(
            "--input-value",
            format!("'{flag}' is not NAME=V0,V1,... with finite numbers"),
        )
    };
    let (name, values) = flag.split_once('=').ok_or_else(bad)?;
    let data = values
        .split(',')
        .map(|v| {
            v.trim()
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(bad)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(InputValue {
        name: name.to_string(),
        dims: None,
        data,
    })
}

/// Import `model` (symbolic dims from `shapes`, inputs bound by `values`), write its program
/// directory per `opts` (`-o` is its build_dir) and print the directory; errors list
/// unsupported ops at once.
pub(super) fn import(
    model: &Path,
    shapes: &[String],
    values: &[String],
    opts: &CompileOptions,
) -> Result<()> {
    let shapes = shapes
        .iter()
        .map(|s| parse_shape(s))
        .collect::<Result<Vec<_>>>()?;
    let values = values
        .iter()
        .map(|s| parse_value(s))
        .collect::<Result<Vec<_>>>()?;
    let imported = crate::onnx::import_file_with_values(model, &shapes, &values)?;
    let e = export(&imported.named_outputs(), opts)?;
    for p in imported.inputs.iter().chain(&imported.outputs) {
        println!("{} -> port {} {:?}", p.onnx_name, p.name, p.tensor.shape());
    }
    println!("wrote {}", e.dir.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn input_shape_flags_parse_or_name_the_bad_flag() {
        assert_eq!(
            super::parse_shape("x=1,3,224,224").unwrap(),
            ("x".into(), vec![1, 3, 224, 224])
        );
        for bad in ["x", "x=1,0", "x=a", "x=1,-2"] {
            let msg = super::parse_shape(bad).unwrap_err().to_string();
            assert!(msg.contains(bad), "{msg}");
        }
    }

    #[test]
    fn input_value_flags_parse_or_name_the_bad_flag() {
        let v = super::parse_value("axes=0,-1").unwrap();
        assert_eq!(
            (v.name.as_str(), v.dims, v.data),
            ("axes", None, vec![0.0, -1.0])
        );
        for bad in ["axes", "axes=", "axes=1,x", "axes=nan"] {
            let msg = super::parse_value(bad).unwrap_err().to_string();
            assert!(msg.contains(bad), "{msg}");
        }
    }
}
