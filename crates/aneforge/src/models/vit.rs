//! ViT image classifiers in the Hugging Face `ViTForImageClassification` layout (`vit.` prefix,
//! `classifier.*`) with their `config.json`: the patch embedding as space_to_depth(P) + 1×1 conv
//! (weights permuted to DCR channel order on the host), the class token and position embedding
//! baked, pre-norm blocks, the final LayerNorm and the class-token row picked by a one-hot matmul.

use std::path::Path;

use super::weights::Weights;
use super::{
    gelu_mlp, json_file, json_layers, json_opt_positive, json_opt_usize, json_usize, layer_norm,
    lin, require_field, self_attention,
};
use crate::compile::{compile, CompileOptions, Compiled};
use crate::concat;
use crate::conv2d;
use crate::error::{Error, Result};
use crate::exec::PortData;
use crate::ops::conv::ConvOptions;
use crate::ops::io::HostArray;
use crate::DType;
use crate::{constant, input_port};

/// ViT hyper-parameters from `config.json` (hidden_size, num_hidden_layers, num_attention_heads,
/// intermediate_size, image_size, patch_size, num_channels, layer_norm_eps).
#[derive(Clone, Debug, PartialEq)]
pub struct VitConfig {
    pub hidden: usize,
    pub layers: usize,
    pub heads: usize,
    pub intermediate: usize,
    pub image_size: usize,
    pub patch_size: usize,
    pub channels: usize,
    pub layer_norm_eps: f32,
}

impl VitConfig {
    /// Read `config.json`; `hidden_act` other than `gelu` is NotImplemented, missing fields are Format errors.
    pub fn from_file(path: &Path) -> Result<VitConfig> {
        let v = json_file(path)?;
        require_field(&v, "hidden_act", "gelu", path)?;
        let cfg = VitConfig {
            hidden: json_usize(&v, "hidden_size", path)?,
            layers: json_layers(&v, "num_hidden_layers", path)?,
            heads: json_usize(&v, "num_attention_heads", path)?,
            intermediate: json_usize(&v, "intermediate_size", path)?,
            image_size: json_usize(&v, "image_size", path)?,
            patch_size: json_usize(&v, "patch_size", path)?,
            channels: json_opt_usize(&v, "num_channels", 3, path)?,
            layer_norm_eps: json_opt_positive(&v, "layer_norm_eps", 1e-12, path)? as f32,
        };
        if cfg.heads == 0
            || !cfg.hidden.is_multiple_of(cfg.heads)
            || cfg.patch_size == 0
            || !cfg.image_size.is_multiple_of(cfg.patch_size)
        {
            return Err(Error::format(path, None, format!("hidden_size {} must divide by num_attention_heads {} and image_size {} by patch_size {}", cfg.hidden, cfg.heads, cfg.image_size, cfg.patch_size)));
        }
        Ok(cfg)
    }
}

/// A compiled ViT classifier: [1, C, S, S] (normalised pixels) → logits [1, classes].
pub struct Vit {
    pub config: VitConfig,
    pub classes: usize,
    pub compiled: Compiled,
}

impl Vit {
    /// Load a folder with `config.json` and `model.safetensors` and compile it.
    pub fn load(dir: &Path, opts: &CompileOptions) -> Result<Vit> {
        let c = VitConfig::from_file(&dir.join("config.json"))?;
        let w = Weights::open(&dir.join("model.safetensors"))?;
        let (d, p, ch) = (c.hidden, c.patch_size, c.channels);
        let g = c.image_size / p;
        let n = g * g + 1;
        let x = input_port(
            &[1, ch, c.image_size, c.image_size],
            DType::Fp16,
            Some("image"),
        )?;
        // HF conv weight [D, C, P, P] → 1×1 conv over space_to_depth channels (i·P + j)·C + c.
        let pw = w.get(
            "vit.embeddings.patch_embeddings.projection.weight",
            &[d, ch, p, p],
        )?;
        let k = ch * p * p;
        let perm: Vec<f32> = (0..d * k)
            .map(|idx| {
                let (o, r) = (idx / k, idx % k);
                let (ij, cc) = (r / ch, r % ch);
                pw[((o * ch + cc) * p + ij / p) * p + ij % p]
            })
            .collect();
        let pb = w.get("vit.embeddings.patch_embeddings.projection.bias", &[d])?;
        let patches = conv2d(
            &x.space_to_depth(p)?,
            HostArray::f32(&[d, k, 1, 1], &perm),
            Some(HostArray::f32(&[d], &pb)),
            ConvOptions::default(),
        )?;
        let patches = patches
            .reshape(&[d as i64, (g * g) as i64])?
            .transpose(&[1, 0])?;
        let cls = w.get("vit.embeddings.cls_token", &[1, 1, d])?;
        let pos = w.get("vit.embeddings.position_embeddings", &[1, n, d])?;
        let mut h = concat(
            &[constant("vit", HostArray::f32(&[1, d], &cls))?, patches],
            0,
        )?
        .add(&constant("vit", HostArray::f32(&[n, d], &pos))?)?;
        for l in 0..c.layers {
            let name = format!("vit.encoder.layer.{l}");
            let a = layer_norm(
                &w,
                &h,
                &format!("{name}.layernorm_before"),
                d,
                c.layer_norm_eps,
            )?;
            h = h.add(&self_attention(
                &w,
                &a,
                &format!("{name}.attention.attention"),
                &format!("{name}.attention.output.dense"),
                c.heads,
                None,
                1,
            )?)?;
            let m = layer_norm(
                &w,
                &h,
                &format!("{name}.layernorm_after"),
                d,
                c.layer_norm_eps,
            )?;
            h = h.add(&gelu_mlp(&w, &m, &name, d, c.intermediate)?)?;
        }
        let onehot: Vec<f32> = (0..n).map(|i| f32::from(u8::from(i == 0))).collect();
        let cls_row = constant("vit", HostArray::f32(&[1, n], &onehot))?.matmul(&h)?;
        let cls_row = layer_norm(&w, &cls_row, "vit.layernorm", d, c.layer_norm_eps)?;
        let classes = w.shape("classifier.weight")?.first().copied().unwrap_or(0);
        let logits = lin(&w, &cls_row, "classifier", classes, d, 1.0)?;
        let compiled = compile(&[(Some("logits".into()), logits)], opts)?;
        Ok(Vit {
            config: c,
            classes,
            compiled,
        })
    }

    /// Logits [classes] of one normalised image [1, C, S, S].
    pub fn run(&mut self, image: PortData) -> Result<Vec<f32>> {
        Ok(self.compiled.run(&[image])?.swap_remove(0))
    }
}
