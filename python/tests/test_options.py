"""One compile-options type across every entry point: the same bad value raises the same
message everywhere, ``af.CompileOptions()`` is the Rust default, options really reach each
compiled program, and no option default is spelled in a Python or binding signature."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import aneforge as af
import numpy as np
import pytest
from aneforge import _core
from safetensors.numpy import save_file
from test_models_errors import tiny_bert, write_folder
from test_models_gpt2 import CFG as GPT2_CFG
from test_models_gpt2 import gpt2_logits, gpt2_state_dict
from test_models_resnet import resnet_ref, resnet_state_dict
from test_models_vision import espcn_ref, espcn_state_dict

ROOT = Path(__file__).resolve().parents[2]
KEYS = "device, precision, build_dir, compress, compress_atol, block_size, target, opset, sum_via_matmul, route, attention_tiles, int8, opt"


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    """Paths the loaders accept up to reading the files: a program directory, an encoder folder
    (only the two file names matter before the options are converted) and missing weight files."""
    root = tmp_path_factory.mktemp("options")
    program = af.export(af.input((2,)).relu(), build_dir=root / "program")
    encoder = root / "encoder"
    encoder.mkdir()
    (encoder / "config.json").write_text("{}")
    (encoder / "model.safetensors").write_bytes(b"")
    return {
        "program": program,
        "encoder": encoder,
        "missing": root / "missing.safetensors",
    }


def _trainer(**options):
    """A one-parameter MSE Trainer built with `options`."""
    p = af.parameter(np.ones((1, 2), np.float32))
    loss = af.mse(af.input((1, 2)) * p, af.input((1, 2)))
    return af.Trainer(loss, [p], **options)


ENTRY_POINTS = {
    "compile": lambda d, **kw: af.compile(af.input((2,)).relu(), **kw),
    "export": lambda d, **kw: af.export(af.input((2,)).relu(), **kw),
    "load program": lambda d, **kw: af.load(d["program"], **kw),
    "load encoder": lambda d, **kw: af.load(d["encoder"], **kw),
    "load_resnet": lambda d, **kw: af.load_resnet(18, d["missing"], **kw),
    "load_resnet18": lambda d, **kw: af.load_resnet18(d["missing"], **kw),
    "load_vit": lambda d, **kw: af.load_vit(d["missing"], **kw),
    "load_espcn": lambda d, **kw: af.load_espcn(d["missing"], 8, 8, **kw),
    "load_gpt2": lambda d, **kw: af.load_gpt2(d["missing"], **kw),
    "CompileOptions": lambda d, **kw: af.CompileOptions(**kw),
    "Trainer": lambda d, **kw: _trainer(**kw),
    "fft.plan": lambda d, **kw: af.fft.plan("fft", (2, 8), **kw),
    "fft.rfft": lambda d, **kw: af.fft.rfft(np.ones(8), **kw),
    "linalg.qr": lambda d, **kw: af.linalg.qr(np.eye(3), **kw),
    "linalg.conjugate_gradient": lambda d, **kw: af.linalg.conjugate_gradient(np.eye(3), np.ones(3), **kw),
    "linalg.pca": lambda d, **kw: af.linalg.pca(np.eye(3), 1, **kw),
    "dsp.fir_filter": lambda d, **kw: af.dsp.fir_filter(np.ones(8), np.ones(3), **kw),
    "dsp.stft": lambda d, **kw: af.dsp.stft(np.ones(64), 16, **kw),
}

BAD = [
    (
        {"compress": "int9"},
        ValueError,
        "compile: unknown compress mode 'int9' (expected int8, int4, sparse, blockwise or auto)",
    ),
    (
        {"compress_atol": 0},
        ValueError,
        "compile: compress_atol must be in (0, 1], got 0",
    ),
    (
        {"compress_atol": 1.5},
        ValueError,
        "compile: compress_atol must be in (0, 1], got 1.5",
    ),
    ({"block_size": 0}, ValueError, "compile: block_size must be >= 1, got 0"),
    ({"block_size": -4}, ValueError, "compile: block_size must be >= 1, got -4"),
    (
        {"block_size": 2.5},
        TypeError,
        "compile: option block_size must be an int, got float 2.5",
    ),
    (
        {"device": "gpu"},
        ValueError,
        "compile: unknown device 'gpu' (expected auto, ane, reference or cpu)",
    ),
    (
        {"precision": "fp8"},
        ValueError,
        "compile: unknown precision 'fp8' (expected fp16 or fp32)",
    ),
    (
        {"opset": "ios15"},
        ValueError,
        "opset: unknown opset 'ios15' (expected ios16, ios17 or ios18)",
    ),
    (
        {"devise": "reference"},
        ValueError,
        f"compile: unknown option 'devise' (expected one of {KEYS})",
    ),
    (
        {"compress": "int4", "int8": True},
        ValueError,
        "compile: int8=True means compress='int8', which conflicts with compress='int4'",
    ),
    (
        {"options": "fast"},
        TypeError,
        "compile: options must be an aneforge.CompileOptions, got str",
    ),
    (
        {"opt": 2},
        NotImplementedError,
        "compile: the opt= option is not implemented yet",
    ),
]


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
@pytest.mark.parametrize(
    "kw,exc,message",
    BAD,
    ids=[next(iter(k)) + "=" + repr(next(iter(k.values()))) for k, _, _ in BAD],
)
def test_every_entry_point_rejects_a_bad_option_with_the_same_message(dirs, entry, kw, exc, message):
    with pytest.raises(exc) as info:
        ENTRY_POINTS[entry](dirs, **kw)
    assert str(info.value) == message


def test_an_options_object_is_checked_against_the_keywords_at_every_entry_point(dirs):
    opts = af.CompileOptions(compress="int4")
    message = "compile: int8=True means compress='int8', which conflicts with compress='int4'"
    for entry, call in ENTRY_POINTS.items():
        with pytest.raises(ValueError) as info:
            call(dirs, options=opts, int8=True)
        assert str(info.value) == message, entry


@pytest.mark.parametrize("entry", [e for e in ENTRY_POINTS if e.split(".")[0] in ("fft", "linalg", "dsp")])
def test_numerics_plans_refuse_options_they_do_not_honour(dirs, entry):
    with pytest.raises(NotImplementedError) as info:
        ENTRY_POINTS[entry](dirs, device="reference", precision="fp32")
    assert str(info.value).endswith(": the precision option is not implemented here (it takes device)")
    with pytest.raises(NotImplementedError, match="the compress option is not implemented here"):
        ENTRY_POINTS[entry](dirs, options=af.CompileOptions(compress="int8"))


def test_compile_options_default_is_the_rust_default_field_by_field():
    opts = af.CompileOptions()
    defaults = _core.compile_option_defaults()
    assert tuple(defaults) == af.CompileOptions.fields
    for name, value in defaults.items():
        assert getattr(opts, name) == value, name
    # The documented defaults (README / CompileOptions docstring), written out independently.
    assert (opts.device, opts.precision, opts.compress, opts.block_size) == (
        "auto",
        "fp16",
        None,
        32,
    )
    assert opts.compress_atol == 0.05
    assert (opts.build_dir, opts.target, opts.opset, opts.sum_via_matmul) == (
        None,
        None,
        None,
        False,
    )
    assert (opts.route, opts.attention_tiles) == ("auto", None)
    assert af.CompileOptions.keywords == tuple(KEYS.split(", "))


def test_compile_options_value_semantics(tmp_path):
    opts = af.CompileOptions(device="cpu", int8=True, block_size=np.int64(8), build_dir=tmp_path)
    assert (opts.device, opts.compress, opts.block_size, opts.build_dir) == (
        "reference",
        "int8",
        8,
        str(tmp_path),
    )
    assert opts == af.CompileOptions(device="reference", compress="int8", block_size=8, build_dir=str(tmp_path))
    assert opts != af.CompileOptions()
    changed = opts.replace(compress=None, precision="fp32")
    assert (changed.compress, changed.precision, changed.device, opts.compress) == (
        None,
        "fp32",
        "reference",
        "int8",
    )
    assert repr(af.CompileOptions(target="h14")).startswith(
        "CompileOptions(device='auto', precision='fp16', build_dir=None, compress=None, compress_atol=0.05, "
    )
    assert "target='h14'" in repr(af.CompileOptions(target="h14"))
    assert af.CompileOptions(**opts.to_dict()) == opts == af.CompileOptions(options=opts)
    assert af.CompileOptions(options=opts, device="ane").device == "ane"
    with pytest.raises(ValueError, match="compile: block_size must be >= 1, got 0"):
        opts.replace(block_size=0)
    with pytest.raises(TypeError, match="compile: option options cannot be a CompileOptions"):
        opts.replace(options=opts)


# --------------------------------------------------------------- options reach the program
def _fp16_visible():
    """sigmoid(3x + 1) on 64 points: fp16 rounding is ~1e-4, fp32 ~1e-7 (float64 oracle)."""
    a = np.arange(64, dtype=np.float32).reshape(1, 64) / 7.0 - 4.0
    return (
        (af.input((1, 64)) * 3.0 + 1.0).sigmoid(),
        a,
        1 / (1 + np.exp(-(a.astype(np.float64) * 3.0 + 1.0))),
    )


def test_compile_and_load_honour_precision_device_and_compress(tmp_path):
    y, a, ref = _fp16_visible()
    opts = af.CompileOptions(device="reference", precision="fp32")
    for net in (
        af.compile(y, options=opts),
        af.compile(y, device="reference", precision="fp32"),
    ):
        assert net.device == "reference" and np.max(np.abs(net(a) - ref)) < 1e-6
    fp16 = af.compile(y, options=opts, precision="fp16")  # keywords override the object
    assert np.max(np.abs(fp16(a) - ref)) > 1e-5
    loaded = af.load(fp16.program_dir, options=opts)
    assert np.max(np.abs(loaded(a) - ref)) < 1e-6

    w = np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32)
    mm = af.input((1, 16)) @ w
    for net in (
        af.compile(mm, compress="int8"),
        af.compile(mm, int8=True),
        af.compile(mm, options=af.CompileOptions(int8=True)),
    ):
        assert [r["encoding"] for r in net.compression_report()] == ["int8"]
    plain = af.compile(mm)
    assert plain.compression_report() == []
    assert [r["encoding"] for r in af.load(plain.program_dir, compress="int8").compression_report()] == ["int8"]
    with pytest.raises(ValueError, match=r"block_size 3 does not divide the inner axis \(16\)"):
        af.load(
            plain.program_dir,
            options=af.CompileOptions(compress="blockwise", block_size=3),
        )


def test_export_honours_build_dir_compress_and_opset(tmp_path):
    w = np.random.default_rng(1).standard_normal((16, 8)).astype(np.float32)
    opts = af.CompileOptions(build_dir=tmp_path / "p", compress="int8", opset="ios17")
    d = af.export(af.input((1, 16)) @ w, options=opts)
    assert Path(d) == tmp_path / "p"
    mil = (tmp_path / "p" / "model.mil").read_text()
    assert "main<ios17>" in mil and "constexpr_" in mil


def test_encoder_folder_honours_block_size_and_precision(tmp_path):
    folder = write_folder(tmp_path / "bert", tiny_bert())
    ids = [[3, 1, 4, 1, 5]]
    with pytest.raises(ValueError, match=r"block_size 3 does not divide the inner axis \(8\)"):
        af.load(folder, device="reference", compress="blockwise", block_size=3)(ids)
    with pytest.raises(ValueError, match=r"block_size 3 does not divide the inner axis \(8\)"):
        af.load(
            folder,
            options=af.CompileOptions(device="reference", compress="blockwise", block_size=3),
        )(ids)
    fp16 = af.load(folder, device="reference")(ids)
    fp32 = af.load(folder, device="reference", precision="fp32")(ids)
    blockwise = af.load(folder, device="reference", compress="blockwise", block_size=4)(ids)
    assert 0 < np.max(np.abs(fp32 - fp16)) < 2e-2
    assert 0 < np.max(np.abs(blockwise - fp16)) < 0.1


def _differs_and_matches(fp16, fp32, ref, tol):
    """Both programs compute the model (within ``tol`` of float64), and fp32 really ran: it differs from fp16."""
    scale = np.max(np.abs(ref))
    assert np.max(np.abs(fp16 - ref)) < tol * scale and np.max(np.abs(fp32 - ref)) < tol * scale
    assert np.max(np.abs(fp32 - fp16)) > 0


def test_resnet_loader_honours_precision(tmp_path):
    sd = resnet_state_dict(18, classes=10, seed=7)
    path = tmp_path / "r18.safetensors"
    save_file(sd, str(path))
    x = np.random.default_rng(8).standard_normal((1, 3, 32, 32)).astype(np.float32)
    ref = resnet_ref(sd, 18, x.astype(np.float64))
    fp16 = af.load_resnet18(path, device="reference", image_size=32)
    fp32 = af.load_resnet(
        18,
        path,
        options=af.CompileOptions(device="reference", precision="fp32"),
        image_size=32,
    )
    assert fp32.device == "reference"
    _differs_and_matches(fp16(x), fp32(x), ref, 1e-2)


def test_espcn_loader_honours_precision(tmp_path):
    # ESPCN bakes its weights unchanged (as fp16): against float64 on those fp16 weights, the fp32
    # program is exact to f32 rounding while fp16 rounds every op.
    sd = espcn_state_dict(seed=2)
    path = tmp_path / "espcn.safetensors"
    save_file(sd, str(path))
    x = np.random.default_rng(3).uniform(0, 1, (1, 1, 8, 8)).astype(np.float16).astype(np.float32)
    sd16 = {k: v.astype(np.float16).astype(np.float64) for k, v in sd.items()}
    ref = espcn_ref(sd16, x.astype(np.float64), 3)
    fp16 = af.load_espcn(path, 8, 8, device="reference")(x)
    fp32 = af.load_espcn(path, 8, 8, device="reference", precision="fp32")(x)
    err16, err32 = np.max(np.abs(fp16 - ref)), np.max(np.abs(fp32 - ref))
    assert err32 < 1e-5 < err16, (err16, err32)


def test_gpt2_loader_honours_precision(tmp_path):
    (tmp_path / "config.json").write_text(__import__("json").dumps(GPT2_CFG))
    sd = gpt2_state_dict(GPT2_CFG, seed=1)
    save_file(sd, str(tmp_path / "model.safetensors"))
    ids = [5, 17, 3, 42]
    ref = gpt2_logits(sd, GPT2_CFG, ids)
    fp16 = af.load_gpt2(tmp_path, max_context=8, device="reference")(ids)
    fp32 = af.load_gpt2(tmp_path, 8, options=af.CompileOptions(device="reference", precision="fp32"))(ids)
    _differs_and_matches(fp16, fp32, ref, 5e-2)


def test_vit_loader_takes_the_options(tmp_path):
    # The loader reaches the file only after the options were converted: a bad option wins over a
    # missing folder, and good options get as far as the folder.
    with pytest.raises(ValueError, match="unknown device"):
        af.load_vit(tmp_path / "absent", device="gpu")
    with pytest.raises(OSError):
        af.load_vit(tmp_path / "absent", options=af.CompileOptions(device="reference"))


def test_fft_plan_honours_device():
    plan = af.fft.plan("fft", (2, 8), options=af.CompileOptions(device="reference"))
    assert plan.device == "reference"
    x = np.random.default_rng(4).standard_normal((2, 8))
    got = af.fft.fft(x, device="cpu")
    np.testing.assert_allclose(got, np.fft.fft(x), atol=3e-2)


# --------------------------------------------------------------- no default spelled twice
def _option_defaults():
    """Option keyword -> the Rust default (None defaults excluded; int8 is off by default)."""
    d = {k: v for k, v in _core.compile_option_defaults().items() if v is not None}
    return {**d, "int8": False}


def _defaulted_option_params(tree):
    """(function, parameter) pairs where an option keyword's parameter spells the Rust default."""
    defaults = _option_defaults()
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        args = node.args
        positional = args.posonlyargs + args.args
        pairs = list(zip(positional[len(positional) - len(args.defaults) :], args.defaults))
        pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
        for arg, default in pairs:
            if arg.arg in defaults and isinstance(default, ast.Constant) and default.value == defaults[arg.arg]:
                found.append((node.name, arg.arg))
    return found


