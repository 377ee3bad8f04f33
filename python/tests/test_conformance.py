"""Conformance corpus checks over every case of the test_conformance_*.py modules: each required
op kind has a case, each registered MIL op is printed by one, fp32 mode is tighter, the generated
unary stubs match the op tables (the metric and oracles are described in conformance_common.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import aneforge as af
import numpy as np
import pytest
import test_conformance_elementwise
import test_conformance_layout
import test_conformance_linear
import test_conformance_reduce_norm
from aneforge import _core
from conformance_common import Case, q, rel_err, run

CASES: list[Case] = [
    c
    for m in (
        test_conformance_elementwise,
        test_conformance_linear,
        test_conformance_reduce_norm,
        test_conformance_layout,
    )
    for c in m.R.cases
]

# Every op kind that must have at least one case below: every row of the core's unary op tables
# (native and composite, read through the registry) plus the builders that are not table rows.
UNARY_ROWS = _core._unary_ops()
NON_TABLE_KINDS = """
square add sub mul real_div maximum minimum pow mul_scalar add_scalar sub_scalar div_scalar
rsub_scalar rdiv_scalar greater less equal not_equal less_equal greater_equal select matmul
linear bmm conv2d max_pool avg_pool mean sum amax amin softmax layer_norm rms_norm batch_norm
group_norm l2_norm reshape transpose concat split slice_by_size squeeze expand_dims upsample
image_input where l1_norm log_sum sum_square log_sum_exp reverse tile flatten2d stack cumsum
gather crop space_to_depth depth_to_space pixel_shuffle pixel_unshuffle instance_norm
channel_layer_norm resize_nearest_neighbor resize_bilinear upsample_bilinear geglu
conv_transpose sdpa mha dynamic_conv cross_attention prelu local_response_norm lrn einsum
einsum_native affine
""".split()
REQUIRED_KINDS = [name for name, _, _ in UNARY_ROWS] + NON_TABLE_KINDS
# Registered MIL ops only printed for compressed weights (compile(..., compress=...)), which these
# cases do not set; the Rust corpus (tests/mil_golden.rs) and test_compress.py cover them.
COVERED_IN_RUST_ONLY = {
    "constexpr_affine_dequantize",
    "constexpr_blockwise_shift_scale",
    "constexpr_lut_to_dense",
    "constexpr_sparse_to_dense",
}

FP32_IDS = {
    "gelu-7x65-2",
    "matmul-783",
    "conv-3x3-pad1-bias",
    "softmax-last",
    "layer_norm-affine",
    "sum-last-keep",
    "avg_pool-excl",
    "rdiv_scalar",
}


@pytest.mark.parametrize("c", [c for c in CASES if c.id in FP32_IDS], ids=lambda c: c.id)
def test_fp32_precision_is_much_tighter(c: Case):
    # fp16-representable inputs: both modes then see the same values, only the rounding differs.
    arrays = [q(a).astype(np.float32) for a in c.arrays]
    got32, ref = run(c, "fp32", arrays)
    got16, _ = run(c, "fp16", arrays)
    for g32, g16, r in zip(got32, got16, ref):
        e32, e16 = rel_err(g32, r, c.floor), rel_err(g16, r, c.floor)
        assert e32 <= 1e-5, f"{c.id}: fp32 relative error {e32:.3g}"
        assert e32 < e16, f"{c.id}: fp32 ({e32:.3g}) is not tighter than fp16 ({e16:.3g})"


def test_fp32_ids_exist():
    assert FP32_IDS <= {c.id for c in CASES}


def test_every_required_op_kind_has_a_case():
    covered = {k for c in CASES for k in c.kinds}
    missing = [k for k in REQUIRED_KINDS if k not in covered]
    assert not missing, f"op kinds without a conformance case: {missing}"


def test_every_registered_mil_op_is_printed_by_a_case():
    printed = set()
    for c in CASES:
        ports = c.ports() if c.ports else [af.input(a.shape) for a in c.arrays]
        mil = af.compile(c.build(*ports)).mil
        statements = [line for line in mil.splitlines() if line.startswith("        ") and " = " in line]
        printed |= {line.split(" = ")[1].split("(")[0] for line in statements}
    missing = sorted(set(_core._mil_op_names()) - printed - COVERED_IN_RUST_ONLY)
    assert not missing, f"registered MIL ops no conformance case prints: {missing}"


STUBS = Path(af.__file__).with_name("__init__.pyi")
BEGIN, END = "    # BEGIN generated: unary op tables\n", "    # END generated: unary op tables\n"


def unary_stub_block() -> str:
    """The Tensor methods of the unary op tables, as the .pyi spells them."""
    out = []
    for name, doc, params in UNARY_ROWS:
        args = "".join(f", {p}: float" + (f" = {d}" if d is not None else "") for p, d in params)
        out.append(f'    def {name}(self{args}) -> Tensor:\n        """{doc}"""\n')
    return "".join(out)


def test_unary_stubs_match_the_op_tables():
    """Regenerate: ANEFORGE_UPDATE_STUBS=1 .venv/bin/python -m pytest python/tests/test_conformance.py -k stubs"""
    text = STUBS.read_text()
    head, rest = text.split(BEGIN)
    block, tail = rest.split(END)
    if os.environ.get("ANEFORGE_UPDATE_STUBS") == "1":
        block = unary_stub_block()
        STUBS.write_text(head + BEGIN + block + END + tail)
    assert block == unary_stub_block(), "python/aneforge/__init__.pyi is out of date with the op tables"


def test_unary_methods_follow_the_table_signature():
    x = af.input((2, 3))
    for name, _, params in UNARY_ROWS:
        assert callable(getattr(af.Tensor, name)), name
        required = [p for p, d in params if d is None]
        with pytest.raises(TypeError, match=name):
            getattr(x, name)(*[0.5] * (len(params) + 1))
        with pytest.raises(TypeError, match="unexpected keyword"):
            getattr(x, name)(*[0.5] * len(required), nope=1.0)
        if required:
            with pytest.raises(TypeError, match=f"missing required argument '{required[0]}'"):
                getattr(x, name)()
    with pytest.raises(TypeError, match="must be a number"):
        x.elu(alpha="big")
    with pytest.raises(TypeError, match="multiple values"):
        x.elu(1.0, alpha=2.0)
    with pytest.raises(ValueError, match="clip"):
        x.clip(2.0, 1.0)


def test_case_ids_are_unique():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))


def test_shapes_cover_awkward_extents():
    extents = {d for c in CASES for a in c.arrays for d in a.shape}
    assert {1, 7, 783} <= extents
    assert any(d % 64 for d in extents if d > 64)
