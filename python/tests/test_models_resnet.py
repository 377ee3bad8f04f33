"""ResNet-18/50 loaders on random weights written in the exact torchvision state-dict layout
(names and shapes, BatchNorm with running statistics), against a NumPy float64 ResNet written
here (unfolded BatchNorm, eps 1e-5)."""

from __future__ import annotations

import aneforge as af
import numpy as np
import pytest
from safetensors.numpy import save_file

STAGES = {18: ([2, 2, 2, 2], False), 34: ([3, 4, 6, 3], False), 50: ([3, 4, 6, 3], True)}
MEAN = np.array([0.485, 0.456, 0.406])
STD = np.array([0.229, 0.224, 0.225])


def resnet_state_dict(depth, classes=1000, seed=0):
    """Random float32 weights named and shaped like torchvision's resnet{depth}().state_dict()."""
    rng = np.random.default_rng(seed)
    sd = {}

    def conv(name, cout, cin, k):
        sd[name + ".weight"] = (rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k))).astype(
            np.float32
        )

    def bn(name, c, gain=1.0):
        sd[name + ".weight"] = (rng.uniform(0.5, 1.0, c) * gain).astype(np.float32)
        sd[name + ".bias"] = rng.uniform(-0.2, 0.2, c).astype(np.float32)
        sd[name + ".running_mean"] = rng.uniform(-0.2, 0.2, c).astype(np.float32)
        sd[name + ".running_var"] = rng.uniform(0.5, 2.0, c).astype(np.float32)
        sd[name + ".num_batches_tracked"] = np.array(100, dtype=np.int64)

    blocks, bottleneck = STAGES[depth]
    exp = 4 if bottleneck else 1
    conv("conv1", 64, 3, 7)
    bn("bn1", 64)
    cin = 64
    for s, n in enumerate(blocks):
        width = 64 << s
        for b in range(n):
            p = f"layer{s + 1}.{b}"
            stride = 2 if b == 0 and s > 0 else 1
            if bottleneck:
                conv(p + ".conv1", width, cin, 1), bn(p + ".bn1", width)
                conv(p + ".conv2", width, width, 3), bn(p + ".bn2", width)
                conv(p + ".conv3", width * 4, width, 1), bn(p + ".bn3", width * 4, gain=0.3)
            else:
                conv(p + ".conv1", width, cin, 3), bn(p + ".bn1", width)
                conv(p + ".conv2", width, width, 3), bn(p + ".bn2", width, gain=0.3)
            if stride != 1 or cin != width * exp:
                conv(p + ".downsample.0", width * exp, cin, 1), bn(p + ".downsample.1", width * exp)
            cin = width * exp
    sd["fc.weight"] = (rng.standard_normal((classes, cin)) / np.sqrt(cin)).astype(np.float32)
    sd["fc.bias"] = rng.uniform(-0.1, 0.1, classes).astype(np.float32)
    return sd


def _conv(x, w, stride, pad):
    """float64 NCHW conv (batch 1) by im2col."""
    c, h, wd = x.shape[1:]
    cout, _, k, _ = w.shape
    xp = np.pad(x[0], ((0, 0), (pad, pad), (pad, pad)))
    ho, wo = (h + 2 * pad - k) // stride + 1, (wd + 2 * pad - k) // stride + 1
    cols = np.empty((c, k, k, ho, wo))
    for i in range(k):
        for j in range(k):
            cols[:, i, j] = xp[:, i : i + stride * ho : stride, j : j + stride * wo : stride]
    return (w.reshape(cout, -1) @ cols.reshape(c * k * k, -1)).reshape(1, cout, ho, wo)


def _bn(x, sd, name):
    g, b, m, v = (
        sd[f"{name}.{k}"].astype(np.float64)[None, :, None, None]
        for k in ("weight", "bias", "running_mean", "running_var")
    )
    return (x - m) / np.sqrt(v + 1e-5) * g + b


def _maxpool(x):
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    ho = (x.shape[2] + 2 - 3) // 2 + 1
    wo = (x.shape[3] + 2 - 3) // 2 + 1
    return np.max([xp[:, :, i : i + 2 * ho : 2, j : j + 2 * wo : 2] for i in range(3) for j in range(3)], axis=0)


