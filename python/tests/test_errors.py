"""Bad input raises the documented Python exception with a message naming the op and shapes."""

import aneforge as af
import numpy as np
import pytest


def raises(exc, *fragments):
    """pytest.raises that also checks every fragment appears in the message."""

    class Check:
        def __enter__(self):
            self.cm = pytest.raises(exc)
            self.info = self.cm.__enter__()
            return self.info

        def __exit__(self, *a):
            out = self.cm.__exit__(*a)
            msg = str(self.info.value)
            for f in fragments:
                assert f in msg, f"{f!r} not in {msg!r}"
            return out

    return Check()


# ------------------------------------------------------------- build time ---------------
@pytest.mark.parametrize(
    "shape, fragments",
    [
        ((), ("input", "rank", "[]")),
        ((1, 1, 1, 1, 1, 1), ("input", "rank 6", "[1, 1, 1, 1, 1, 1]")),
        ((1, 0), ("input", "got 0", "[1, 0]")),
        ((2, 65537), ("input", "65537", "[2, 65537]")),
    ],
)
def test_bad_input_shapes(shape, fragments):
    with raises(ValueError, *fragments):
        af.input(shape)


def test_negative_extent():
    with raises(ValueError, "input", "-3"):
        af.input((1, -3))


def test_broadcast_mismatch():
    with raises(ValueError, "add", "[2, 3]", "[4, 3]"):
        af.input((2, 3)) + af.input((4, 3))
    with raises(ValueError, "mul", "[7, 5]", "[6]"):
        af.input((7, 5)) * af.input((6,))


def test_matmul_k_mismatch():
    x = af.input((2, 3))
    with raises(ValueError, "matmul", "[2, 3]", "K = 3 vs 4"):
        x @ np.ones((4, 5), np.float32)
    with raises(ValueError, "matmul", "[2, 3]", "[4, 5]"):
        x @ af.input((4, 5))
    with raises(ValueError, "linear", "[7]", "[5, 3]"):
        x.linear(np.ones((5, 3)), np.ones(7))


def test_host_array_on_the_left_of_matmul():
    with raises(TypeError, "matmul", "x @ W"):
        np.ones((3, 3), np.float32) @ af.input((2, 3))


def test_conv_errors():
    x = af.input((1, 3, 8, 8))
    with raises(ValueError, "conv", "[1, 3, 8, 8]", "[4, 5, 3, 3]"):
        af.conv(x, np.ones((4, 5, 3, 3), np.float32))
    with raises(ValueError, "conv", "kernel width 16", "[4, 3, 1, 16]"):
        af.conv(af.input((1, 3, 8, 20)), np.ones((4, 3, 1, 16), np.float32))
    with raises(ValueError, "conv", "pad"):
        af.conv(x, np.ones((4, 3, 3, 3), np.float32), pad=(1, 2, 3))
    with raises(TypeError, "conv", "x must be a Tensor"):
        af.conv(np.ones((1, 3, 8, 8)), np.ones((4, 3, 3, 3)))


def test_resize_conv_transpose_and_attention_errors():
    x = af.input((1, 4, 5, 6))
    with raises(ValueError, "resize_bilinear", "output (0, 3)"):
        af.resize_bilinear(x, 0, 3)
    with raises(ValueError, "upsample_bilinear", "scale"):
        af.upsample_bilinear(x, -1.0)
    with raises(ValueError, "upsample_bilinear", "pair"):
        af.upsample_bilinear(x, (1.0, 2.0, 3.0))
    with raises(ValueError, "conv_transpose", "[3, 4, 3, 3]"):
        af.conv_transpose(x, np.zeros((3, 4, 3, 3), np.float32))
    with raises(ValueError, "dynamic_conv", "batch 1"):
        af.dynamic_conv(af.input((2, 4, 5, 6)), af.input((3, 4, 3, 3)))
    with raises(ValueError, "geglu", "even"):
        af.geglu(af.input((2, 5)), np.zeros((5, 5), np.float32))
    q = af.input((1, 2, 7, 8))
    with raises(ValueError, "sdpa", "[1, 1, 7, 7]"):
        af.sdpa(q, q, q, attn_mask=np.zeros((1, 2, 7, 7), np.float32))
    with raises(ValueError, "sdpa", "Sq == Skv"):
        af.sdpa(q, af.input((1, 2, 9, 8)), af.input((1, 2, 9, 8)), is_causal=True)
    w = np.zeros((8, 8), np.float32)
    with raises(ValueError, "mha", "n_heads"):
        af.mha(af.input((3, 8)), w, None, w, None, w, None, w, None, 3)


def test_reshape_count_mismatch():
    with raises(ValueError, "reshape", "[2, 3]", "[5, 5]"):
        af.input((2, 3)).reshape(5, 5)
    with raises(ValueError, "reshape", "[2, 3]"):
        af.input((2, 3)).reshape(4, -1)


def test_bad_axes():
    x = af.input((2, 3))
    with raises(ValueError, "softmax", "axis 5", "rank 2"):
        x.softmax(axis=5)
    with raises(ValueError, "reduce_mean", "axis 2", "rank 2"):
        x.mean(2)
    with raises(ValueError, "concat", "axis"):
        af.concat([x, x], axis=-3)
    with raises(ValueError, "transpose", "[0, 0]"):
        x.transpose(0, 0)
    with raises(ValueError, "split", "[2, 3]"):
        x.split(4, axis=1)


