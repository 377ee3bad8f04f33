"""Knowing the cost: ``estimate`` (predicted µs per call, per op, with provenance),
``project_peak`` and ``cross_compile_check``. Thin wrappers over the Rust core's cost model."""

from __future__ import annotations

import os
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
    """Predicted cost of one call; fields documented in ``aneforge/__init__.pyi``."""

    micros: float
    floor_us: float
    target: str | None
    provenance: str
    ops: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    regions: int = 1
    cut_us: float = 0.0
    ports_us: float = 0.0


def _issue(messages: list[str], stacklevel: int = 2) -> None:
    """Issue cost warnings (dispatch floor, precision) unless ANEFORGE_QUIET or
    ANEFORGE_NO_COST_WARNINGS is set (also called by ``compile``)."""
    if os.environ.get("ANEFORGE_QUIET") or os.environ.get("ANEFORGE_NO_COST_WARNINGS"):
        return
    for w in messages:
        if w.startswith("dispatch floor"):
            category: type[UserWarning] = DispatchFloorWarning
        elif w.startswith("precision"):
            category = PrecisionWarning
        else:
            category = UserWarning
        warnings.warn(w, category, stacklevel=stacklevel)


def estimate(y_or_net: Any, target: str | None = None, warn: bool = True) -> Estimate:
    """Thin wrapper over ``_core._estimate``; contract in ``aneforge/__init__.pyi``."""
    program_dir = getattr(y_or_net, "program_dir", None)
    if isinstance(program_dir, str):
        d = _core._estimate_dir(program_dir, target)
    else:
        d = _core._estimate(y_or_net, target)
    e = Estimate(**d)
    if warn:
        _issue(e.warnings, stacklevel=3)
    return e


def project_peak(arch: str) -> dict[str, Any]:
    """Thin wrapper over ``_core.project_peak``; contract in ``aneforge/__init__.pyi``."""
    return _core.project_peak(arch)


def cross_compile_check(outputs: Any, target: str) -> dict[str, Any]:
    """Thin wrapper over ``_core._cross_compile_check``; contract in ``aneforge/__init__.pyi``."""
    return _core._cross_compile_check(outputs, target)


@dataclass(frozen=True)
class Tuned:
    """A tuning result; fields documented in ``aneforge/__init__.pyi``."""

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
    """Thin wrapper over ``_core._tune``; contract in ``aneforge/__init__.pyi``."""
    d = _core._tune(y, budget, atol, min_lossy_speedup, reps, prune_factor, **options)
    model = _core.compile(y, **{**options, **d["options"]})
    return Tuned(model=model, **d)


def tune_precision(y: Any, target_error: float, **options: Any) -> Tuned:
    """Thin wrapper over ``_core._tune_precision``; contract in ``aneforge/__init__.pyi``."""
    d = _core._tune_precision(y, target_error)
    model = _core.compile(y, **{**options, **d["options"]})
    return Tuned(model=model, from_cache=False, **d)
