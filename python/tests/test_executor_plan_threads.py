"""The reference executor's memory plan (net.memory()) and thread setting (af.set_num_threads),
checked against hand-computed byte counts and NumPy float64 oracles."""

import math

import aneforge as af
import numpy as np
import pytest


@pytest.fixture
def restore_threads():
    before = af.num_threads()
    yield
    af.set_num_threads(before)


def _chain_oracle(x):
    return 1.0 / (1.0 + np.exp(-np.tanh(np.maximum(x.astype(np.float64), 0.0))))


@pytest.mark.parametrize(("precision", "io"), [("fp16", 192), ("fp32", 128)])
def test_memory_matches_the_hand_computed_plan(precision, io):
    # x [1, 16] -> a = relu -> b = tanh -> c = sigmoid -> y = abs: a and c share a slot (a dies
    # when b is written), b needs its own: 2 slots x 16 x 4 B = 128 B instead of 3 x 64 = 192 B.
    # io: x and y as f32 (2 x 64 B) plus, in fp16, their fp16 port buffers (2 x 32 B).
    y = af.input([1, 16]).relu().tanh().sigmoid().abs()
    net = af.compile(y, device="reference", precision=precision)
    assert net.n_ops == 4
    assert net.memory() == {
        "weights": 0,
        "activations": 128,
        "io": io,
        "peak": 128 + io,
        "unplanned_activations": 192,
    }
    x = np.linspace(-2, 2, 16, dtype=np.float32).reshape(1, 16)
    for _ in range(2):  # the second call runs on slots holding the first call's values
        np.testing.assert_allclose(net(x), _chain_oracle(x), atol=2e-3)


def test_memory_counts_weights_once():
    # y = x * w + w with a [1, 64] constant w: 64 x 4 B of weights whatever the number of uses.
    w = np.linspace(0.5, 1.5, 64, dtype=np.float32).reshape(1, 64)
    c = af.constant(w)
    net = af.compile(af.input([1, 64]) * c + c, device="reference")
    m = net.memory()
    assert m["weights"] == 64 * 4
    assert m["peak"] == m["weights"] + m["activations"] + m["io"]
    x = np.linspace(-1, 1, 64, dtype=np.float32).reshape(1, 64)
    np.testing.assert_allclose(net(x), x.astype(np.float64) * w + w, rtol=2e-3, atol=2e-3)


def test_memory_of_a_segmented_plan_is_not_implemented():
    net = af.compile(af.argmax(af.input([1, 8]).relu(), axis=-1), device="reference", route="host")
    with pytest.raises(NotImplementedError, match="memory plan"):
        net.memory()


@pytest.mark.parametrize("n", [0, -1])
def test_set_num_threads_rejects_less_than_one(n):
    with pytest.raises(ValueError, match="n must be >= 1"):
        af.set_num_threads(n)


def test_results_are_bit_identical_at_one_and_two_threads(restore_threads):
    # Large enough to split: a [64, 256] x [256, 256] matmul (4.2 M multiply-adds) and GELU.
    rng = np.random.default_rng(3)
    w = (rng.standard_normal((256, 256)) / 16).astype(np.float16).astype(np.float32)
    x = rng.standard_normal((64, 256)).astype(np.float16).astype(np.float32)
    net = af.compile((af.input([64, 256]) @ af.constant(w)).gelu(), device="reference")
    outs = {}
    for n in (1, 2):
        af.set_num_threads(n)
        assert af.num_threads() == n
        outs[n] = net(x)
    np.testing.assert_array_equal(outs[1], outs[2])
    h = x.astype(np.float64) @ w.astype(np.float64)
    erf = np.vectorize(math.erf)
    np.testing.assert_allclose(outs[1], 0.5 * h * (1 + erf(h / np.sqrt(2))), rtol=1e-2, atol=1e-2)
