"""Model.profile, `aneforge profile` and ANEFORGE_PROFILE=1: one row per executor step (reference executor; a fused step is one row)
with work counted by hand, shares of the call, and a Chrome trace whose events nest per call."""

import json
import os
import subprocess
import sys

import aneforge as af
import numpy as np
import pytest


def _net():
    x = af.input([128, 256], name="x")
    w = np.linspace(-1, 1, 256 * 192, dtype=np.float32).reshape(256, 192)
    return af.compile((x @ af.constant(w)).relu() + 1.0, device="reference")


def _check_trace(path, runs, ops_per_run):
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]
    assert all(e["ph"] == "X" and e["dur"] >= 0 for e in events)
    calls = [e for e in events if e["cat"] == "call"]
    ops = [e for e in events if e["cat"] == "op"]
    assert len(calls) == runs and len(ops) == runs * ops_per_run
    for op in ops:
        (call,) = [c for c in calls if c["args"]["run"] == op["args"]["run"]]
        assert call["ts"] <= op["ts"] and op["ts"] + op["dur"] <= call["ts"] + call["dur"] + 1e-6


def test_model_profile_rows_and_trace(tmp_path):
    net = _net()
    x = np.ones((128, 256), np.float32)
    trace = tmp_path / "trace.json"
    p = net.profile(x, repeat=4, trace=str(trace))
    assert p["device"] == "reference" and p["runs"] == 4 and p["call_us"] > 0
    names = [r["name"] for r in p["rows"]]
    # One row per executor step: relu and + 1 run as one fused elementwise step.
    assert names == ["matmul", "relu+add"]
    mm = p["rows"][0]
    # 128·192 outputs × 256 multiply-adds × 2; fp16 bytes 2·(128·256 + 256·192 + 128·192).
    assert (mm["kind"], mm["shape"], mm["flops"]) == ("op", [128, 192], 2 * 128 * 192 * 256)
    assert mm["bytes"] == 2 * (128 * 256 + 256 * 192 + 128 * 192)
    # Op spans nest inside the call, so their shares partition part of it (the rest is the
    # call's own overhead; how much depends on the machine's load, so no lower bound).
    total = sum(r["share"] for r in p["rows"])
    assert all(r["share"] >= 0 for r in p["rows"]) and 0 < total <= 1.0 + 1e-9, p["table"]
    assert "matmul" in p["table"]
    _check_trace(trace, 4, 2)
    # The program still computes after profiling: relu(x·w) + 1 against NumPy float64.
    w = np.linspace(-1, 1, 256 * 192).reshape(256, 192)
    np.testing.assert_allclose(net(x), np.maximum(x.astype(np.float64) @ w, 0) + 1, rtol=2e-3, atol=5e-2)


def test_profile_refuses_bad_repeat():
    with pytest.raises(ValueError, match="repeat must be 1"):
        _net().profile(np.ones((128, 256), np.float32), repeat=0)


def test_cli_profile_prints_the_table_and_writes_the_trace(tmp_path, capsys):
    net = _net()
    np.save(tmp_path / "x.npy", np.ones((128, 256), np.float32))
    trace = tmp_path / "cli.json"
    args = ["aneforge", "profile", net.program_dir, "--input", f"x={tmp_path / 'x.npy'}"]
    assert af._core.cli_main([*args, "--repeat", "3", "--trace", str(trace), "--device", "reference"]) == 0
    _check_trace(trace, 3, 2)


def test_env_profile_prints_a_table_when_the_program_is_freed():
    code = (
        "import numpy as np, aneforge as af\n"
        "x = af.input([16, 16])\n"
        "net = af.compile(x.relu() * 2.0, device='reference')\n"
        "for _ in range(3): net(np.ones((16, 16), np.float32))\n"
        "net.release()\n"
    )
    env = {**os.environ, "ANEFORGE_PROFILE": "1", "ANEFORGE_QUIET": "1"}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert "ANEFORGE_PROFILE" in r.stderr and "3 call(s)" in r.stderr, r.stderr
    assert "relu" in r.stderr


def test_a_fused_conv_step_is_one_row_with_the_work_of_its_ops():
    # conv 3→4 (3×3, pad 1) on 8×8, then batch_norm and relu run inside the conv's step.
    x = af.input([1, 3, 8, 8], name="x")
    w = np.linspace(-1, 1, 4 * 3 * 9, dtype=np.float32).reshape(4, 3, 3, 3)
    st = np.linspace(0.5, 1.5, 4, dtype=np.float32)
    y = af.batch_norm(af.conv(x, w, pad=[1, 1, 1, 1]), st * 0, st, st, st * 0.1).relu()
    net = af.compile(y, device="reference")
    xs = np.linspace(-1, 1, 3 * 64, dtype=np.float32).reshape(1, 3, 8, 8)
    p = net.profile(xs, repeat=2, clock="cpu")
    assert p["clock"] == "cpu" and "cpu clock" in p["table"]
    (row,) = [r for r in p["rows"] if r["kind"] == "op"]
    assert row["name"] == "conv+batch_norm+relu" and row["shape"] == [1, 4, 8, 8]
    # conv: 256 outputs × 27 multiply-adds × 2; batch_norm and relu: 256 elements each.
    assert row["flops"] == 2 * 256 * 27 + 256 + 256
    # fp16 bytes of the step's inputs (x, w, 4 stats) and its one output (no intermediates).
    assert row["bytes"] == 2 * (3 * 64 + 108 + 4 * 4 + 256)
    # The fused step still computes conv → bn → relu (NumPy float64 oracle).
    xp = np.pad(xs.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    conv = np.zeros((4, 8, 8))
    for i in range(3):
        for j in range(3):
            conv += np.einsum("oc,chw->ohw", w[:, :, i, j], xp[0, :, i : i + 8, j : j + 8])
    s = st[:, None, None].astype(np.float64)
    ref = np.maximum((conv - 0) / np.sqrt(s + 1e-5) * s + 0.1 * s, 0)
    np.testing.assert_allclose(net(xs)[0], ref, rtol=4e-3, atol=4e-3)


def test_profile_refuses_an_unknown_clock():
    with pytest.raises(ValueError, match="unknown clock 'tsc'"):
        _net().profile(np.ones((128, 256), np.float32), clock="tsc")
