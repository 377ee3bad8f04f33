//! ESPCN super-resolution in the PyTorch examples layout (`conv1` 5×5, `conv2` 3×3, `conv3`
//! 3×3, `conv4` 3×3 with C·r² outputs, each with a bias; ReLU after the first three; then
//! `pixel_shuffle(r)`): input [1, C, H, W] → [1, C, H·r, W·r].

use std::path::Path;

use super::conv_same;
use super::weights::Weights;
use crate::compile::{compile, CompileOptions, Compiled};
use crate::error::Result;
use crate::exec::PortData;
use crate::input_port;
use crate::DType;

/// A compiled ESPCN upscaler for one input size.
pub struct Espcn {
    /// Image channels C.
    pub channels: usize,
    /// Upscale factor r.
    pub upscale: usize,
    /// Input [1, C, H, W].
    pub input_shape: [usize; 4],
    pub compiled: Compiled,
}

impl Espcn {
    /// Read `path` (safetensors) and compile for [1, C, height, width]; C and the widths come from
    /// the weight shapes, r from `conv4` (C·r² outputs). Bad tensors name the tensor and shape.
    pub fn load(path: &Path, height: usize, width: usize, opts: &CompileOptions) -> Result<Espcn> {
        let w = Weights::open(path)?;
        let dims = |name: &str| -> Result<[usize; 2]> {
            let s = w.shape(name)?;
            match *s {
                [o, i, _, _] => Ok([o, i]),
                _ => Err(w.error(format!(
                    "tensor '{name}' has shape {s:?}, expected rank 4 [out, in, k, k]"
                ))),
            }
        };
        let [f1, c] = dims("conv1.weight")?;
        let [f2, _] = dims("conv2.weight")?;
        let [f3, _] = dims("conv3.weight")?;
        let [out, _] = dims("conv4.weight")?;
        let r = (1..=8).find(|r| r * r * c == out).ok_or_else(|| w.error(format!("tensor 'conv4.weight' has {out} outputs; expected C·r² with C = {c} and r in 1..=8")))?;
        let input_shape = [1, c, height, width];
        let x = input_port(&input_shape, DType::Fp16, Some("image"))?;
        let x = conv_same(&w, &x, "conv1", f1, c, 5)?.relu()?;
        let x = conv_same(&w, &x, "conv2", f2, f1, 3)?.relu()?;
        let x = conv_same(&w, &x, "conv3", f3, f2, 3)?.relu()?;
        let y = conv_same(&w, &x, "conv4", out, f3, 3)?.pixel_shuffle(r)?;
        let compiled = compile(&[(Some("upscaled".into()), y)], opts)?;
        Ok(Espcn {
            channels: c,
            upscale: r,
            input_shape,
            compiled,
        })
    }

    /// The upscaled image [1, C, H·r, W·r] (C order) of an f32 input [1, C, H, W].
    pub fn run(&mut self, image: PortData) -> Result<Vec<f32>> {
        Ok(self.compiled.run(&[image])?.swap_remove(0))
    }
}
