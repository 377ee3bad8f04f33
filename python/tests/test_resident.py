"""Zero-copy views and resident state: Model.input_view / output_view / execute / alias /
release on the reference executor, and the same calls on the ANE executor driven against the
fake e5rt library (built here with gcc; not an ANE, and no hardware claim)."""

import gc
import os
import shutil
import subprocess
import sys
from pathlib import Path

import aneforge as af
import numpy as np
import pytest

FAKE_C = Path(__file__).resolve().parents[2] / "crates" / "aneforge" / "tests" / "fake_e5rt" / "fake_e5rt.c"


def counter(**kw):
    """x' = x + 1 on an input named 'state', output named 'next'."""
    return af.compile({"next": af.input([1, 8], name="state") + 1.0}, device="reference", **kw)


def test_counter_counts_1_2_3_with_views_execute_and_alias():
    net = counter()
    net.alias("next", "state")
    state = net.input_view()
    assert (state.dtype, state.shape) == (np.float16, (1, 8))
    assert np.all(state == 0)
    seen = []
    for _ in range(3):
        net.execute()
        seen.append(state.tolist()[0])
    assert seen == [[1.0] * 8, [2.0] * 8, [3.0] * 8]
    np.testing.assert_array_equal(net.output_view("next"), np.full((1, 8), 3.0, np.float16))
    state[0, :2] = [100.0, -7.0]
    net.execute()
    assert state[0, :3].tolist() == [101.0, -6.0, 4.0]


def test_views_reflect_writes_and_calls_share_the_same_buffers():
    net = af.compile(af.input([2, 3]).relu() * 2.0, device="reference")
    x, y = net.input_view(), net.output_view()
    assert x.flags.writeable and x.flags.c_contiguous and not x.flags.owndata
    x[...] = [[-1.0, 0.5, 2.0], [3.0, -4.0, 0.25]]
    net.execute()
    np.testing.assert_array_equal(y, np.array([[0.0, 1.0, 4.0], [6.0, 0.0, 0.5]], np.float16))
    out = net(np.full((2, 3), 1.5, np.float32))
    np.testing.assert_array_equal(x, np.full((2, 3), 1.5, np.float16))
    np.testing.assert_array_equal(y, np.full((2, 3), 3.0, np.float16))
    np.testing.assert_array_equal(out, np.full((2, 3), 3.0, np.float32))


def test_uint8_image_port_view():
    net = af.compile(af.image_input((1, 1, 2, 2), scale=1.0, bias=0.5), device="reference")
    v = net.input_view()
    assert (v.dtype, v.shape) == (np.uint8, (1, 1, 2, 2))
    v[...] = [[[[0, 1], [254, 255]]]]
    net.execute()
    np.testing.assert_array_equal(net.output_view(), np.array([[[[0.5, 1.5], [254.5, 255.5]]]], np.float16))


def test_view_and_alias_errors_name_the_ports():
    net = counter()
    net.execute()
    with pytest.raises(ValueError, match="must be called before the first execute"):
        net.alias("next", "state")
    with pytest.raises(ValueError, match=r"no output port named 'nope' \(outputs: \[\"next\"\]\)"):
        counter().alias("nope", "state")
    with pytest.raises(ValueError, match=r"output 'y' is fp16 \[1, 8\] but input 'state' is fp16 \[8\]"):
        s = af.input([8], name="state")
        af.compile({"y": s.reshape((1, 8))}, device="reference").alias("y", "state")
    two = af.compile(af.input([2], name="a") + af.input([2], name="b"), device="reference")
    with pytest.raises(ValueError, match=r"has 2 inputs \[\"a\", \"b\"\]; name one"):
        two.input_view()
    with pytest.raises(ValueError, match="no input port named 'c'"):
        two.input_view("c")
    assert two.input_view("b").shape == (2,)


def test_views_need_fp16_precision():
    net = af.compile(af.input([4]).relu(), device="reference", precision="fp32")
    with pytest.raises(ValueError, match="views need precision='fp16'"):
        net.input_view()


def test_views_keep_the_model_alive():
    v = counter().input_view()
    gc.collect()
    v[...] = 5.0
    assert v.tolist() == [[5.0] * 8]


def test_release_refuses_while_views_live_then_frees_and_later_calls_raise():
    net = counter()
    v = net.input_view()
    head = v[0, :4]
    del v
    with pytest.raises(RuntimeError, match="1 numpy view"):
        net.release()
    del head
    net.release()
    for call in (
        net.execute,
        net.input_view,
        lambda: net(np.zeros((1, 8), np.float32)),
        lambda: net.alias("next", "state"),
    ):
        with pytest.raises(RuntimeError, match="was released"):
            call()
    assert net.device == "reference"
    net.release()


@pytest.fixture(scope="module")
def fake_e5rt(tmp_path_factory):
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed, so the fake e5rt library cannot be built")
    lib = tmp_path_factory.mktemp("fake") / "libfake_e5rt.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", str(FAKE_C), "-o", str(lib)], check=True)
    return lib


ON_FAKE = """
import numpy as np, aneforge as af
net = af.compile({"next": af.input([1, 8], name="state") + 1.0})
print(net.device)
net.alias("next", "state")
v = net.input_view()
for _ in range(3):
    net.execute()
print(v.tolist()[0][:2], np.shares_memory(v, net.output_view()))
try:
    af.compile(af.input([4]).relu())
except RuntimeError as e:
    print("budget:", "ANEFORGE_MAX_PROGRAMS=1" in str(e))
del v
net.release()
print(af.compile(af.input([4]).relu()).device, af.compile(af.input([4]).relu(), device="cpu").device)
"""


def test_the_same_calls_on_the_ane_executor_against_the_fake_e5rt(fake_e5rt, tmp_path):
    env = {
        **os.environ,
        "ANEFORGE_E5RT_LIBRARY": str(fake_e5rt),
        "ANEFORGE_MAX_PROGRAMS": "1",
        "ANEFORGE_CACHE_DIR": str(tmp_path),
    }
    env.pop("ANEFORGE_DEVICE", None)
    r = subprocess.run([sys.executable, "-c", ON_FAKE], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    # The fake computes input + 1 (like the counter); aliasing shares one e5rt buffer.
    assert r.stdout.splitlines() == ["ane", "[3.0, 3.0] True", "budget: True", "ane reference"]
