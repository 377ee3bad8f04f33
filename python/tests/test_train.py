"""Optimizers, the Trainer's three modes, checkpoints and file readers against NumPy oracles
written here; MNIST-5k runs of the examples (the slowest tests here: about 10 s for the MLP in
three modes and about a minute for the CNN on the reference executor)."""

import json
import sys
from pathlib import Path

import aneforge as af
import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))


def regression(seed=0, batch=8):
    """A linear least-squares problem: params W [4, 3], b [3]; data x [8, 4], y [8, 3]."""
    rng = np.random.default_rng(seed)
    w, b = af.parameter(rng.normal(size=(4, 3)) * 0.5), af.parameter(np.zeros(3))
    x, y = af.input([batch, 4]), af.input([batch, 3])
    return [w, b], af.mse(x @ w + b, y)


def numpy_grads(w, b, x, y):
    r = x @ w + b - y
    g = 2 * r / r.size
    return [x.T @ g, g.sum(0)]


@pytest.mark.parametrize("mode", ["host", "device"])
def test_sgd_momentum_weight_decay_follow_numpy(mode):
    params, loss = regression()
    w0, b0 = (af.value(p).astype(np.float64).copy() for p in params)
    prec = "fp32" if mode == "host" else "fp16"
    tr = af.Trainer(
        loss=loss,
        params=params,
        lr=0.1,
        optimizer="sgd",
        momentum=0.9,
        weight_decay=0.01,
        device="reference",
        precision=prec,
        device_optimizer=(mode == "device"),
    )
    rng = np.random.default_rng(1)
    ws, bufs = [w0, b0], [np.zeros_like(w0), np.zeros_like(b0)]
    for _ in range(5):
        x, y = rng.normal(size=(8, 4)), rng.normal(size=(8, 3))
        tr.step(x, y)
        for k, g in enumerate(numpy_grads(*ws, x, y)):
            bufs[k] = 0.9 * bufs[k] + g + 0.01 * ws[k]
            ws[k] = ws[k] - 0.1 * bufs[k]
    tr.sync()
    tol = 1e-5 if mode == "host" else 5e-3
    for p, ref in zip(params, ws):
        np.testing.assert_allclose(af.value(p), ref, rtol=tol, atol=tol)


def test_adamw_decouples_weight_decay_and_follows_numpy():
    params, loss = regression()
    ws = [af.value(p).astype(np.float64) for p in params]
    tr = af.Trainer(
        loss=loss, params=params, lr=0.05, optimizer="adamw", weight_decay=0.1, device="reference", precision="fp32"
    )
    rng = np.random.default_rng(2)
    ms, vs = [np.zeros_like(w) for w in ws], [np.zeros_like(w) for w in ws]
    for t in range(1, 6):
        x, y = rng.normal(size=(8, 4)), rng.normal(size=(8, 3))
        tr.step(x, y)
        for k, g in enumerate(numpy_grads(*ws, x, y)):
            ws[k] = ws[k] * (1 - 0.05 * 0.1)  # decoupled: not through the moments
            ms[k] = 0.9 * ms[k] + 0.1 * g
            vs[k] = 0.999 * vs[k] + 0.001 * g * g
            ws[k] = ws[k] - 0.05 * (ms[k] / (1 - 0.9**t)) / (np.sqrt(vs[k] / (1 - 0.999**t)) + 1e-8)
    for p, ref in zip(params, ws):
        np.testing.assert_allclose(af.value(p), ref, rtol=1e-5, atol=1e-5)


def test_parameters_are_tensors_owning_their_master_weights():
    p = af.parameter(np.arange(6.0).reshape(2, 3), name="pw")
    assert isinstance(p, af.Tensor) and isinstance(p, af.Parameter) and p.name == "pw"
    y = af.compile((p * 2.0 + 1.0).relu(), device="reference", precision="fp32")(pw=af.value(p))
    np.testing.assert_array_equal(y, np.arange(6.0).reshape(2, 3) * 2 + 1)
    v = af.value(p)
    v[0, 0] = 100.0  # a copy: the master weights are the core's
    assert af.value(p)[0, 0] == 0.0
    with pytest.raises(ValueError, match="non-finite value NaN at index 1"):
        af.parameter([1.0, np.nan])


