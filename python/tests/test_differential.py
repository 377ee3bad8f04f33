"""Randomized differential test (issue 16, item 6): every op family the Python API exposes, with
its parameters drawn at random (differential_families.py), against float64 NumPy oracles on
fp16-rounded inputs, at the fp16-contract tolerance (2e-3 of the largest reference magnitude
for one op, 1e-2 for composites; layout ops exact).

Seeded, so a failure reproduces: the message names the family, the draw index and every drawn
parameter. All draws of a family compile into one program (one compile per family) to keep the
whole run well under a minute.
"""

from __future__ import annotations

import aneforge as af
import numpy as np
import pytest
from conformance_common import q
from differential_families import FAMILIES

SEED = 16
DRAWS = 80
# the unary table has ~35 rows: more draws so each is hit
DRAWS_PER_FAMILY = {"unary": 240}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_family_matches_float64_oracle(family):
    rng = np.random.default_rng([SEED, sorted(FAMILIES).index(family)])
    n = DRAWS_PER_FAMILY.get(family, DRAWS)
    draws = [FAMILIES[family](rng) for _ in range(n)]
    outs, feeds = [], []
    for d in draws:
        ports = [af.input(a.shape) for a in d.arrays]
        outs.append(d.build(*ports))
        feeds.extend(d.arrays)
    got = af.compile(outs)(*feeds)
    failures = []
    for i, (d, g) in enumerate(zip(draws, got)):
        want = np.asarray(d.ref(*[q(a) for a in d.arrays]), np.float64)
        if g.shape != want.shape:
            failures.append(f"draw {i} {d.params}: shape {g.shape}, oracle {want.shape}")
        elif d.exact:
            if not np.array_equal(g, want):
                failures.append(f"draw {i} {d.params}: not exact, max|err| {np.max(np.abs(g - want)):.3g}")
        else:
            err = float(np.max(np.abs(g - want))) / max(float(np.max(np.abs(want))), d.floor)
            if not err <= d.tol:
                failures.append(f"draw {i} {d.params}: max|err|/max|ref| = {err:.3g} > {d.tol}")
    assert not failures, f"{family}: {len(failures)} of {n} draws differ:\n" + "\n".join(failures)
