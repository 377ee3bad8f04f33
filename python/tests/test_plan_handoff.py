"""Segmented plans, round 3: int32 inputs returned as outputs (in Python and through
`aneforge run`), and host results handed to the next region rounded to fp16 (NumPy oracles)."""

from __future__ import annotations

import subprocess
import sys

import aneforge as af
import numpy as np


def test_an_int32_input_is_returned_exactly_beside_a_float_output():
    x = af.input((3,))
    ids = af.input((4,), dtype="int32", name="ids")
    net = af.compile({"ids_out": ids, "y": x * 2.0}, device="reference")
    idv = np.array([7, -3, 2**30, 0], np.int32)
    out = net(np.array([1.0, 2.0, 3.0], np.float32), idv)
    assert out["ids_out"].dtype == np.int32
    np.testing.assert_array_equal(out["ids_out"], idv)
    np.testing.assert_array_equal(out["y"], [2.0, 4.0, 6.0])
    alone = af.compile(ids, device="reference")
    np.testing.assert_array_equal(alone(idv), idv)


def test_aneforge_run_writes_a_returned_int32_input(tmp_path):
    ids = af.input((2, 3), dtype="int32", name="ids")
    net = af.compile(ids, device="reference", build_dir=str(tmp_path / "prog"))
    idv = np.array([[1, -2, 3], [40000, 5, 6]], np.int32)
    np.save(tmp_path / "ids.npy", idv)
    code = "import sys\nfrom aneforge._core import cli_main\nsys.exit(cli_main(['aneforge', *sys.argv[1:]]))\n"
    args = ["run", net.program_dir, "--input", f"ids={tmp_path / 'ids.npy'}", "--output-dir", str(tmp_path / "out")]
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    (name,) = [p.name for p in (tmp_path / "out").iterdir()]
    got = np.load(tmp_path / "out" / name)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, idv)


def test_host_results_reach_the_next_region_rounded_and_moved_values_exactly():
    # cumsum (a computing host op) is rounded to fp16 before the region that reads it; take
    # (a moving op) passes fp16 values through unchanged.
    rng = np.random.default_rng(4)
    # Multiples of 1/1024 up to 4: every partial sum is exact in f32 and float64 alike, and many
    # need more than fp16's 11 bits, so the rounding shows.
    xv = (rng.integers(-4096, 4096, size=(3, 64)) / 1024).astype(np.float32)
    perm = rng.permutation(64).astype(np.int32)
    x = af.input((3, 64))
    ids = af.input((64,), dtype="int32")
    y = af.take(af.cumsum((x * 0.5).relu(), axis=1), ids, axis=1) * 3.0
    net = af.compile(y, device="reference")

    def f16(a):
        return np.asarray(a, np.float64).astype(np.float16).astype(np.float64)

    r = f16(np.maximum(f16(xv * 0.5), 0))
    c = f16(np.cumsum(r, axis=1))
    want = f16(np.take(c, perm, axis=1) * 3.0)
    np.testing.assert_array_equal(net(xv, perm), want)