def test_trainer_argument_errors_name_the_inputs():
    params, loss = regression()
    with pytest.raises(ValueError, match="optimizer must be 'sgd', 'adam' or 'adamw'"):
        af.Trainer(loss=loss, params=params, optimizer="lbfgs")
    tr = af.Trainer(loss=loss, params=params, lr=0.1, device="reference")
    with pytest.raises(TypeError, match=r"takes 2 array\(s\)"):
        tr.step(np.zeros((8, 4)))
    with pytest.raises(ValueError, match=r"has shape \[7, 4\]; expected \[8, 4\]"):
        tr.step(np.zeros((7, 4)), np.zeros((8, 3)))
    with pytest.raises(ValueError, match="need logits"):
        tr.accuracy(np.zeros((3, 4)), np.zeros(3))
    with pytest.raises(TypeError, match="not a parameter"):
        af.Trainer(loss=loss, params=[af.input([4, 3])])


def test_nonfinite_gradient_skips_the_step_with_a_warning():
    params, loss = regression()
    before = [af.value(p).copy() for p in params]
    tr = af.Trainer(loss=loss, params=params, lr=0.1, optimizer="adam", loss_scale=60000.0, device="reference")
    with pytest.warns(RuntimeWarning, match="non-finite gradient: step skipped"):
        tr.step(np.full((8, 4), 100.0), np.full((8, 3), -3000.0))
    assert tr.t == 0
    for p, b in zip(params, before):
        np.testing.assert_array_equal(af.value(p), b)


@pytest.mark.parametrize("mode", ["host", "device", "resident"])
def test_checkpoint_round_trip_resumes_identically(tmp_path, mode):
    kw = dict(
        lr=0.05,
        optimizer="adam",
        device="reference",
        device_optimizer=mode == "device",
        resident_state=mode == "resident",
    )
    rng = np.random.default_rng(3)
    batches = [(rng.normal(size=(8, 4)), rng.normal(size=(8, 3))) for _ in range(6)]
    pa, la = regression(0)
    a = af.Trainer(loss=la, params=pa, **kw)
    for x, y in batches[:3]:
        a.step(x, y)
    a.save(tmp_path / "ck.safetensors")
    pb, lb = regression(5)  # different init, overwritten by load
    b = af.Trainer(loss=lb, params=pb, **kw)
    b.load(tmp_path / "ck.safetensors")
    assert b.t == a.t == 3
    for x, y in batches[3:]:
        assert a.step(x, y) == b.step(x, y)
    a.sync(), b.sync()
    for p, q in zip(pa, pb):
        np.testing.assert_array_equal(af.value(p), af.value(q))
    tensors, meta = af.load_safetensors(tmp_path / "ck.safetensors")
    assert (meta["step"], meta["optimizer"]) == ("3", "adam")
    assert sorted(tensors) == sorted(f"{s}.{k}" for k in range(2) for s in ("params", "m", "v"))
    b.release()
    with pytest.raises(RuntimeError, match="released"):
        b.step(*batches[0])


def test_safetensors_layout_and_rejection_of_bad_files(tmp_path):
    path = tmp_path / "t.safetensors"
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    af.save_safetensors(path, {"a": a, "b": np.array([7], np.int64)}, {"k": "v"})
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + n])
    assert n % 8 == 0 and header["__metadata__"] == {"k": "v"}
    for name, want in [
        ("a", a.tobytes()),
        ("b", np.array([7], "<i8").tobytes()),
    ]:  # the format fixes offsets, not order
        begin, end = header[name]["data_offsets"]
        assert raw[8 + n + begin : 8 + n + end] == want
    assert (header["a"]["dtype"], header["a"]["shape"], header["b"]["dtype"]) == ("F32", [2, 3], "I64")
    tensors, meta = af.load_safetensors(path)
    np.testing.assert_array_equal(tensors["a"], a)
    assert meta == {"k": "v"} and tensors["b"].tolist() == [7]
    path.write_bytes(raw[:-4])
    with pytest.raises(ValueError, match="offsets"):
        af.load_safetensors(path)
    path.write_bytes(b"\xff" * 12)
    with pytest.raises(ValueError, match="header length"):
        af.load_safetensors(path)


def test_cifar10_reader_on_a_file_in_the_binary_format(tmp_path):
    rng = np.random.default_rng(0)
    labels = np.array([3, 0, 9], np.uint8)
    pixels = rng.integers(0, 256, size=(3, 3072), dtype=np.uint8)
    path = tmp_path / "data_batch_1.bin"
    path.write_bytes(b"".join(bytes([l]) + p.tobytes() for l, p in zip(labels, pixels)))
    x, y = af.read_cifar10(path)
    assert x.shape == (3, 3, 32, 32) and x.dtype == np.uint8
    assert y.tolist() == [3, 0, 9]
    np.testing.assert_array_equal(x[1, 2], pixels[1, 2048:].reshape(32, 32))  # blue plane of record 1
    path.write_bytes(path.read_bytes()[:-1])
    with pytest.raises(ValueError, match="3073-byte"):
        af.read_cifar10(path)


