"""Cost-model accuracy (issue 17): calibrate the host model (`aneforge calibrate`, one thread),
then compare ``af.estimate(y)`` with the measured median per-call time of the reference
executor for ResNet-18 (seeded weights), a MiniLM-shaped encoder (6 layers, d 384, 12 heads,
seq 128, seeded weights) and 20 seeded random graphs, plus two segmented plans (host ops,
costed with the calibrated per-cut constant). Prints a Markdown section with each error, the
distribution over the 22 programs (|error| median, 90th percentile, share within ±25 %) and,
from the per-op profiler (CPU clock), estimated vs measured µs per executor step kind.

Each of ``--runs`` runs calibrates afresh and measures again; every run is reported.
Appends a dated subsection at the end of the "Cost model" section of the report (creating the
section when it is missing).
Usage: python bench/cost_model.py [--runs N] [--out BENCHMARKS.md]
"""

import os

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ.setdefault("ANEFORGE_QUIET", "1")

import argparse  # noqa: E402
import platform  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from datetime import UTC, datetime  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import aneforge as af  # noqa: E402
import resnet18  # noqa: E402


def measured_us(net, runs=15):
    """Median process-CPU µs per call (``time.process_time``: the machine is shared, so wall time
    counts other jobs) over ``runs`` calls after two warm-ups, on seeded N(0, 1) inputs."""
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(p[1]).astype(np.float32) for p in net.inputs]
    for _ in range(2):
        net(*xs)
    ts = []
    for _ in range(runs):
        t = time.process_time()
        net(*xs)
        ts.append(time.process_time() - t)
    return float(np.median(ts)) * 1e6


def minilm_shaped(rng, layers=6, d=384, heads=12, seq=128, ff=1536):
    def w(*shape):
        return af.constant((rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32))

    x = af.input([seq, d])
    dh = d // heads
    for _ in range(layers):
        q, k, v = ((x @ w(d, d)).reshape([seq, heads, dh]).transpose([1, 0, 2]) for _ in range(3))
        a = ((q @ k.transpose([0, 2, 1])) * (1 / np.sqrt(dh))).softmax(-1) @ v
        x = x + a.transpose([1, 0, 2]).reshape([seq, d]) @ w(d, d)
        x = x + ((x @ w(d, ff)).gelu() @ w(ff, d))
    return x


def random_graph(rng):
    """A chain of 3-10 seeded ops (matmul, conv, elementwise, layout) on a random size."""
    c, h = int(rng.choice([8, 16, 32, 64])), int(rng.choice([16, 32, 64]))
    x = af.input([1, c, h, h])
    y = x
    for _ in range(int(rng.integers(3, 11))):
        kind = rng.integers(0, 4)
        if kind == 0:
            wt = (rng.standard_normal((c, c, 3, 3)) * 0.1).astype(np.float32)
            y = af.conv(y, wt, pad=[1, 1, 1, 1])
        elif kind == 1:
            y = (
                (y.reshape([c, h * h]).transpose([1, 0]) @ af.constant(np.eye(c, dtype=np.float32)))
                .transpose([1, 0])
                .reshape([1, c, h, h])
            )
        elif kind == 2:
            y = (y * 0.5 + 0.25).relu()
        else:
            y = y.transpose([0, 1, 3, 2])
    return y


def plans():
    """Two segmented plans: a topk between regions, and a flatten kept on the host."""
    x = af.input([64, 256])
    vals, _ = af.topk(x * 2.0, 8)
    y = af.input([1, 8, 32, 32])
    return [
        ("plan: region, topk (host), region", vals + 1.0, {}),
        ("plan: region, flatten (host), region", af.flatten(y.relu()) * 2.0, {"route": "host"}),
    ]


def steps(e):
    """The estimate's ops grouped into executor steps, in the order the executor runs them: an op
    folded into a conv's output pass or into a fused elementwise run joins the step of the node
    it names, which runs at its last op's place. Returns ``(kind, µs)`` per step
    (``"conv+epilogue"`` or ``"fused elementwise"`` for a step of several ops)."""
    groups = {}
    for o in e.ops:
        groups.setdefault(o["folded_into"] if o["folded_into"] is not None else o["node"], []).append(o)
    ordered = sorted(groups.values(), key=lambda g: max(o["node"] for o in g))

    def kind(g):
        if len(g) == 1:
            return g[0]["kind"]
        return "conv+epilogue" if g[0]["kind"] == "conv" else "fused elementwise"

    return [(kind(g), sum(o["micros"] for o in g)) for g in ordered]


