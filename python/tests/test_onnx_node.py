"""ONNX conformance: every backend node case of the installed `onnx` package and the model
tests it ships, through `af.load_onnx` on the reference executor against the package's
expected outputs. No wrong answers; docs/onnx-coverage.md is generated from this run."""

import collections
import os
import pathlib

import numpy as np
import pytest

pytest.importorskip("onnx")

from onnx_conformance import coverage_markdown, light_results, model_dir_results, node_results  # noqa: E402

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "onnx-coverage.md"
# Floors measured on this run (raise them as coverage grows).
MIN_NODE_PASS = 1150


@pytest.fixture(scope="module")
def results():
    nodes = node_results()
    models = light_results() + [
        r for k in ("simple", "pytorch-converted", "pytorch-operator") for r in model_dir_results(k)
    ]
    return nodes, models


def test_node_cases_give_no_wrong_answers(results):
    nodes, _ = results
    failed = [f"{r.name}: {r.reason}" for r in nodes if r.status == "fail"]
    assert not failed, f"{len(failed)} node cases fail:\n" + "\n".join(failed)


def test_node_cases_pass_count(results):
    nodes, _ = results
    count = collections.Counter(r.status for r in nodes)
    assert len(nodes) >= 1800
    assert count["pass"] >= MIN_NODE_PASS, count


def test_unsupported_cases_name_a_reason(results):
    nodes, models = results
    assert all(r.reason for r in nodes + models if r.status == "unsupported")


def test_shipped_model_tests_give_no_wrong_answers(results):
    _, models = results
    failed = {r.name: r.reason for r in models if r.status == "fail"}
    assert not failed, f"{len(failed)} model tests fail:\n" + "\n".join(f"{k}: {v}" for k, v in failed.items())


def test_all_light_zoo_models_pass(results):
    _, models = results
    light = {r.name: r for r in models if r.name.startswith("light_")}
    assert len(light) == 9 and all(r.status == "pass" for r in light.values()), light


def test_coverage_doc_is_current(results):
    text = coverage_markdown(*results)
    if os.environ.get("ANEFORGE_UPDATE_ONNX_COVERAGE") == "1":
        DOC.write_text(text)
    assert DOC.read_text() == text, "docs/onnx-coverage.md is out of date (see its header to regenerate)"


def _binary_model(op: str, elem: int, **attrs) -> bytes:
    from onnx import TensorProto, helper

    node = helper.make_node(op, ["a", "b"], ["y"], **attrs)
    vi = [helper.make_tensor_value_info(n, elem, [2, 3]) for n in ("a", "b")]
    out = TensorProto.BOOL if op in ("Less", "Equal") else elem
    graph = helper.make_graph([node], "g", vi, [helper.make_tensor_value_info("y", out, [2, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]).SerializeToString()


def _run(model_bytes: bytes, **feeds) -> np.ndarray:
    import aneforge as af

    got = af.load_onnx(model_bytes, device="reference")(**feeds)
    got = next(iter(got.values())) if isinstance(got, dict) else got
    return np.asarray(got).reshape(2, 3)


def test_runtime_int_ops_are_exact_and_wrap_like_numpy():
    from onnx import TensorProto

    rng = np.random.default_rng(7)
    a = rng.integers(-128, 128, (2, 3)).astype(np.int8)
    b = rng.integers(-128, 128, (2, 3)).astype(np.int8)
    # NumPy int8 arithmetic wraps exactly as ONNX specifies.
    np.testing.assert_array_equal(_run(_binary_model("Add", TensorProto.INT8), a=a, b=b), a + b)
    x = rng.integers(-100000, 100000, (2, 3)).astype(np.int64)
    y = rng.integers(1, 3000, (2, 3)).astype(np.int64)
    np.testing.assert_array_equal(_run(_binary_model("Mod", TensorProto.INT64), a=x, b=y), np.mod(x, y))
    np.testing.assert_array_equal(_run(_binary_model("Less", TensorProto.INT64), a=x, b=y), x < y)


def test_int64_result_beyond_int32_is_a_clear_error():
    import aneforge as af
    from onnx import TensorProto

    model = af.load_onnx(_binary_model("Mul", TensorProto.INT64), device="reference")
    big = np.full((2, 3), 65536, dtype=np.int64)
    with pytest.raises(ValueError, match="int32 cannot"):
        model(a=big, b=big)


def _reduce_sum_model() -> bytes:
    """ReduceSum (opset 18) whose axes arrive as a runtime int64 input."""
    from onnx import TensorProto, helper

    node = helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4]),
            helper.make_tensor_value_info("axes", TensorProto.INT64, [1]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]).SerializeToString()


def test_runtime_axes_need_input_values_and_bind_exactly():
    import aneforge as af

    with pytest.raises(NotImplementedError, match=r"needs its value at import: pass input_values=\{'axes'"):
        af.load_onnx(_reduce_sum_model(), device="reference")
    x = (np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 11.0) / 8.0
    model = af.load_onnx(_reduce_sum_model(), input_values={"axes": np.array([1])}, device="reference")
    assert [p[0] for p in model.inputs] == ["x"]  # a bound input is no port
    got = np.asarray(next(iter(model(x=x).values())))
    # Sums of multiples of 1/8 below 2048 are exact in fp16.
    np.testing.assert_array_equal(got.reshape(2, 4), x.astype(np.float64).sum(axis=1))


@pytest.mark.parametrize(
    ("values", "match"),
    [
        ({"nope": np.array([1])}, "'nope'.*no such input"),
        ({"axes": np.array([1, 2])}, "'axes'.*disagree"),
        ({"axes": np.array([1.5])}, "'axes'.*value 0 = 1.5"),
    ],
)
def test_bad_input_values_name_the_input(values, match):
    import aneforge as af

    with pytest.raises(ValueError, match=match):
        af.load_onnx(_reduce_sum_model(), input_values=values, device="reference")


def test_clip_bounds_stay_runtime_as_rank0_inputs():
    import aneforge as af
    from onnx import TensorProto, helper

    node = helper.make_node("Clip", ["x", "lo", "hi"], ["y"])
    vi = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
        helper.make_tensor_value_info("lo", TensorProto.FLOAT, []),
        helper.make_tensor_value_info("hi", TensorProto.FLOAT, []),
    ]
    graph = helper.make_graph([node], "g", vi, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    model_bytes = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    model = af.load_onnx(model_bytes, device="reference")
    x = np.array([[-2.0, -0.5, 0.0], [0.25, 1.0, 3.0]], dtype=np.float32)
    for lo, hi in ((-1.0, 1.0), (0.0, 0.5)):
        # Rank-0 inputs are [1] ports; the same program serves every bound pair.
        got = model(x=x, lo=np.array([lo], np.float32), hi=np.array([hi], np.float32))
        np.testing.assert_array_equal(np.asarray(next(iter(got.values()))).reshape(2, 3), np.clip(x, lo, hi))