def test_mlp_loss_tracks_a_numpy_float32_adam_mlp_for_50_steps():
    import train_mnist_mlp as ex

    x_train, y_train, _, _ = af.load_mnist_5k(seed=0)
    params, obj = ex.build(seed=0)
    init = [af.value(p).copy() for p in params]
    tr = af.Trainer(loss=obj, params=params, lr=3e-3, optimizer="adam", device="reference")
    w1, b1, w2, b2 = init
    state = [[np.zeros_like(v), np.zeros_like(v)] for v in init]
    rng = np.random.default_rng(0)
    order = rng.permutation(len(x_train))
    ours, ref = [], []
    for t in range(1, 51):
        idx = order[(t - 1) * 128 % 3968 :][:128]
        x, y = x_train[idx].astype(np.float32), y_train[idx]
        ours.append(tr.step(x, y))
        z = x @ w1 + b1
        from math import erf

        cdf = (0.5 * (1 + np.vectorize(erf)(z / np.sqrt(2)))).astype(np.float32)
        a = z * cdf
        lo = a @ w2 + b2
        m = lo.max(1, keepdims=True)
        p = np.exp(lo - m)
        p /= p.sum(1, keepdims=True)
        onehot = np.eye(10, dtype=np.float32)[y]
        ref.append(float(np.mean(-np.log((p * onehot).sum(1)))))
        dlo = (p - onehot) / 128
        dz = (dlo @ w2.T) * (cdf + z * np.exp(-z * z / 2) / np.float32(np.sqrt(2 * np.pi)))
        grads = [x.T @ dz, dz.sum(0), a.T @ dlo, dlo.sum(0)]
        for k, (v, g) in enumerate(zip([w1, b1, w2, b2], grads)):
            mom, vel = state[k]
            mom[...] = 0.9 * mom + 0.1 * g
            vel[...] = 0.999 * vel + 0.001 * g * g
            v -= np.float32(3e-3) * (mom / (1 - 0.9**t)) / (np.sqrt(vel / (1 - 0.999**t)) + np.float32(1e-8))
    ours, ref = np.array(ours), np.array(ref)
    assert ref[-1] < 0.6 * ref[0]  # the oracle itself learned
    np.testing.assert_allclose(ours, ref, rtol=2e-2, atol=2e-2)


def test_mnist_mlp_reaches_89_percent_and_device_modes_agree_with_host_adam(tmp_path):
    import io
    import zlib

    import train_mnist_mlp as ex
    from train_common import save_curves

    logs = {mode: io.StringIO() for mode in ["host", "device", "resident"]}
    runs = {mode: ex.train(mode, log=log) for mode, log in logs.items()}
    acc = {mode: hist["accuracy"][-1] for mode, (_, hist) in runs.items()}
    assert f"epoch 8 test accuracy {100 * acc['host']:.2f}%" in logs["host"].getvalue()
    assert acc["host"] >= 0.89, acc
    assert abs(acc["device"] - acc["host"]) <= 0.01 and abs(acc["resident"] - acc["host"]) <= 0.01, acc
    hist = runs["host"][1]
    save_curves(tmp_path / "c.png", hist["loss"], hist["accuracy"])
    raw = (tmp_path / "c.png").read_bytes()
    assert (
        raw[:8] == b"\x89PNG\r\n\x1a\n"
        and int.from_bytes(raw[16:20], "big") == 640
        and int.from_bytes(raw[20:24], "big") == 240
    )
    idat = raw[raw.index(b"IDAT") + 4 : raw.index(b"IEND") - 8]
    pixels = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(240, 1 + 640 * 3)[:, 1:].reshape(240, 640, 3)
    assert (pixels == (30, 60, 200)).all(-1).any() and (pixels == (200, 40, 30)).all(-1).any()  # both curves drawn


def test_mnist_cnn_reaches_94_percent():
    import train_mnist_cnn as ex

    trainer, hist = ex.train(log=open("/dev/null", "w"))
    assert hist["accuracy"][-1] >= 0.94, hist["accuracy"]
    assert trainer.accuracy(*af.load_mnist_5k(seed=0)[2:]) == hist["accuracy"][-1]
