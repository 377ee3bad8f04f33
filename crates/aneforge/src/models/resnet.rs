//! ResNet-18/34/50/101 from a torchvision-layout state dict in safetensors (`conv1.weight`,
//! `bn1.*`, `layer{1..4}.{i}.conv{1,2[,3]}` / `bn*` / `downsample.{0,1}`, `fc.*`): every
//! BatchNorm (eps 1e-5) folded into its conv on the host, input [1, 3, H, W] (fp16, or uint8
//! with ImageNet normalisation in-graph) → logits [1, classes]; bottleneck stride on the 3×3
//! conv (v1.5).

use std::path::Path;

use super::weights::Weights;
use crate::compile::{compile, CompileOptions, Compiled};
use crate::conv2d;
use crate::error::{Error, Result};
use crate::exec::PortData;
use crate::graph::Tensor;
use crate::ops::conv::ConvOptions;
use crate::ops::io::HostArray;
use crate::DType;
use crate::{image_input, input_port};

/// torchvision BatchNorm epsilon.
pub const BN_EPS: f32 = 1e-5;
/// ImageNet channel means (RGB, 0..1 scale).
pub const IMAGENET_MEAN: [f32; 3] = [0.485, 0.456, 0.406];
/// ImageNet channel standard deviations (RGB, 0..1 scale).
pub const IMAGENET_STD: [f32; 3] = [0.229, 0.224, 0.225];

/// Blocks per stage and whether blocks are bottlenecks, for a supported depth.
pub fn stages(depth: usize) -> Result<([usize; 4], bool)> {
    match depth {
        18 => Ok(([2, 2, 2, 2], false)),
        34 => Ok(([3, 4, 6, 3], false)),
        50 => Ok(([3, 4, 6, 3], true)),
        101 => Ok(([3, 4, 23, 3], true)),
        152 => Ok(([3, 8, 36, 3], true)),
        _ => Err(Error::value(
            "resnet",
            format!("depth {depth} is not a torchvision ResNet (18, 34, 50, 101 or 152)"),
        )),
    }
}

/// A compiled ResNet classifier.
pub struct ResNet {
    pub depth: usize,
    /// Number of classes (rows of `fc.weight`).
    pub classes: usize,
    /// Input [1, 3, H, W].
    pub input_shape: [usize; 4],
    /// Whether the input port is uint8 RGB 0..255 (normalised in-graph) rather than fp16.
    pub uint8: bool,
    pub compiled: Compiled,
}

impl ResNet {
    /// Read `path` (safetensors), fold BN, build [1, 3, size, size] → [1, classes] and compile
    /// with `opts`. Missing tensors or wrong shapes are Format errors naming the tensor and
    /// the expected shape.
    pub fn load(
        path: &Path,
        depth: usize,
        size: usize,
        uint8: bool,
        opts: &CompileOptions,
    ) -> Result<ResNet> {
        let w = Weights::open(path)?;
        let (blocks, bottleneck) = stages(depth)?;
        let input_shape = [1, 3, size, size];
        let x = if uint8 {
            let scale: Vec<f32> = IMAGENET_STD.iter().map(|s| 1.0 / (255.0 * s)).collect();
            let bias: Vec<f32> = IMAGENET_MEAN
                .iter()
                .zip(IMAGENET_STD)
                .map(|(m, s)| -m / s)
                .collect();
            image_input(&input_shape, &scale, &bias, Some("image"))?
        } else {
            input_port(&input_shape, DType::Fp16, Some("image"))?
        };
        let mut x = conv_bn(&w, &x, "conv1", "bn1", [64, 3, 7], 2)?
            .relu()?
            .max_pool([3, 3], [2, 2], [1, 1, 1, 1])?;
        let expansion = if bottleneck { 4 } else { 1 };
        let mut cin = 64;
        for (stage, &n) in blocks.iter().enumerate() {
            let width = 64 << stage;
            for b in 0..n {
                let stride = if b == 0 && stage > 0 { 2 } else { 1 };
                let name = format!("layer{}.{b}", stage + 1);
                let shortcut = if stride != 1 || cin != width * expansion {
                    conv_bn(
                        &w,
                        &x,
                        &format!("{name}.downsample.0"),
                        &format!("{name}.downsample.1"),
                        [width * expansion, cin, 1],
                        stride,
                    )?
                } else {
                    x.clone()
                };
                let c = |x: &Tensor, i: usize, cout: usize, cin: usize, k: usize, s: usize| {
                    conv_bn(
                        &w,
                        x,
                        &format!("{name}.conv{i}"),
                        &format!("{name}.bn{i}"),
                        [cout, cin, k],
                        s,
                    )
                };
                let y = if bottleneck {
                    let y = c(&x, 1, width, cin, 1, 1)?.relu()?;
                    let y = c(&y, 2, width, width, 3, stride)?.relu()?;
                    c(&y, 3, width * 4, width, 1, 1)?
                } else {
                    let y = c(&x, 1, width, cin, 3, stride)?.relu()?;
                    c(&y, 2, width, width, 3, 1)?
                };
                x = y.add(&shortcut)?.relu()?;
                cin = width * expansion;
            }
        }
        let classes = w.shape("fc.weight")?.first().copied().unwrap_or(0);
        let pooled = x.mean(&[2, 3], false)?;
        let logits = super::lin(&w, &pooled, "fc", classes, cin, 1.0)?;
        let compiled = compile(&[(Some("logits".into()), logits)], opts)?;
        Ok(ResNet {
            depth,
            classes,
            input_shape,
            uint8,
            compiled,
        })
    }

    /// Logits [classes] of one image: f32 [1, 3, H, W] values (already normalised) for an fp16
    /// port, or uint8 RGB 0..255 for a uint8 port.
    pub fn run(&mut self, image: PortData) -> Result<Vec<f32>> {
        Ok(self.compiled.run(&[image])?.swap_remove(0))
    }
}

/// Conv `{conv}.weight` [cout, cin, k, k] (no bias) with BatchNorm `{bn}.*` folded in, padding k/2.
fn conv_bn(
    w: &Weights,
    x: &Tensor,
    conv: &str,
    bn: &str,
    [cout, cin, k]: [usize; 3],
    stride: usize,
) -> Result<Tensor> {
    let mut wt = w.get(&format!("{conv}.weight"), &[cout, cin, k, k])?;
    let g = w.get(&format!("{bn}.weight"), &[cout])?;
    let beta = w.get(&format!("{bn}.bias"), &[cout])?;
    let mean = w.get(&format!("{bn}.running_mean"), &[cout])?;
    let var = w.get(&format!("{bn}.running_var"), &[cout])?;
    let per = cin * k * k;
    let mut bias = vec![0f32; cout];
    for o in 0..cout {
        let s = g[o] / (var[o] + BN_EPS).sqrt();
        wt[o * per..(o + 1) * per].iter_mut().for_each(|v| *v *= s);
        bias[o] = beta[o] - mean[o] * s;
    }
    let p = k / 2;
    let opts = ConvOptions {
        stride: [stride, stride],
        pad: [p, p, p, p],
        ..Default::default()
    };
    conv2d(
        x,
        HostArray::f32(&[cout, cin, k, k], &wt),
        Some(HostArray::f32(&[cout], &bias)),
        opts,
    )
}
