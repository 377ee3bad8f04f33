"""Host-op kernels against NumPy at one thread: topk, sort, gather (`take`).

Times the Rust kernels the host stages run (through private `aneforge._core._kernel_*` entry
points on float32 arrays of fp16 values, so conversion to and from NumPy is included) against
NumPy on the same arrays (thread CPU time, medians), after checking the results agree. Sizes [1, 50257] (a GPT-2 vocabulary
row), [64, 4096] and [4096, 384]; the goal is each kernel within 1.5x of NumPy.

- topk (k = 50 for the vocabulary row, 32 otherwise), values and indices best first:
  NumPy `argpartition` + `take_along_axis` + stable `argsort` of the k survivors.
- sort: the values-only kernel against `np.sort`; the full kernel (sorted values and the stable
  permutation, what the plan's `sort` stage runs) against `np.sort` and stable `np.argsort`.
- gather along the last axis with n random int32 indices: NumPy `np.take(x, idx, axis=1)`.

Usage: python bench/host_ops.py [--out BENCHMARKS.md] [--repeat 15]
"""

import os

for var in ("RAYON_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")
os.environ.setdefault("ANEFORGE_QUIET", "1")

import argparse  # noqa: E402
import datetime  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import time  # noqa: E402
from functools import partial  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from aneforge import _core  # noqa: E402

SIZES = [((1, 50257), 50), ((64, 4096), 32), ((4096, 384), 32)]
GOAL = 1.5


def np_topk(x, k):
    """k largest per row, best first, ties by lower index (NumPy)."""
    part = np.argpartition(-x, k - 1, axis=-1)[:, :k]
    vals = np.take_along_axis(x, part, -1)
    order = np.lexsort((part, -vals), axis=-1)
    return np.take_along_axis(vals, order, -1), np.take_along_axis(part, order, -1)


def batch_size(fn, min_s=0.02):
    """Calls per timed batch so that one batch lasts about `min_s` seconds."""
    fn()
    t0 = time.perf_counter()
    fn()
    return max(1, int(min_s / max(time.perf_counter() - t0, 1e-9)))


def paired_times(ours, theirs, repeat):
    """Median per-call thread CPU time (seconds) of each function over `repeat` batches,
    alternating batch by batch so both see the same machine load."""
    n_a, n_b = batch_size(ours), batch_size(theirs)
    times = ([], [])
    for _ in range(repeat):
        for side, (fn, n) in enumerate(((ours, n_a), (theirs, n_b))):
            t0 = time.thread_time()
            for _ in range(n):
                fn()
            times[side].append((time.thread_time() - t0) / n)
    return float(np.median(times[0])), float(np.median(times[1]))


def run(repeat):
    """Rows (kernel, shape, ours µs, numpy µs) after checking agreement."""
    rng = np.random.default_rng(0)
    rows = []
    for shape, k in SIZES:
        x = rng.standard_normal(shape).astype(np.float16).astype(np.float32)
        idx = rng.integers(0, shape[1], size=shape[1]).astype(np.int32)
        v, i = _core._kernel_topk(x, k, True)
        ni = np.argsort(-x, axis=-1, kind="stable")[:, :k]  # ties by lower index, like ours
        assert np.array_equal(i, ni) and np.array_equal(v, np.take_along_axis(x, ni, -1)), f"topk {shape}"
        assert np.array_equal(v, np_topk(x, k)[0]), f"topk values {shape} disagree with argpartition"
        v, i = _core._kernel_sort(x, False)
        assert np.array_equal(v, np.sort(x, axis=-1)), f"sort {shape} disagrees"
        assert np.array_equal(i, np.argsort(x, axis=-1, kind="stable")), f"argsort {shape} disagrees"
        assert np.array_equal(_core._kernel_sort_values(x, False), np.sort(x, axis=-1)), f"sort values {shape}"
        assert np.array_equal(_core._kernel_take(x, idx), np.take(x, idx, axis=1)), f"take {shape}"
        cases = [
            (f"topk k={k}", partial(_core._kernel_topk, x, k, True), partial(np_topk, x, k)),
            ("sort (values)", partial(_core._kernel_sort_values, x, False), partial(np.sort, x, axis=-1)),
            ("sort + permutation vs np.sort", partial(_core._kernel_sort, x, False), partial(np.sort, x, axis=-1)),
            (
                "sort + permutation vs np.argsort (stable)",
                partial(_core._kernel_sort, x, False),
                partial(np.argsort, x, axis=-1, kind="stable"),
            ),
            ("gather", partial(_core._kernel_take, x, idx), partial(np.take, x, idx, axis=1)),
        ]
        for name, ours, theirs in cases:
            a, b = paired_times(ours, theirs, repeat)
            rows.append((name, shape, a * 1e6, b * 1e6))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="BENCHMARKS.md")
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    rows = run(args.repeat)
    lines = [
        "## Host-op kernels",
        "",
        f"Measured by `bench/host_ops.py` on {datetime.date.today()} ({platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} logical cores, load average {os.getloadavg()[0]:.1f} at the start, numpy {np.__version__}), one thread; "
        f"per-call thread CPU time (`time.thread_time`), median over {args.repeat} batches alternating with NumPy's in the same "
        "process, NumPy conversion included on our side. Results checked equal to NumPy's "
        "before timing (topk values and indices against a stable argsort, sort values and stable argsort, take). "
        "NumPy topk = argpartition + take_along_axis + sort of the k survivors; ours bounds the k-th key of a "
        "long lane by an evenly spaced sample of 1024 keys and selects among the keys within the bound. `sort (values)` is the "
        "values-only kernel (`Select::sort_values`: fp16 keys formed and mapped back in one AVX2+F16C pass each "
        "(`ops/host_radix.rs`), sorted 16 rows at once by a bitonic network on columns for 16 or more rows of "
        "17..512 (`ops/host_sort_columns.rs`), else by an AVX2 bitonic network up to 256 per lane, "
        "else a 16-bit LSD radix sort; bit-identical to the values of the full sort), which a plan's `sort` stage runs "
        "(`sort_values`) when nothing reads the permutation; `sort + permutation` rows are the full kernel, against "
        "`np.sort` and against NumPy's stable `argsort` (which also returns only one array). `gather` is an AVX2 "
        "gather per row (`ops/host_take.rs`). Kernels: `ops/host_select.rs`, `ops/host_radix.rs`, `ops/host_sort_columns.rs`, `ops/host_sort_network.rs`, "
        "`ops/host_take.rs`.",
        "",
        "| kernel | shape | aneforge µs | NumPy µs | ratio | goal ≤ 1.5x |",
        "| --- | --- | ---: | ---: | ---: | --- |",
        *[
            f"| {n} | {list(s)} | {a:.1f} | {b:.1f} | {a / b:.2f}x | {'met' if a / b <= GOAL else 'NOT met'} |"
            for n, s, a, b in rows
        ],
        "",
    ]
    section = "\n".join(lines)
    out = Path(args.out)
    text = out.read_text() if out.exists() else ""
    old = re.compile(r"## Host-op kernels\n.*?(?=\n## |\Z)", flags=re.S)
    if old.search(text):  # replaced in place
        out.write_text(old.sub(lambda _: section.rstrip("\n") + "\n", text, count=1))
    else:
        out.write_text((text.rstrip("\n") + "\n\n" if text else "") + section)
    print(section)


if __name__ == "__main__":
    main()
