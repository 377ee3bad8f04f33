"""Issue 16 reproducers through the Python API: each former panic, abort or silently wrapped value
is the right answer (checked against NumPy float64 or a closed form) or a typed exception naming
the tensor, field or limit, with the process's peak memory under 1 GB (measured in a subprocess
with ``resource.getrusage``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import aneforge as af
import numpy as np
import pytest
from safetensors.numpy import save_file
from test_models_gpt2 import CFG as GPT2_CFG
from test_models_gpt2 import gpt2_state_dict
from test_models_resnet import resnet_state_dict


def conv_ref(x, w, pad, dilation):
    """Direct float64 NCHW convolution (stride 1, one group) with pad (t, b, l, r)."""
    t, b, l, r = pad
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (t, b), (l, r)))
    co, ci, kh, kw = w.shape
    dh, dw = dilation
    oh = xp.shape[2] - dh * (kh - 1)
    ow = xp.shape[3] - dw * (kw - 1)
    out = np.zeros((x.shape[0], co, oh, ow))
    for ky in range(kh):
        for kx in range(kw):
            patch = xp[:, :, ky * dh : ky * dh + oh, kx * dw : kx * dw + ow]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, ky, kx])
    return out


@pytest.mark.parametrize(
    ("xshape", "wshape", "pad", "dilation"),
    [
        ((1, 1, 1, 4), (1, 1, 1, 2), (0, 0, 0, 5), (1, 5)),  # dilated conv, large right pad
        ((1, 1, 1, 1), (1, 1, 5, 5), (2, 2, 2, 2), (1, 1)),  # every tap but the centre in padding
        ((1, 1, 4, 1), (1, 1, 3, 5), (1, 1, 2, 2), (1, 1)),
        ((1, 2, 3, 5), (3, 2, 3, 3), (4, 0, 0, 7), (2, 3)),
    ],
)
def test_conv_padding_only_taps_match_float64(xshape, wshape, pad, dilation):
    rng = np.random.default_rng(16)
    x = rng.integers(-4, 5, xshape).astype(np.float32)
    w = rng.integers(-2, 3, wshape).astype(np.float32)
    ref = conv_ref(x, w, pad, dilation)
    y = af.conv(af.input(xshape), w, pad=pad, dilation=dilation)
    np.testing.assert_array_equal(af.compile(y, device="reference")(x), ref)
    yd = af.dynamic_conv(af.input(xshape), af.input(wshape), pad=pad, dilation=dilation)
    np.testing.assert_array_equal(af.compile(yd, device="reference")(x, w), ref)


def test_window_parameters_that_do_not_fit_int32_are_refused():
    x = af.input((1, 1, 4, 4))
    with pytest.raises(ValueError, match=r"strides .*2147483647"):
        af.conv(x, np.ones((1, 1, 1, 1)), stride=(1, 2**31))
    with pytest.raises(ValueError, match=r"dilations .*2147483647"):
        af.conv(x, np.ones((1, 1, 1, 2)), dilation=(1, 2**32 + 1))


def test_inverse_of_signed_zero_follows_ieee():
    m = af.compile(af.input(2).inverse(), device="reference")
    assert list(m(np.array([-0.0, 0.0]))) == [-np.inf, np.inf]


def peak_run(code: str, **env: str) -> tuple[str, int]:
    """Runs `code` in a fresh interpreter; returns (stdout, peak RSS in bytes)."""
    prog = textwrap.dedent(code) + "\nimport resource\nprint(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"

    out = subprocess.run(
        [sys.executable, "-c", prog],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, **env},
    )
    assert out.returncode == 0, out.stderr
    *lines, rss_kib = out.stdout.strip().splitlines()
    return "\n".join(lines), int(rss_kib) * 1024


GB = 1 << 30


def test_oversized_input_is_a_memory_error_under_1_gb():
    out, peak = peak_run(
        """
        import aneforge as af
        try:
            af.compile(af.input((65536, 32768)), device="reference")
        except MemoryError as e:
            print("MemoryError", e)
        """
    )
    assert out.startswith("MemoryError") and "[65536, 32768]" in out and "268435456" in out, out
    assert peak < GB, peak


def program_dir(tmp_path, sig, body, out):
    d = tmp_path / "prog"
    d.mkdir()
    (d / "model.mil").write_text(f"program(1.3)\n{{\n    func main<ios18>({sig}) {{\n{body}\n    }} -> ({out});\n}}\n")
    return d


def load_peak(d) -> tuple[str, int]:
    """af.load of program directory `d` in a fresh interpreter: (printed MemoryError, peak RSS)."""
    return peak_run(
        f"""
        import aneforge as af
        try:
            af.load({str(d)!r}, device="reference")
        except MemoryError as e:
            print("MemoryError", e)
        """
    )


def test_loaded_tile_past_the_cap_is_a_memory_error_under_1_gb(tmp_path):
    d = program_dir(
        tmp_path,
        "tensor<fp16, [2, 2]> x0",
        '        tensor<int32, [2]> r = const()[name = string("r"), val = tensor<int32, [2]>([32768, 16384])];\n'
        '        tensor<fp16, [65536, 32768]> y0 = tile(reps = r, x = x0)[name = string("y0")];',
        "y0",
    )
    out, peak = load_peak(d)
    assert out.startswith("MemoryError") and "tile" in out and "[65536, 32768]" in out, out
    assert peak < GB, peak


def test_conv_with_huge_padding_is_refused_under_1_gb():
    """A conv with pad 100000 once aborted asking for 160 GB; now the padded extent is refused at build."""
    out, peak = peak_run(
        """
        import aneforge as af, numpy as np
        try:
            y = af.conv(af.input((1, 1, 8, 8)), np.ones((1, 1, 3, 3), np.float32), pad=(100000,) * 4)
            af.compile(y, device="reference")
        except ValueError as e:
            print("ValueError", e)
        """
    )
    assert out.startswith("ValueError") and "200006" in out and "65536" in out, out
    assert peak < GB, peak


def test_loaded_input_of_2_48_elements_is_a_memory_error_under_1_gb(tmp_path):
    d = program_dir(
        tmp_path,
        "tensor<fp16, [65536, 65536, 65536]> x0",
        '        tensor<fp16, [65536, 65536, 65536]> y0 = relu(x = x0)[name = string("y0")];',
        "y0",
    )
    out, peak = load_peak(d)
    assert out.startswith("MemoryError") and "[65536, 65536, 65536]" in out, out
    assert peak < GB, peak


def test_byte_cap_is_set_by_the_environment():
    out, _ = peak_run(
        """
        import aneforge as af
        try:
            af.input((1024, 1024))
        except MemoryError as e:
            print("MemoryError", e)
        """,
        ANEFORGE_MAX_BYTES="1000000",
    )
    # 1024 · 1024 fp16 = 2097152 bytes > 1000000.
    assert out.startswith("MemoryError") and "2097152 bytes" in out and "ANEFORGE_MAX_BYTES" in out, out
    out, _ = peak_run(
        "import aneforge as af\ntry:\n    af.input(4)\nexcept ValueError as e:\n    print(e)\n",
        ANEFORGE_MAX_BYTES="lots",
    )
    assert "ANEFORGE_MAX_BYTES" in out and "lots" in out, out


def test_huge_espcn_is_a_memory_error_under_1_gb(tmp_path):
    rng = np.random.default_rng(0)
    sd = {
        "conv1.weight": rng.standard_normal((4, 1, 5, 5)).astype(np.float32),
        "conv1.bias": np.zeros(4, np.float32),
        "conv2.weight": rng.standard_normal((4, 4, 3, 3)).astype(np.float32),
        "conv2.bias": np.zeros(4, np.float32),
        "conv3.weight": rng.standard_normal((4, 4, 3, 3)).astype(np.float32),
        "conv3.bias": np.zeros(4, np.float32),
        "conv4.weight": rng.standard_normal((4, 4, 3, 3)).astype(np.float32),
        "conv4.bias": np.zeros(4, np.float32),
    }
    path = tmp_path / "espcn.safetensors"
    save_file(sd, str(path))
    out, peak = peak_run(
        f"""
        import aneforge as af
        try:
            af.load_espcn({str(path)!r}, 16384, 16384, device="reference")
        except MemoryError as e:
            print("MemoryError", e)
        """
    )
    assert out.startswith("MemoryError") and "conv" in out, out
    assert peak < GB, peak


def gpt2_folder(tmp_path, **overrides):
    cfg = {**GPT2_CFG, "n_layer": 1, **overrides}
    d = tmp_path / "gpt2"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps(cfg))
    save_file(gpt2_state_dict({**GPT2_CFG, "n_layer": 1}), str(d / "model.safetensors"))
    return d


def test_gpt2_layer_counts_are_checked(tmp_path):
    with pytest.raises(ValueError, match=r"field 'n_layer' is 0"):
        af.load_gpt2(gpt2_folder(tmp_path, n_layer=0))
    out, peak = peak_run(
        f"""
        import aneforge as af
        try:
            af.load_gpt2({str(gpt2_folder(tmp_path, n_layer=10**9))!r})
        except MemoryError as e:
            print("MemoryError", e)
        """
    )
    assert out.startswith("MemoryError") and "n_layer" in out and "1000000000" in out, out
    assert peak < GB, peak


def test_gpt2_nan_temperature_is_an_error(tmp_path):
    lm = af.load_gpt2(gpt2_folder(tmp_path), max_context=8, device="reference")
    with pytest.raises(ValueError, match="temperature"):
        lm.generate([1, 2], max_new_tokens=2, temperature=float("nan"))


@pytest.mark.parametrize("value", [-1, "8", 2.5])
def test_malformed_optional_config_fields_name_the_field(tmp_path, value):
    d = gpt2_folder(tmp_path, n_inner=value)
    with pytest.raises(ValueError, match=rf"field 'n_inner' is {json.dumps(value)}"):
        af.load_gpt2(d)


def test_uint8_resnet_rejects_float_input_like_a_uint8_port(tmp_path):
    path = tmp_path / "r18.safetensors"
    save_file(resnet_state_dict(18, classes=4, seed=1), str(path))
    net = af.load_resnet18(path, device="reference", uint8=True, image_size=32)
    img = np.full((1, 3, 32, 32), 7, dtype=np.uint8)
    ref = net(img)
    # Integer arrays in range are the same image; floats (300.0, -5.0 or 7.0) are refused.
    np.testing.assert_array_equal(net(img.astype(np.int64)), ref)
    with pytest.raises(TypeError, match="uint8 port"):
        net(np.full((1, 3, 32, 32), 300.0))
    with pytest.raises(ValueError, match="element 0 = 300 is outside 0..=255"):
        net(np.full((1, 3, 32, 32), 300, dtype=np.int64))
    plain = af.compile(af.image_input((1, 1, 1, 2), scale=1.0, bias=0.0) * 1.0, device="reference")
    with pytest.raises(TypeError, match="uint8 port"):
        plain(np.array([[[[300.0, -5.0]]]]))


def run_cli(*args: str) -> subprocess.CompletedProcess:
    code = "import sys\nfrom aneforge._core import cli_main\nsys.exit(cli_main(['aneforge', *sys.argv[1:]]))\n"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=False, timeout=120)


def test_devices_and_fifos_are_refused_not_read(tmp_path):
    m = af.compile(af.input(4).relu(), device="reference")
    (tmp_path / "zero.npy").symlink_to("/dev/zero")
    out = run_cli("run", m.program_dir, "--input", f"x0={tmp_path / 'zero.npy'}")
    assert out.returncode == 1 and "not a regular file (a device)" in out.stderr, out.stderr
    d = tmp_path / "prog"
    d.mkdir()
    (d / "model.mil").write_text(m.mil)
    os.mkfifo(d / "weights.bin")
    with pytest.raises(ValueError, match="not a regular file \\(a FIFO\\)"):
        af.load(d, device="reference")


def test_cli_repeat_is_bounded(tmp_path):
    m = af.compile(af.input(4).relu(), device="reference")
    np.save(tmp_path / "x.npy", np.ones(4, np.float32))
    out = run_cli("run", m.program_dir, "--input", f"x0={tmp_path / 'x.npy'}", "--repeat", str(2**64 - 1))
    assert out.returncode == 1, out
    assert "--repeat" in out.stderr and "1000000" in out.stderr and "internal error" not in out.stderr, out.stderr


def test_training_files_must_be_regular_files(tmp_path):
    """The MNIST/CIFAR readers and checkpoint loading refuse devices and FIFOs instead of reading
    /dev/zero until memory runs out or blocking on a pipe."""
    (tmp_path / "zero.bin").symlink_to("/dev/zero")
    with pytest.raises(ValueError, match="not a regular file \\(a device\\)"):
        af.read_cifar10(tmp_path / "zero.bin")
    os.mkfifo(tmp_path / "ckpt.safetensors")
    w = af.parameter(np.ones((3, 2), np.float32))
    trainer = af.Trainer(af.mse(af.input((1, 3)) @ w, af.input((1, 2))), [w], device="reference")
    with pytest.raises(ValueError, match="not a regular file \\(a FIFO\\)"):
        trainer.load(tmp_path / "ckpt.safetensors")
