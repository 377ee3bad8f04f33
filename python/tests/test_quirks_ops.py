"""prelu / local_response_norm / einsum / affine errors, and the quirk rewrites seen from Python:
compile(target=...) keeps results equal to NumPy and reports the hazards it cannot remove."""

from __future__ import annotations

import aneforge as af
import numpy as np
import pytest


def test_einsum_unsupported_forms_raise_not_implemented():
    a, b = af.input((3, 3)), af.input((3, 4))
    for eq in ["ii,ij->ij", "...i,ij->...j", "ij,jk,kl->il"]:
        with pytest.raises(NotImplementedError):
            af.einsum(eq, a, b)
    with pytest.raises(NotImplementedError, match="nchw,nwhu->nchu"):
        af.einsum_native("ij,jk->ik", a, b)
    with pytest.raises(ValueError, match="output letter 'z'"):
        af.einsum("ij,jk->iz", a, b)
    with pytest.raises(ValueError, match="'j' is 3"):
        af.einsum("ij,jk->ik", a, af.input((4, 4)))


def test_channel_and_affine_shape_errors():
    x = af.input((1, 3, 4, 5))
    with pytest.raises(ValueError, match=r"alpha must have shape \[C\] = \[3\]"):
        x.prelu(np.ones(4))
    with pytest.raises(ValueError, match="size = 0"):
        af.local_response_norm(x, 0)
    with pytest.raises(ValueError, match=r"transform_matrix must be \[B, 6\] or \[1, 6\]"):
        af.affine(x, np.zeros((2, 6)), 4, 4)
    with pytest.raises(TypeError):
        af.affine(np.zeros((1, 3, 4, 5)), np.zeros((1, 6)), 4, 4)


def test_affine_is_rejected_below_a14():
    x = af.input((1, 1, 4, 4))
    y = af.affine(x, np.array([[1, 0, 0, 0, 1, 0]], dtype=np.float32), 4, 4)
    with pytest.raises(NotImplementedError, match="affine"):
        af.compile(y, target="h13", device="reference")
    af.compile(y, target="h14", device="reference")


def test_round_and_softplus_rewrites_keep_numpy_results():
    x = np.concatenate([np.linspace(-3000, 3000, 2001), np.arange(-20.5, 21.5)]).astype(np.float32)[None]
    t = af.input(x.shape)
    m = af.compile([t.round(), t.softplus()], device="reference")
    r, s = m(x)
    xq = x.astype(np.float16).astype(np.float64)
    np.testing.assert_array_equal(r, np.round(xq).astype(np.float16).astype(np.float32))
    ref = np.logaddexp(0.0, xq)
    assert np.max(np.abs(s - ref) / np.maximum(np.abs(ref), 1.0)) <= 1e-3


def test_width_slice_on_a13_is_moved_and_a_rank1_one_is_reported(monkeypatch, capfd):
    monkeypatch.delenv("ANEFORGE_QUIET", raising=False)
    x = np.random.default_rng(5).uniform(-4, 4, (3, 5, 20)).astype(np.float32)
    t = af.input(x.shape)
    m = af.compile(t.slice_by_size((0, 1, 4), (3, 3, 10)), target="h13", device="reference")
    np.testing.assert_array_equal(m(x), x.astype(np.float16).astype(np.float32)[:, 1:4, 4:14])
    assert "warning" not in capfd.readouterr().err
    v = af.input((40,))
    af.compile(v.slice_by_size((3,), (7,)), target="h13", device="reference")
    err = capfd.readouterr().err
    assert "aneforge: warning:" in err and "4094" in err and "A13" in err
