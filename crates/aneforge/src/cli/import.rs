//! `aneforge import MODEL.onnx -o DIR [--input-shape name=1,3,224,224] [--compress ...]`: an
//! ONNX model as a program directory (then `aneforge run DIR`).

use std::path::Path;

use crate::compile::{export, CompileOptions};
use crate::error::{Error, Result};

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

/// Import `model` (symbolic dims from `shapes`), write its program directory per `opts`
/// (`-o` is its build_dir) and print the directory; errors list unsupported ops at once.
pub(super) fn import(model: &Path, shapes: &[String], opts: &CompileOptions) -> Result<()> {
    let shapes = shapes
        .iter()
        .map(|s| parse_shape(s))
        .collect::<Result<Vec<_>>>()?;
    let imported = crate::onnx::import_file(model, &shapes)?;
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
}
