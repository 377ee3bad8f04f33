"""The attention_tiles compile option and its tune variants on the reference executor: sdpa
(plain, causal, user mask) and mha against a float64 NumPy attention for even and uneven tile
counts, bit-identical outputs across counts, bad counts refused naming the option, and tune
measuring, gating and caching the attention_tiles=k variants."""

import aneforge as af
import numpy as np
import pytest

RNG = np.random.default_rng(7)


def _f16(x):
    """x as the program sees it (fp16 inputs and constants), in float64."""
    return np.asarray(x, np.float32).astype(np.float16).astype(np.float64)


def _attention(q, k, v, scale, mask=None):
    """softmax(q kᵀ · scale + mask) v in float64 (the oracle)."""
    s = q @ np.swapaxes(k, -1, -2) * scale + (0.0 if mask is None else mask)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)) @ v


def _check(y, xs, want, counts):
    """Each count within fp16 rounding of want and with the default compile's bits."""
    default = af.compile(y, device="reference")(*xs)
    np.testing.assert_allclose(default, want, atol=1e-2 * np.abs(want).max())
    for k in counts:
        got = af.compile(y, device="reference", attention_tiles=k)(*xs)
        np.testing.assert_allclose(got, want, atol=1e-2 * np.abs(want).max())
        assert got.tobytes() == default.tobytes(), f"{k} tiles changed the bits"


@pytest.mark.parametrize("kind", ["plain", "causal", "mask"])
def test_sdpa_tile_counts_match_numpy(kind):
    h, s, d = 2, 41, 8
    q, k, v = (RNG.standard_normal((1, h, s, d)).astype(np.float32) for _ in range(3))
    mask = (RNG.standard_normal((1, 1, s, s)) * 3).astype(np.float32)
    tq, tk, tv = (af.input((1, h, s, d)) for _ in range(3))
    scale = 1 / np.sqrt(d)
    if kind == "plain":
        y, m = af.sdpa(tq, tk, tv), None
    elif kind == "causal":
        y, m = af.sdpa(tq, tk, tv, is_causal=True), np.triu(np.full((s, s), -1e4), 1)
    else:
        y, m, scale = af.sdpa(tq, tk, tv, scale=0.3, attn_mask=mask), _f16(mask), 0.3
    want = _attention(_f16(q), _f16(k), _f16(v), scale, m)
    _check(y, (q, k, v), want, [1, 2, 3, 6, 40, 41])


def test_mha_tile_counts_match_numpy():
    s, dm, heads = 23, 12, 3
    ws = [(RNG.standard_normal((dm, dm)) * 0.3).astype(np.float32) for _ in range(4)]
    x = RNG.standard_normal((s, dm)).astype(np.float32)
    y = af.mha(af.input((s, dm)), ws[0], None, ws[1], None, ws[2], None, ws[3], None, heads)
    xf = _f16(x)
    q, k, v = ((xf @ _f16(w).T).reshape(s, heads, -1).transpose(1, 0, 2) for w in ws[:3])
    o = _attention(q, k, v, 1 / np.sqrt(dm // heads)).transpose(1, 0, 2).reshape(s, dm)
    _check(y, (x,), o @ _f16(ws[3]).T, [2, 5, 23])


def test_bad_tile_counts_name_the_option():
    q = af.input((1, 1, 7, 4))
    y = af.sdpa(q, q, q)
    with pytest.raises(ValueError, match=r"attention_tiles must be >= 1 \(or \"auto\"\), got 0"):
        af.compile(y, device="reference", attention_tiles=0)
    with pytest.raises(ValueError, match=r"attention_tiles = 8 exceeds the 7 query rows of an attention \(sdpa\)"):
        af.compile(y, device="reference", attention_tiles=8)
    with pytest.raises(TypeError, match="attention_tiles must be an int"):
        af.CompileOptions(attention_tiles=1.5)
    assert af.CompileOptions(attention_tiles="auto").attention_tiles is None
    assert af.CompileOptions(attention_tiles=3).attention_tiles == 3


def test_tune_measures_and_caches_tile_variants(tmp_path, monkeypatch):
    monkeypatch.setenv("ANEFORGE_CACHE_DIR", str(tmp_path))
    q, k, v = (af.input((1, 1, 768, 8)) for _ in range(3))
    y = af.sdpa(q, k, v, is_causal=True)
    t = af.tune(y, budget=8, reps=2, device="reference")
    rows = {r["variant"]: r for r in t.table}
    # 768 rows: the heuristic builds 2 tiles; the variants are 1 and 4.
    assert {"baseline", "attention_tiles=1", "attention_tiles=4"} <= set(rows)
    for name in ["attention_tiles=1", "attention_tiles=4"]:
        assert not rows[name]["lossy"] and rows[name]["error"] == 0.0 and rows[name]["accepted"]
    if t.chosen.startswith("attention_tiles="):
        assert t.options["attention_tiles"] == int(t.chosen.split("=")[1])
    else:
        assert "attention_tiles" not in t.options
    xs = [RNG.standard_normal((1, 1, 768, 8)).astype(np.float32) for _ in range(3)]
    want = af.compile(y, device="reference")(*xs)
    assert t.model(*xs).tobytes() == want.tobytes()
    hit = af.tune(y, budget=8, reps=2, device="reference")
    assert hit.from_cache and hit.chosen == t.chosen
