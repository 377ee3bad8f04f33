"""af.parameter / af.backward / losses against NumPy float64 oracles written here (fp32
reference mode, so only the fp16 rounding of baked constants separates us from the oracle)."""

from math import erf, sqrt

import aneforge as af
import numpy as np
import pytest

rng = np.random.default_rng(7)


def run_fp32(outputs, **feeds):
    return af.compile(outputs, device="reference", precision="fp32")(**feeds)


def gelu_and_grad(z):
    cdf = 0.5 * (1 + np.vectorize(erf)(z / sqrt(2)))
    return z * cdf, cdf + z * np.exp(-z * z / 2) / sqrt(2 * np.pi)


def test_mlp_cross_entropy_gradients_match_numpy_backprop():
    n, d, h, k = 5, 6, 7, 4
    w1, b1, w2, b2 = (
        rng.normal(size=(d, h)),
        rng.normal(size=h) * 0.1,
        rng.normal(size=(h, k)),
        rng.normal(size=k) * 0.1,
    )
    params = [af.parameter(v, name=nm) for v, nm in [(w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2")]]
    x_in, y_in = af.input([n, d], name="x"), af.input([n], name="y")
    logits = (x_in @ params[0] + params[1]).gelu() @ params[2] + params[3]
    loss = af.softmax_cross_entropy(logits, y_in)
    grads = af.backward(loss, params)
    x, y = rng.normal(size=(n, d)), np.array([0, 3, 1, 2, 3])
    feeds = {nm: v for nm, v in [("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2), ("x", x), ("y", y.astype(np.float32))]}
    got = run_fp32({"loss": loss, **{f"g{i}": grads[p] for i, p in enumerate(params)}}, **feeds)

    w1, b1, w2, b2 = (af.value(p).astype(np.float64) for p in params)
    z = x @ w1 + b1
    a, da = gelu_and_grad(z)
    lo = a @ w2 + b2
    p = np.exp(lo - lo.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    onehot = np.eye(k)[y]
    ref_loss = np.mean(-np.log((p * onehot).sum(1)))
    dlo = (p - onehot) / n
    dw2, db2 = a.T @ dlo, dlo.sum(0)
    dz = (dlo @ w2.T) * da
    dw1, db1 = x.T @ dz, dz.sum(0)
    assert got["loss"].shape == (1, 1)
    np.testing.assert_allclose(got["loss"][0, 0], ref_loss, rtol=1e-5)
    for i, ref in enumerate([dw1, db1, dw2, db2]):
        err = np.linalg.norm(got[f"g{i}"] - ref) / np.linalg.norm(ref)
        assert err < 1e-4, (i, err)  # f32 erf approximation inside GELU


def test_cross_entropy_indices_and_onehot_agree_with_numpy_and_are_stable():
    logits = np.array([[1000.0, 0.0, -5.0], [2.0, 3.0, 4.0]], np.float32)  # 1000 would overflow a naive exp
    labels = np.array([0, 2])
    z, t_idx, t_hot = af.input([2, 3], name="z"), af.input([2], name="t"), af.input([2, 3], name="h")
    got = run_fp32(
        {"a": af.softmax_cross_entropy(z, t_idx), "b": af.softmax_cross_entropy(z, t_hot)},
        z=logits,
        t=labels.astype(np.float32),
        h=np.eye(3)[labels],
    )
    lz = logits.astype(np.float64)
    m = lz.max(1, keepdims=True)
    ref = np.mean(m[:, 0] + np.log(np.exp(lz - m).sum(1)) - lz[[0, 1], labels])
    np.testing.assert_allclose(got["a"][0, 0], ref, rtol=1e-4)
    np.testing.assert_allclose(got["b"][0, 0], ref, rtol=1e-4)


def test_mse_value_and_gradient():
    pred, target = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    p = af.parameter(pred, name="p")
    t = af.input([3, 4], name="t")
    loss = af.mse(p, t)
    got = run_fp32({"l": loss, "g": af.backward(loss, [p], loss_scale=8.0)[p]}, p=pred, t=target)
    np.testing.assert_allclose(got["l"][0, 0], np.mean((af.value(p) - target) ** 2), rtol=1e-5)
    np.testing.assert_allclose(got["g"], 8.0 * 2 * (af.value(p) - target) / 12, rtol=1e-5, atol=1e-6)


def test_stop_detaches_and_fan_out_accumulates():
    v = rng.normal(size=(2, 3))
    p = af.parameter(v, name="p")
    hidden = p * p
    loss = (hidden + p * 3.0).sum([0, 1])
    got = run_fp32({"full": af.backward(loss, [p])[p], "stopped": af.backward(loss, [p], stop=[hidden])[p]}, p=v)
    np.testing.assert_allclose(got["full"], 2 * af.value(p) + 3.0, rtol=1e-6)
    np.testing.assert_allclose(got["stopped"], np.full((2, 3), 3.0), rtol=1e-6)


def test_non_differentiable_op_raises_not_implemented_naming_it():
    p = af.parameter(np.ones((2, 2)))
    with pytest.raises(NotImplementedError, match="floor"):
        af.backward(p.floor().sum([0, 1]), [p])
    with pytest.raises(ValueError, match="parameters must be fp16 graph inputs"):
        af.backward(p.sum([0, 1]), [p.relu()])
    with pytest.raises(TypeError, match="not a parameter"):
        af.value(af.input([2]))


@pytest.mark.parametrize("stride,pad", [(1, 1), (2, 1), (2, 0), (3, 2)])
def test_conv2d_matches_numpy_convolution_and_its_weight_gradient(stride, pad):
    n, c, h, w, cout, k = 2, 3, 7, 6, 4, 3
    wt = rng.normal(size=(cout, c, k, k))
    x = rng.normal(size=(n, c, h, w))
    wp = af.conv_param(wt, name="cw")
    xi = af.input([n, c, h, w], name="x")
    y = af.conv2d(xi, wp, stride=stride, pad=pad)
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    assert y.shape == (n, cout, oh, ow)
    r = rng.normal(size=(n, cout, oh, ow))
    loss = (y * af.constant(r)).sum([0, 1, 2, 3])
    got = run_fp32({"y": y, "g": af.backward(loss, [wp])[wp]}, cw=af.value(wp), x=x)
    wt = af.value(wp).T.reshape(cout, c, k, k).astype(np.float64)
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    ref, gw = np.zeros((n, cout, oh, ow)), np.zeros_like(wt)
    r16 = r.astype(np.float16).astype(np.float64)
    for ky in range(k):
        for kx in range(k):
            patch = xp[:, :, ky : ky + stride * (oh - 1) + 1 : stride, kx : kx + stride * (ow - 1) + 1 : stride]
            ref += np.einsum("nchw,oc->nohw", patch, wt[:, :, ky, kx])
            gw[:, :, ky, kx] = np.einsum("nchw,nohw->oc", patch, r16)
    np.testing.assert_allclose(got["y"], ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got["g"], gw.reshape(cout, -1).T, rtol=1e-4, atol=1e-4)
