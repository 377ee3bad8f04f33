//! `aneforge classify IMAGE --resnet FILE`: the top classes of a torchvision-layout ResNet on a
//! PNG or `.npy` image.

use std::path::Path;

use super::{emit, image, npy};
use crate::compile::CompileOptions;
use crate::error::{Error, Result};
use crate::exec::PortData;
use crate::models::ResNet;

/// Print the `top` classes (index, logit, softmax probability) of one `.png` or `.npy` image;
/// errors name the image, the state dict or the bad option.
pub(super) fn classify(
    image: &Path,
    resnet: &Path,
    depth: usize,
    top: usize,
    opts: &CompileOptions,
) -> Result<()> {
    let is_png = image
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("png"));
    let (net, logits) = if is_png {
        // A PNG is centre-cropped to a square and fed as uint8 (ImageNet normalisation in the program).
        let img = image::read_png(image)?.center_square();
        let mut net = ResNet::load(resnet, depth, img.height, true, opts)?;
        let logits = net.run(PortData::U8(&img.to_chw()))?;
        (net, logits)
    } else {
        classify_npy(image, resnet, depth, opts)?
    };
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let z: f64 = logits.iter().map(|&l| f64::from(l - max).exp()).sum();
    let mut order: Vec<usize> = (0..logits.len()).collect();
    order.sort_by(|&i, &j| logits[j].total_cmp(&logits[i]));
    let mut out = format!(
        "model: ResNet-{depth} {}\ndevice: {}\n",
        resnet.display(),
        net.compiled.device()
    );
    for &i in order.iter().take(top) {
        out += &format!(
            "class {i:>5}  logit {:>9.4}  p {:.4}\n",
            logits[i],
            f64::from(logits[i] - max).exp() / z
        );
    }
    emit(&out);
    Ok(())
}

/// A `.npy` image: uint8 [1, 3, H, W] or [H, W, 3] (normalised in the program), or float [1, 3, H, W]
/// already normalised; square. Returns the loaded network and its logits.
fn classify_npy(
    image: &Path,
    resnet: &Path,
    depth: usize,
    opts: &CompileOptions,
) -> Result<(ResNet, Vec<f32>)> {
    let a = npy::read(image)?;
    let (uint8, shape) = match (a.dtype_name(), a.shape.as_slice()) {
        ("uint8", &[1, 3, h, w]) => (true, [h, w]),
        ("uint8", &[h, w, 3]) => (true, [h, w]),
        ("float32" | "float64" | "float16", &[1, 3, h, w]) => (false, [h, w]),
        (dt, s) => return Err(Error::shape("classify", format!("{}: expected a .png, or .npy uint8 [1, 3, H, W] or [H, W, 3], or float [1, 3, H, W]; got {dt} {s:?}", image.display()))),
    };
    if shape[0] != shape[1] {
        return Err(Error::shape(
            "classify",
            format!(
                "{}: the image must be square, got {}x{}",
                image.display(),
                shape[0],
                shape[1]
            ),
        ));
    }
    let mut net = ResNet::load(resnet, depth, shape[0], uint8, opts)?;
    let chw: Vec<u8>;
    let data = match (&a.shape[..], a.port_data()) {
        ([h, w, 3], PortData::U8(px)) => {
            chw = (0..3 * h * w)
                .map(|i| px[(i % (h * w)) * 3 + i / (h * w)])
                .collect();
            PortData::U8(&chw)
        }
        (_, d) => d,
    };
    let logits = net.run(data)?;
    Ok((net, logits))
}
