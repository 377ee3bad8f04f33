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

Writes (or replaces) the "Segmented plans" section of the report. `--base DIR` instead compares
this build with the aneforge package found in DIR (e.g. a copy of main's installed package):
`--pairs` fresh processes of each, alternating, medians per row; that table is printed (and
appended to `--out` only when given).
Usage: python bench/plan_cuts.py [--out BENCHMARKS.md] [--base DIR [--pairs N]]
"""

import os

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ.setdefault("ANEFORGE_QUIET", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from datetime import date  # noqa: E402
from pathlib import Path  # noqa: E402

import aneforge as af  # noqa: E402
import numpy as np  # noqa: E402
from emit import emit  # noqa: E402

SIZES = [(64, 8), (4096, 8), (65536, 8)]


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


def measure(args):
    """Rows (elements, cuts, single µs, plan µs, µs per cut, first call plan µs, first call
    single µs) of this process's aneforge."""
    rows = []
    for n, cuts in SIZES:
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
    return rows


def child_rows(args, base=None):
    """`measure` in a fresh process (`base` first on PYTHONPATH): its rows."""
    env = dict(os.environ)
    if base:
        env["PYTHONPATH"] = os.pathsep.join(p for p in [str(base), env.get("PYTHONPATH", "")] if p)
    flags = ["--child", "--calls", str(args.calls), "--rounds", str(args.rounds), "--fresh", str(args.fresh)]
    res = subprocess.run([sys.executable, __file__, *flags], env=env, capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def compare(args):
    """This build against `args.base`: `args.pairs` child runs of each, alternating; medians."""
    runs = {"this build": [], "before (base)": []}
    for _ in range(args.pairs):
        runs["this build"].append(child_rows(args))
        runs["before (base)"].append(child_rows(args, args.base))
    lines = [
        f"Plan cuts, this build vs `{args.base}` (`bench/plan_cuts.py --base`): {args.pairs} fresh processes "
        f"of each build, alternating; per row the median over them of each process's medians (process "
        f"CPU time, {args.rounds} rounds of {args.calls} calls, first call over {args.fresh} fresh "
        f"compiles); load average {os.getloadavg()[0]:.1f} at the end.",
        "",
        "| elements | cuts | build | single program µs | plan µs | µs per cut | first call single µs "
        "| first call plan µs | plan / single |",
        "| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r, (n, cuts) in enumerate(SIZES):
        for build, rows in runs.items():
            med = [float(np.median([run[r][k] for run in rows])) for k in range(2, 7)]
            s, p, per, fp, fs = med
            lines.append(
                f"| {n} | {cuts} | {build} | {s:.1f} | {p:.1f} | {per:.2f} | {fs:.1f} | {fp:.1f} | {fp / fs:.2f}x |"
            )
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--fresh", type=int, default=7)
    ap.add_argument("--base")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--child", action="store_true")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(measure(args)))
        return
    if args.base:
        emit(compare(args), args.out)
        return
    rows = measure(args)
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
    out = Path(args.out or "BENCHMARKS.md")
    text = out.read_text() if out.exists() else ""
    old = re.compile(r"## Segmented plans\n.*?(?=\n## |\Z)", flags=re.S)
    if old.search(text):  # replaced in place
        out.write_text(old.sub(lambda _: section.rstrip("\n") + "\n", text, count=1))
    else:
        out.write_text((text.rstrip("\n") + "\n\n" if text else "") + section)
    print(section)


if __name__ == "__main__":
    main()