def resnet_ref(sd, depth, x):
    """torchvision ResNet forward in float64 (eval mode)."""
    relu = lambda t: np.maximum(t, 0)  # noqa: E731
    w = lambda n: sd[n + ".weight"].astype(np.float64)  # noqa: E731
    blocks, bottleneck = STAGES[depth]
    x = _maxpool(relu(_bn(_conv(x, w("conv1"), 2, 3), sd, "bn1")))
    for s, n in enumerate(blocks):
        for b in range(n):
            p = f"layer{s + 1}.{b}"
            stride = 2 if b == 0 and s > 0 else 1
            short = (
                _bn(_conv(x, w(p + ".downsample.0"), stride, 0), sd, p + ".downsample.1")
                if p + ".downsample.0.weight" in sd
                else x
            )
            if bottleneck:
                y = relu(_bn(_conv(x, w(p + ".conv1"), 1, 0), sd, p + ".bn1"))
                y = relu(_bn(_conv(y, w(p + ".conv2"), stride, 1), sd, p + ".bn2"))
                y = _bn(_conv(y, w(p + ".conv3"), 1, 0), sd, p + ".bn3")
            else:
                y = relu(_bn(_conv(x, w(p + ".conv1"), stride, 1), sd, p + ".bn1"))
                y = _bn(_conv(y, w(p + ".conv2"), 1, 1), sd, p + ".bn2")
            x = relu(y + short)
    return x.mean((2, 3)) @ w("fc").T + sd["fc.bias"]


def _metrics(got, ref):
    got, ref = got.ravel().astype(np.float64), ref.ravel()
    cos = float(got @ ref / (np.linalg.norm(got) * np.linalg.norm(ref)))
    return cos, float(np.abs(got - ref).max() / np.abs(ref).max())


@pytest.mark.parametrize("depth", [18, 34, 50])
def test_resnet_matches_float64(tmp_path, depth):
    sd = resnet_state_dict(depth, seed=depth)
    path = tmp_path / f"resnet{depth}.safetensors"
    save_file(sd, str(path))
    net = getattr(af, f"load_resnet{depth}")(path, device="reference")
    assert net.input_shape == [1, 3, 224, 224]
    assert net.device == "reference" and net.output_shape == [1, 1000]
    x = np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float32)
    got = net(x)
    assert got.shape == (1, 1000)
    cos, rel = _metrics(got, resnet_ref(sd, depth, x.astype(np.float64)))
    print(f"ResNet-{depth} fp16 reference executor vs float64: cosine {cos:.6f}, max rel err {rel:.2e}")
    assert cos >= 0.9999


def test_resnet_uint8_input_and_small_images(tmp_path):
    sd = resnet_state_dict(18, classes=10, seed=3)
    path = tmp_path / "r18.safetensors"
    save_file(sd, str(path))
    net = af.load_resnet18(path, device="reference", uint8=True, image_size=64)
    img = np.random.default_rng(2).integers(0, 256, (1, 3, 64, 64), dtype=np.uint8)
    x = (img / 255.0 - MEAN[None, :, None, None]) / STD[None, :, None, None]
    cos, rel = _metrics(net(img), resnet_ref(sd, 18, x))
    assert cos >= 0.9999, (cos, rel)
    with pytest.raises(ValueError, match=r"\(1, 3, 64, 64\)"):
        net(np.zeros((1, 3, 32, 32), dtype=np.uint8))


def test_resnet_compressed_against_uncompressed(tmp_path):
    sd = resnet_state_dict(18, seed=5)
    path = tmp_path / "r18.safetensors"
    save_file(sd, str(path))
    x = np.random.default_rng(4).standard_normal((1, 3, 224, 224)).astype(np.float32)
    base = af.load_resnet18(path, device="reference")(x)
    int8 = af.load_resnet18(path, device="reference", compress="int8")(x)
    cos, rel = _metrics(int8, base.astype(np.float64))
    print(f"ResNet-18 int8 vs fp16 program: cosine {cos:.6f}, max rel err {rel:.2e}")
    assert cos >= 0.999