def test_no_option_default_is_spelled_in_python_signatures():
    pkg = ROOT / "python" / "aneforge"
    files = [p for p in sorted(pkg.glob("*.py*")) if p.suffix in (".py", ".pyi")]
    assert any(p.name == "__init__.pyi" for p in files) and any(p.name == "models.py" for p in files)
    spelled = {p.name: _defaulted_option_params(ast.parse(p.read_text())) for p in files}
    assert {k: v for k, v in spelled.items() if v} == {}
    # The scan finds a spelled default, and leaves other values of a same-named parameter alone.
    src = "def f(x, device='auto', *, compress_atol=0.05): ...\ndef depth_to_space(x, block_size=2): ..."
    assert _defaulted_option_params(ast.parse(src)) == [
        ("f", "device"),
        ("f", "compress_atol"),
    ]


def _spelled_default_pattern():
    """Matches `key=<the Rust default>` in a pyo3 signature or a text signature."""
    alternatives = []
    for key, value in _option_defaults().items():
        spellings = [repr(value), str(value).lower()] if isinstance(value, bool) else [re.escape(str(value))]
        spellings = [re.escape(s) if isinstance(value, bool) else s for s in spellings]
        alternatives.append(rf"\b{key}\s*=\s*[\"']?(?:{'|'.join(spellings)})\b")
    return re.compile("|".join(alternatives))


def test_no_option_default_is_spelled_in_binding_signatures():
    spelled = _spelled_default_pattern()
    found = []
    for path in sorted((ROOT / "crates" / "aneforge-py" / "src").glob("*.rs")):
        for sig in re.findall(r"#\[pyo3\(signature\s*=\s*\((.*?)\)\)\]", path.read_text(), flags=re.DOTALL):
            found += [(path.name, m.group(0)) for m in spelled.finditer(sig)]
    assert found == []
    assert spelled.search('path, device="auto", x=None') and spelled.search("compress_atol=0.05, int8=false")
    assert not spelled.search("x, block_size=2, target=None") and not spelled.search("block_size=320")
    # The compiled functions agree: no option keyword spells its default in a text signature.
    for name in dir(_core):
        sig = getattr(getattr(_core, name), "__text_signature__", None) or ""
        assert not spelled.search(sig), (name, sig)
