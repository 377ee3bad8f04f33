"""Knowing the cost: ``estimate`` (predicted µs per call, per op, with provenance),
``project_peak`` and ``cross_compile_check``. Thin wrappers over the Rust core's cost model."""

from __future__ import annotations

import os
import platform
import warnings
from dataclasses import dataclass, field
from typing import Any

from aneforge import _core


class DispatchFloorWarning(UserWarning):
    """The program's estimated work is far below the per-call dispatch floor."""


class PrecisionWarning(UserWarning):
    """``precision_risk`` found an fp16-narrow sum in the program."""


@dataclass(frozen=True)
class Estimate:
    """Predicted µs per call (floor + Σ op µs), the per-call floor, the costed arch (None = host
    reference executor), where the constants come from, one dict per compute op (node, op, kind,
    input_shapes, output_shapes, bytes, flops, micros) and the warnings."""

    micros: float
    floor_us: float
    target: str | None
    provenance: str
    ops: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _quiet(warn: bool) -> bool:
    return not warn or bool(os.environ.get("ANEFORGE_QUIET")) or bool(os.environ.get("ANEFORGE_NO_COST_WARNINGS"))


def estimate(y_or_net: Any, target: str | None = None, warn: bool = True) -> Estimate:
    """Estimate a graph (Tensor, list or dict of Tensors) or a compiled program (anything with a
    ``program_dir``: ``Model``, ``Vision``) per call.

    ``target=None`` costs the host's reference executor with the constants stored by
    ``aneforge calibrate`` (provenance ``calibrated host``, else ``uncalibrated defaults``);
    an arch string or family name costs that ANE analytically from the reference design's
    measured anchors (``measured anchor``, ``scaled from``, ``projected from``). Warnings
    (dispatch floor, precision) are issued as ``DispatchFloorWarning`` / ``PrecisionWarning``
    unless ``warn=False`` or ``ANEFORGE_QUIET`` / ``ANEFORGE_NO_COST_WARNINGS`` is set.
    Unknown targets and graphs without compute ops raise ValueError."""
    program_dir = getattr(y_or_net, "program_dir", None)
    if isinstance(program_dir, str):
        d = _core._estimate_dir(program_dir, target)
    else:
        d = _core._estimate(y_or_net, target)
    e = Estimate(**d)
    if not _quiet(warn):
        for w in e.warnings:
            category = DispatchFloorWarning if w.startswith("dispatch floor") else PrecisionWarning
            warnings.warn(w, category, stacklevel=2)
    return e


def project_peak(arch: str) -> dict[str, Any]:
    """Projected fp16 peak of an arch (or family name): ``{arch, tflops, rel_m1, cores, ghz,
    clock_recorded}`` scaled from a 1.8 TFLOP/s M1 by cores × clock. Unknown names: ValueError."""
    return _core.project_peak(arch)


def cross_compile_check(outputs: Any, target: str) -> dict[str, Any]:
    """Check a graph for another ANE target: the static preflight for the target's family
    (``af.preflight``: ok, native/decompose/reject/oversize) plus ``compiled``: None with a
    ``compile_note`` saying the e5rt compile-only step was not run (it needs macOS, and the
    compile-only path is not implemented yet). Unknown or pre-MIL targets raise ValueError."""
    report = dict(_core.preflight(outputs, target))
    host = platform.system()
    reason = "needs macOS" if host != "Darwin" else "the e5rt compile-only path is not implemented yet"
    report["target"] = target
    report["compiled"] = None
    report["compile_note"] = f"compile step not run ({reason}); the result is the static preflight only"
    return report


@dataclass(frozen=True)
class Tuned:
    """A tuning result: the compiled ``model`` of the chosen variant, its name and compile
    ``options``, the executor measured, the accuracy budget, the measured ``table`` (one dict
    per variant: variant, lossy, estimate_us, measured_us, error, accepted, note) and whether
    it came from the cache."""

    model: Any
    chosen: str
    options: dict[str, Any]
    executor: str
    atol: float
    table: list[dict[str, Any]]
    from_cache: bool = False


def tune(
    y: Any,
    budget: int = 8,
    atol: float = 5e-3,
    min_lossy_speedup: float = 1.10,
    reps: int = 20,
    prune_factor: float = 1.5,
    **options: Any,
) -> Tuned:
    """Rank compile variants (sum_via_matmul, int8 / int4 / blockwise weights) by ``estimate``,
    measure up to ``budget`` on the executor ``options`` select with seeded inputs, accept a
    variant only within ``atol`` (max-abs error / max|baseline|; NaN or inf rejected) and a lossy
    one only if ≥ ``min_lossy_speedup`` × faster; cache the choice in ``autotune.json`` in the
    cache dir by a structural graph hash. Returns the compiled fastest accepted variant."""
    d = _core._tune(y, budget, atol, min_lossy_speedup, reps, prune_factor, **options)
    model = _core.compile(y, **{**options, **d["options"]})
    return Tuned(model=model, **d)


def tune_precision(y: Any, target_error: float, **options: Any) -> Tuned:
    """The cheapest (by estimate) of baseline, sum_via_matmul and int8+sum_via_matmul whose
    error against the fp32 reference executor is ≤ ``target_error`` on the fp16 reference
    executor; ValueError naming the best error when none meets it."""
    d = _core._tune_precision(y, target_error)
    model = _core.compile(y, **{**options, **d["options"]})
    return Tuned(model=model, from_cache=False, **d)