def per_kind(net, e, agg):
    """Add this program's estimated and profiled (process CPU time) µs per step kind to ``agg``
    (the profile's op rows pair one to one with the estimate's steps, in program order); returns
    whether they paired (a program whose rows do not is left out)."""
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(p[1]).astype(np.float32) for p in net.inputs]
    prof = net.profile(*xs, repeat=5, clock="cpu")
    rows = [r for r in prof["rows"] if r["kind"] == "op"]
    est = steps(e)
    if len(rows) != len(est):
        return False
    for (kind, us), r in zip(est, rows):
        a = agg.setdefault(kind, [0.0, 0.0, 0])
        a[0] += us
        a[1] += r["micros"]
        a[2] += 1
    return True


ROUNDS = 5
# The calibration cache dirs of the runs (removed at the end).
CACHE_DIRS = []

TITLE = "## Cost model: host estimate vs measured (reference executor, 1 thread)"


def append_subsection(path, section):
    """Insert ``section`` at the end of the report's cost-model section (before the next ``## ``
    heading), or append the section with its title when the report has none."""
    text = path.read_text() if path.exists() else ""
    if TITLE not in text:
        text = (text.rstrip("\n") + "\n\n" if text.strip() else "") + TITLE + "\n\n" + section + "\n"
    else:
        head, _, rest = text.partition(TITLE)
        nxt = rest.find("\n## ")
        body, tail = (rest, "") if nxt < 0 else (rest[: nxt + 1], rest[nxt + 1 :])
        text = head + TITLE + body.rstrip("\n") + "\n\n" + section + "\n" + ("\n" + tail if tail else "")
    path.write_text(text)


def one_run(cases, nets):
    """Calibrate into a fresh cache dir (``aneforge calibrate --clock cpu``), then return
    ``(estimated, measured)`` µs per program (measured: the fastest round), the per-step-kind
    totals, the plan rows, the provenance and the median-of-rounds measurements."""
    os.environ["ANEFORGE_CACHE_DIR"] = tempfile.mkdtemp(prefix="aneforge-cost-bench-")
    CACHE_DIRS.append(os.environ["ANEFORGE_CACHE_DIR"])
    if af._core.cli_main(["aneforge", "calibrate", "--clock", "cpu"]) != 0:
        raise SystemExit("aneforge calibrate failed")
    # ROUNDS alternating rounds over all programs; each program's time is its fastest round
    # median, the statistic calibration takes of its probes (load from other jobs only slows a
    # round: a burst hits one round, not every one); the median over the rounds is kept too.
    rounds = [[measured_us(net) for net in nets] for _ in range(ROUNDS)]
    est, kinds, paired = [], {}, 0
    for net in nets:
        e = af.estimate(net, warn=False)
        paired += per_kind(net, e, kinds)
        est.append((e.micros, len(e.ops)))
    meas = [min(r[i] for r in rounds) for i in range(len(nets))]
    meas_median = [float(np.median([r[i] for r in rounds])) for i in range(len(nets))]
    plan_rows = []
    for name, y, opts in plans():
        net = af.compile(y, device="reference", **opts)
        e = af.estimate(y, warn=False)
        m = measured_us(net)
        plan_rows.append((name, e.regions, e.cut_us, e.micros, m))
        net.release()
    return est, meas, (kinds, paired), plan_rows, e.provenance, meas_median