def test_bad_values_and_types_at_build_time():
    x = af.input((2, 3))
    with raises(ValueError, "clip", "lo"):
        x.clip(2.0, 1.0)
    with raises(TypeError, "select", "bool"):
        af.select(x, x, x)
    with raises(TypeError, "input", "int64"):
        af.input((2,), dtype="int64")
    with raises(ValueError, "input", "1abc"):
        af.input((2,), name="1abc")
    with pytest.raises(TypeError):
        x + "a"
    with raises(TypeError, "maximum", "str"):
        x.maximum("a")
    with raises(TypeError, "concat", "Tensor", "int"):
        af.concat([x, 3])


def test_non_finite_and_overflowing_weights():
    x = af.input((2, 3))
    w = np.ones((3, 2), np.float32)
    w[1, 0] = np.nan
    with raises(ValueError, "matmul", "element 2", "NaN", "[3, 2]"):
        x @ w
    with raises(ValueError, "constant", "inf"):
        af.constant(np.array([1.0, np.inf]))
    with raises(ValueError, "conv", "1000000"):
        af.conv(af.input((1, 1, 4, 4)), np.full((1, 1, 1, 1), 1e6))


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8, np.bool_, np.complex64])
def test_non_float_weights_are_type_errors(dtype):
    name = np.dtype(dtype).name
    with raises(TypeError, "matmul", name):
        af.input((2, 3)) @ np.ones((3, 2), dtype=dtype)
    with raises(TypeError, "conv", name):
        af.conv(af.input((1, 3, 4, 4)), np.ones((2, 3, 1, 1), dtype=dtype))


def test_norm_parameter_shapes():
    x = af.input((2, 3))
    with raises(ValueError, "layer_norm", "[3]", "[4]"):
        x.layer_norm(np.ones(4))
    with raises(ValueError, "batch_norm", "[3]", "[2]"):
        af.batch_norm(af.input((1, 3, 4, 4)), np.zeros(2), np.ones(3))


# ------------------------------------------------------------- compile ------------------
def test_compile_errors():
    x = af.input((2, 3))
    with raises(TypeError, "compile", "bool"):
        af.compile(x > 0)
    with raises(ValueError, "device", "tpu"):
        af.compile(x.relu(), device="tpu")
    with raises(ValueError, "precision", "fp8"):
        af.compile(x.relu(), precision="fp8")
    with raises(TypeError, "compile", "int"):
        af.compile(3)
    with raises(ValueError, "compile", "no outputs"):
        af.compile([])
    with raises(TypeError, "compile", "str"):
        af.compile({1: x.relu()})


def test_load_errors(tmp_path):
    with pytest.raises(OSError):
        af.load(tmp_path / "missing")
    net = af.compile(af.input((2,)).relu(), build_dir=tmp_path / "p")
    (tmp_path / "p" / "model.mil").write_text("program(1.3)\nnot mil at all {")
    with raises(ValueError, "model.mil"):
        af.load(tmp_path / "p")
    assert net(np.ones(2, np.float32)).tolist() == [1.0, 1.0]


# ------------------------------------------------------------- call time ----------------
@pytest.fixture(scope="module")
def net():
    return af.compile(af.input((2, 3), name="x").relu())


def test_wrong_shape(net):
    with raises(ValueError, "'x'", "(2, 3)", "(3, 2)"):
        net(np.ones((3, 2), np.float32))
    with raises(ValueError, "'x'", "(2, 3)", "(6,)"):
        net(np.ones(6))


def test_wrong_number_of_inputs(net):
    a = np.ones((2, 3), np.float32)
    with raises(TypeError, "1 input", "got 2"):
        net(a, a)
    with raises(TypeError, "1 input", "got 0"):
        net()


def test_inputs_by_name_errors(net):
    a = np.ones((2, 3), np.float32)
    with raises(TypeError, "position", "name"):
        net(a, x=a)
    with raises(TypeError, "missing", "'x'"):
        net(y=a)
    with raises(TypeError, "unknown", "'y'"):
        net(x=a, y=a)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8, np.bool_])
def test_integer_array_to_fp16_port(net, dtype):
    with raises(TypeError, "'x'", "fp16", np.dtype(dtype).name):
        net(np.ones((2, 3), dtype))


@pytest.mark.parametrize(
    "value, index, word", [(np.nan, 5, "NaN"), (np.inf, 1, "inf"), (-np.inf, 0, "inf"), (1e6, 3, "1000000")]
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_non_finite_or_overflowing_inputs(net, value, index, word, dtype):
    a = np.ones((2, 3), dtype)
    a.flat[index] = value
    with raises(ValueError, "'x'", f"element {index}", word):
        net(a)


def test_uint8_port_values():
    m = af.compile(af.image_input((1, 1, 2, 2), scale=1.0) * 2.0)
    with raises(ValueError, "element 2", "300", "0..=255"):
        m(np.array([[[[1, 2], [300, 4]]]]))
    with raises(ValueError, "element 3", "-1"):
        m(np.array([[[[1, 2], [3, -1]]]]))
    with raises(TypeError, "uint8", "float32"):
        m(np.ones((1, 1, 2, 2), np.float32))
    np.testing.assert_array_equal(m(np.full((1, 1, 2, 2), 255)), np.full((1, 1, 2, 2), 510.0))


def test_errors_leave_the_model_usable(net):
    bad = np.ones((2, 3), np.float32)
    bad[0, 0] = np.nan
    with pytest.raises(ValueError):
        net(bad)
    np.testing.assert_array_equal(net(-np.ones((2, 3), np.float32)), np.zeros((2, 3)))


def test_resize_bilinear_sampling_mode_errors():
    x = af.input((1, 1, 4, 4))
    with pytest.raises(ValueError, match="HALF_PIXEL"):
        af.resize_bilinear(x, 2, 2, sampling_mode="HALF_PIXEL")
    with pytest.raises(ValueError, match="not both"):
        af.resize_bilinear(x, 2, 2, align_corners=True, sampling_mode="DEFAULT")
