"""The op census (af.capabilities) and MIL opsets (compile/export opset=...): every registered op
is listed with real check results, older opsets print their own headers, fold compressed weights
and compute what ios18 computes; handwritten foreign-dialect directories load and run."""

import json
import pathlib

import aneforge as af
import numpy as np
import pytest

FAMILIES = ["A13", "A14", "A15", "A16"]


def test_capabilities_lists_every_op_with_checked_results():
    caps = af.capabilities()
    names = [c["name"] for c in caps]
    assert len(names) == len(set(names)) and {"relu", "conv", "matmul", "constexpr_lut_to_dense", "softmax"} <= set(
        names
    )
    for c in caps:
        assert set(c["status"]) == set(FAMILIES) and set(c["status"].values()) <= {"native", "decompose", "reject"}
        assert c["reference"]["result"] == "pass", c
        assert c["hardware"] == "unverified" and c["mil"].startswith(c["name"] + "(")
        assert c["opsets"] and set(c["opsets"]) <= {"ios16", "ios17", "ios18"} and "target_status" not in c
    by = {c["name"]: c for c in caps}
    assert [by["sin"]["status"][f] for f in FAMILIES] == ["decompose", "decompose", "native", "native"]
    assert by["constexpr_blockwise_shift_scale"]["opsets"] == ["ios18"] and by["relu"]["opsets"] == [
        "ios16",
        "ios17",
        "ios18",
    ]
    assert by["conv"]["family"] == "Conv" and by["relu"]["family"] == "Unary"


def test_capabilities_for_a_target_and_bad_arguments():
    caps = af.capabilities(target="h14")
    sin = next(c for c in caps if c["name"] == "sin")
    assert sin["target_status"] == "decompose" and sin["status"]["A15"] == "native"
    with pytest.raises(ValueError, match="q7"):
        af.capabilities(target="q7")
    with pytest.raises(OSError):
        af.capabilities(report="/nonexistent/selfcheck.json")


@pytest.mark.parametrize("opset,version", [("ios16", "1.0"), ("ios17", "1.3"), ("ios18", "1.3")])
def test_compile_prints_the_opset_header_and_matches_numpy(opset, version):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((3, 5)).astype(np.float32)
    w = rng.standard_normal((5, 4)).astype(np.float32)
    net = af.compile((af.input((3, 5)) @ af.constant(w)).relu(), opset=opset, device="reference")
    assert net.mil.startswith(f"program({version})\n") and f"func main<{opset}>(" in net.mil
    xh, wh = x.astype(np.float16).astype(np.float64), w.astype(np.float16).astype(np.float64)
    want = np.maximum(xh @ wh, 0)
    got = net(x)
    assert np.max(np.abs(got - want)) <= 2e-3 * max(1.0, np.max(np.abs(want)))
    meta = json.loads((pathlib.Path(net.program_dir) / "program.json").read_text())
    assert meta["opset"] == opset
    again = af.load(net.program_dir, device="reference")
    assert again.mil == net.mil


def test_older_opsets_fold_compressed_weights_to_fp16():
    w = np.random.default_rng(3).standard_normal((64, 32)).astype(np.float32)
    x = np.random.default_rng(4).standard_normal((2, 64)).astype(np.float32)
    y = af.input((2, 64)) @ af.constant(w)
    new = af.compile(y, compress="blockwise", block_size=16, opset="ios18", device="reference")
    assert "constexpr_blockwise_shift_scale(" in new.mil
    for opset in ["ios16", "ios17"]:
        old = af.compile(y, compress="blockwise", block_size=16, opset=opset, device="reference")
        assert "constexpr_" not in old.mil and f"main<{opset}>" in old.mil
        np.testing.assert_array_equal(old(x), new(x))


def test_unknown_opset_is_a_value_error(tmp_path):
    with pytest.raises(ValueError, match="unknown opset 'ios15'"):
        af.compile(af.input((2,)).relu(), opset="ios15")
    with pytest.raises(ValueError, match="unknown opset"):
        af.export(af.input((2,)).relu(), build_dir=str(tmp_path), opset="macos14")
    d = af.export(af.input((2,)).relu(), build_dir=str(tmp_path / "p"), opset="ios17")
    assert "main<ios17>" in (pathlib.Path(d) / "model.mil").read_text()


FOREIGN = """program(1.0)
[buildInfo = dict<tensor<string, []>, tensor<string, []>>({{"coremlc-version", "1436.100.10"}})]
{
    func main<ios16>(tensor<fp16, [2, 3]> x) {
        tensor<fp16, [3]> b = const()[name = tensor<string, []>("b"), val = tensor<fp16, [3]>([0x1p-1, -0x1p+0, 0x1.8p+1])];
        tensor<fp16, [2, 3]> s = add(x = x, y = b)[name = tensor<string, []>("s")];
        tensor<int32, [1]> ax = const()[name = tensor<string, []>("ax"), val = tensor<int32, [1]>([1])];
        tensor<fp16, [2, 3]> y = softmax(x = s, axis = tensor<int32, []>(1))[name = tensor<string, []>("y")];
    } -> (y);
}
"""


def test_a_foreign_dialect_directory_runs(tmp_path):
    (tmp_path / "model.mil").write_text(
        FOREIGN.replace("\n        tensor<int32, [1]> ax", "\n        // unused\n        tensor<int32, [1]> ax")
    )
    net = af.load(str(tmp_path), device="reference")
    assert "main<ios16>" in net.mil
    x = np.array([[0.5, -1.0, 2.0], [3.0, 0.0, -0.25]], np.float32)
    s = x.astype(np.float64) + np.array([0.5, -1.0, 3.0])
    want = np.exp(s - s.max(axis=1, keepdims=True))
    want /= want.sum(axis=1, keepdims=True)
    assert np.max(np.abs(net(x) - want)) <= 2e-3


def test_malformed_foreign_text_names_line_and_column(tmp_path):
    (tmp_path / "model.mil").write_text(FOREIGN.replace('("s")];', '("s")]'))
    with pytest.raises(ValueError, match=r"model.mil: line 7, column 9: expected ';'"):
        af.load(str(tmp_path), device="reference")
