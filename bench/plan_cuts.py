"""Segmented-plan overhead on the reference executor (issue 12), one thread:

- per cut: a chain of regions separated by identity gathers (``af.take`` with runtime indices
  ``arange(n)``, so every cut is region → host op → region) against the same chain of fused ops
  with the host ops removed (one program); (plan − single) / cuts = the cost of one cut,
  host kernel included;
- first call: the plan's first call after compile against the single program's first call
  (process CPU time, median over `--fresh` fresh compiles of each, alternating, so both see the
  same load; wall time under load measured the scheduler more than the call).

Process CPU time, not the calling thread's: a program of ≥ 4,096 elements runs on a pool worker
(`exec/reference/threads.rs`) while the caller waits, so the caller's own CPU time misses it.

Writes (or replaces) the "Segmented plans" section of the report.
Usage: python bench/plan_cuts.py [--out BENCHMARKS.md]
"""

import os

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ.setdefault("ANEFORGE_QUIET", "1")

import argparse  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import time  # noqa: E402
from datetime import date  # noqa: E402
from pathlib import Path  # noqa: E402

import aneforge as af  # noqa: E402
import numpy as np  # noqa: E402


def chain(n, cuts, with_host):
    x = af.input((1, n))
    ids = af.input((n,), dtype="int32")
    y = x
    for _ in range(cuts):
        y = (y * 0.5).relu() + 1.0
        if with_host:
            y = af.take(y, ids, axis=1)
    return af.compile(y * 1.0, device="reference"), x, ids


def paired_cpu_us(fa, fb, calls, rounds):
    """Median per-call process CPU time (µs) of `fa` and of `fb` over `rounds` rounds of `calls`
    calls each, alternating round by round so both see the same machine load."""
    fa(), fb()
    ts = ([], [])
    for _ in range(rounds):
        for side, f in enumerate((fa, fb)):
            t = time.process_time()
            for _ in range(calls):
                f()
            ts[side].append((time.process_time() - t) / calls)
    return float(np.median(ts[0])) * 1e6, float(np.median(ts[1])) * 1e6


def first_call_us(build, args):
    """Process CPU time of the first call of a freshly compiled net (µs)."""
    net = build()
    t = time.process_time()
    net(*args)
    return (time.process_time() - t) * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="BENCHMARKS.md")
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--fresh", type=int, default=7)
    args = ap.parse_args()
    rows = []
    for n, cuts in [(64, 8), (4096, 8), (65536, 8)]:
        xv = np.random.default_rng(0).standard_normal((1, n)).astype(np.float32)
        idv = np.arange(n, dtype=np.int32)
        plan, _, _ = chain(n, cuts, True)
        single, _, _ = chain(n, cuts, False)
        firsts = [
            (
                first_call_us(lambda n=n, cuts=cuts: chain(n, cuts, True)[0], (xv, idv)),
                first_call_us(lambda n=n, cuts=cuts: chain(n, cuts, False)[0], (xv,)),
            )
            for _ in range(args.fresh)
        ]
        first_plan = float(np.median([p for p, _ in firsts]))
        first_single = float(np.median([s for _, s in firsts]))
        calls = max(5, args.calls * 64 // n) if n > 4096 else args.calls
        t_plan, t_single = paired_cpu_us(
            lambda plan=plan, xv=xv, idv=idv: plan(xv, idv),
            lambda single=single, xv=xv: single(xv),
            calls,
            args.rounds,
        )
        rows.append((n, cuts, t_single, t_plan, (t_plan - t_single) / cuts, first_plan, first_single))
    lines = [
        "## Segmented plans",
        "",
        f"Reference executor, one thread; {platform.machine()} {platform.system()}, {date.today()}; "
        f"load average {os.getloadavg()[0]:.1f} at the end; per-call process CPU time "
        f"(`time.process_time`: the calling thread and the pool worker a program runs on), median of {args.rounds} rounds of {args.calls} calls (fewer at 65,536 "
        "elements) through the Python call, plan and single program alternating round by round "
        "(`bench/plan_cuts.py`). A chain of `cuts` blocks `relu(0.5 x) + 1` with an identity "
        "`af.take` (runtime int32 indices) after each block, against the same chain without the "
        "takes (one program); per cut = (plan − single) / cuts, the take kernel included. First "
        f"call (process CPU time): median over {args.fresh} fresh compiles of each. Goal: ≤ 5 µs per cut "
        "at 4,096 elements, first call ≤ 2×. A host stage reads its arguments in place (a "
        "reference region's value buffer, an int32 plan input) and its outputs stay in the "
        "kernel's result buffers, and a plan call enters the thread pool once (`plan/run.rs`).",
        "",
        "| elements | cuts | single program µs | plan µs | µs per cut | first call single µs "
        "| first call plan µs | plan / single |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        *[
            f"| {n} | {c} | {s:.1f} | {p:.1f} | {per:.2f} | {fs:.1f} | {fp:.1f} | {fp / fs:.2f}x |"
            for n, c, s, p, per, fp, fs in rows
        ],
        "",
    ]
    section = "\n".join(lines)
    out = Path(args.out)
    text = out.read_text() if out.exists() else ""
    old = re.compile(r"## Segmented plans\n.*?(?=\n## |\Z)", flags=re.S)
    if old.search(text):  # replaced in place
        out.write_text(old.sub(lambda _: section.rstrip("\n") + "\n", text, count=1))
    else:
        out.write_text((text.rstrip("\n") + "\n\n" if text else "") + section)
    print(section)


if __name__ == "__main__":
    main()