def summary(errors):
    """|error| median, 90th percentile, max and the count within ±25 %."""
    a = np.abs(errors)
    return (
        f"|error| median {np.median(a) * 100:.1f} %, 90th percentile {np.percentile(a, 90) * 100:.1f} %, "
        f"max {a.max() * 100:.1f} %; within ±25 %: {int((a <= 0.25).sum())}/{len(a)}"
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="BENCHMARKS.md")
    ap.add_argument("--runs", type=int, default=1, help="calibrate-and-measure runs (each reported)")
    args = ap.parse_args()
    rng = np.random.default_rng(17)
    cases = [("ResNet-18 224x224 (seeded weights)", resnet18.aneforge_graph(af, resnet18.weights()))]
    cases.append(("MiniLM-shaped encoder, seq 128", minilm_shaped(rng)))
    cases += [(f"random graph {i}", random_graph(rng)) for i in range(20)]
    nets = [af.compile(y, device="reference") for _, y in cases]
    runs = []
    for r in range(args.runs):
        runs.append(one_run(cases, nets))
        est, meas = runs[-1][0], runs[-1][1]
        print(f"run {r + 1}: {summary([e / m - 1 for (e, _), m in zip(est, meas)])}", flush=True)
    for net in nets:
        net.release()
    for d in CACHE_DIRS:
        shutil.rmtree(d, ignore_errors=True)
    load = os.getloadavg()
    head = " | ".join(f"run {i + 1} est / meas µs | error" for i in range(args.runs))
    rows = []
    for i, (name, _) in enumerate(cases):
        cells = " | ".join(
            f"{run[0][i][0]:.0f} / {run[1][i]:.0f} | {(run[0][i][0] / run[1][i] - 1) * 100:+.1f} %" for run in runs
        )
        rows.append(f"| {name} | {runs[0][0][i][1]} | {cells} |")
    summaries = [
        f"- run {i + 1}: {summary([e / m - 1 for (e, _), m in zip(run[0], run[1])])} "
        f"(against the median of the rounds instead: {summary([e / m - 1 for (e, _), m in zip(run[0], run[5])])})."
        for i, run in enumerate(runs)
    ]
    kinds, paired = runs[-1][2]
    kind_rows = [
        f"| {k} | {n} | {a:.0f} | {b:.0f} | {a / b:.2f} |"
        for k, (a, b, n) in sorted(kinds.items(), key=lambda kv: -kv[1][1])
    ]
    plan_rows = [
        f"| {name} | run {i + 1} | {reg} | {cut:.0f} | {e:.0f} | {m:.0f} | {(e / m - 1) * 100:+.1f} % |"
        for i, run in enumerate(runs)
        for name, reg, cut, e, m in run[3]
    ]
    now = datetime.now(UTC)
    lines = [
        f"### {now:%Y-%m-%d %H:%M} UTC: `python bench/cost_model.py --runs {args.runs}`",
        "",
        f"{platform.machine()} {platform.system()}, {os.cpu_count()} cores (shared with other jobs), "
        f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the end, provenance `{runs[-1][4]}`. "
        "Each run calibrates afresh (`aneforge calibrate --clock cpu`, 1 thread), then compares "
        f"`af.estimate(net)` with the fastest of {ROUNDS} alternating rounds, each the median of 15 calls "
        "`net(x)` after 2 warm-ups, both in process CPU time (other jobs inflate wall time; with one thread "
        "CPU time is the call's time on an idle machine). Calibration: every probe program is compiled "
        "twice and timed in 6 rounds that run round-robin over all probes once all are compiled (so a "
        "probe's rounds spread over the whole calibration; rounds alternate between the two copies); "
        "each constant comes from the fastest round. The host model: per kind a rate curve by size from "
        "per-op probes (1 vs 1 + n identical ops, so the call floor and port conversion cancel): copies "
        "by bytes, permutes, reductions by elements (softmax on its own curve, probed on pseudo-random "
        "rows), gemm by min(K, N) (each probe op its own weight), conv at the lower of its rate by "
        "channels and by flops; elementwise ops "
        "by form (binary, unary, scalar, broadcast) as their own steps (probed between broadcast adds) "
        "and inside a fused elementwise run (the executor runs consecutive elementwise steps of one size "
        "as one step: its first op costs its own-step rate, later ops their form's in-run rate); ops "
        "folded into a conv's output pass at a probed epilogue rate; plus the floor, a port-conversion "
        "curve by element count and, for plans, a per-cut constant.",
        "",
        f"| Program | ops | {head} |",
        "| --- | --- |" + " --- | --- |" * args.runs,
        *rows,
        "",
        *summaries,
        "",
        f'Per step kind, run {args.runs} (the per-op profiler, `clock="cpu"`, mean of 5 profiled calls, '
        "against the estimate's µs per executor step; a fused conv or elementwise step is one row; the "
        f"per-call floor is in no row; the estimate's steps paired with the profile's rows in {paired}/"
        f"{len(cases)} programs):",
        "",
        "| step kind | steps | estimated µs | profiled µs | ratio |",
        "| --- | --- | --- | --- | --- |",
        *kind_rows,
        "",
        "Segmented plans (one floor per region plus the calibrated per-cut constant and the crossing bytes):",
        "",
        "| Plan | run | regions | cut µs | estimated µs | measured µs | error |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        *plan_rows,
    ]
    section = "\n".join(lines)
    append_subsection(Path(args.out), section)
    print(section)


if __name__ == "__main__":
    main()
