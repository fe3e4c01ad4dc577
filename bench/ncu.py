"""Bank conflicts, predicted and measured: every operator x layout x dtype once under Nsight
Compute, beside bankops.explain's prediction and the layout's runtime.

    python3 bench/ncu.py [--out DIR] [--quick] [--ops transpose,reduce_sum,gemm]

Per case, the bank model's prediction (bankops.explain: wavefronts per shared-memory
load and store instruction, per launch) is put beside what ncu measures for the same
launches (`l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{ld,st}.sum` over
`smsp__sass_inst_executed_op_shared_{ld,st}.sum`), with the layout's median runtime (CUDA
events, outside the profiler). Writes DIR/ncu.json and the table into DIR/RESULTS.md.
Needs a CUDA GPU and ncu (PATH or /usr/local/cuda/bin).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(1, ROOT)

import torch  # noqa: E402

import bankops  # noqa: E402
import report  # noqa: E402
from bankops.explain import explain  # noqa: E402

METRICS = {
    "ld_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "st_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "ld_conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "st_conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "ld_instructions": "smsp__sass_inst_executed_op_shared_ld.sum",
    "st_instructions": "smsp__sass_inst_executed_op_shared_st.sum",
    # The same wavefronts counted by SASS instrumentation from each instruction's lane
    # addresses alone, without the cycles a data bank spends on other L1 traffic.
    "ld_sass_wavefronts": "smsp__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "st_sass_wavefronts": "smsp__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
}
TOLERANCE = 0.10  # predicted vs measured wavefronts per instruction


def cases(quick=False, ops=None):
    """(op, dtype, shape kwargs for explain) for every kind of launch the operators make; sizes
    are whole tiles so that every instruction runs with full warps. ``ops``: only these."""
    f32, f16, bf16 = torch.float32, torch.float16, torch.bfloat16
    out = []
    for dt in (f32,) if quick else (torch.int8, f16, bf16, f32, torch.float64, torch.complex128):
        out.append(("transpose", dt, dict(shape=(4096, 4096))))
    for dt in (f32,) if quick else (f16, bf16, f32, torch.float64, torch.int32):
        out.append(("reduce_sum", dt, dict(shape=(1 << 24,))))
    for dt in (f32,) if quick else (f16, f32):
        out.append(("reduce_sum", dt, dict(shape=(8192, 1024), dim=-1)))
        out.append(("reduce_sum", dt, dict(shape=(1024, 8192), dim=0)))
        out.append(("reduce_sum", dt, dict(shape=(64, 512, 256), dim=1)))
    for dt in (f32,) if quick else (f16, bf16, f32, torch.float64):
        out.append(("gemm", dt, dict(m=1024, n=1024, k=1024)))
    return [c for c in out if ops is None or c[0] in ops]


def inputs(op, dtype, kw):
    if op == "gemm":
        return [torch.randn(kw["m"], kw["k"], device="cuda").to(dtype), torch.randn(kw["k"], kw["n"], device="cuda").to(dtype)]
    if dtype.is_floating_point or dtype.is_complex:
        return [torch.randn(kw["shape"], device="cuda").to(dtype)]
    return [torch.randint(-100, 100, kw["shape"], device="cuda").to(dtype)]


def call(op, layout, kw, xs):
    if op == "gemm":
        return bankops.gemm(*xs, layout=layout)
    if op == "reduce_sum":
        return bankops.reduce_sum(xs[0], kw.get("dim"), layout=layout)
    return bankops.transpose(xs[0], layout=layout)


def each_launch(quick, ops):
    for op, dtype, kw in cases(quick, ops):
        for layout in bankops.LAYOUTS:
            yield op, dtype, kw, layout


def worker(quick, ops):
    """Runs under ncu: each case once, in order (ncu profiles only bankops' kernels)."""
    torch.manual_seed(0)
    for op, dtype, kw, layout in each_launch(quick, ops):
        xs = inputs(op, dtype, kw)
        call(op, layout, kw, xs)
        torch.cuda.synchronize()


def median_ms(fn, reps=20):
    for _ in range(3):
        fn()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for start, end in events:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in events)


def profile(quick, ops, out_dir):
    """Runs the worker under ncu; returns one dict of metric values per profiled launch, in order."""
    ncu = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
    log = os.path.join(out_dir, "ncu_raw.csv")
    cmd = [ncu, "--clock-control", "none", "--csv", "--log-file", log, "--kernel-name-base", "demangled",
           "--kernel-name", "regex:bankops::", "--metrics", ",".join(METRICS.values()),
           sys.executable, os.path.abspath(__file__), "--worker"] + (["--quick"] if quick else []) + (
               ["--ops", ",".join(ops)] if ops else [])
    subprocess.run(cmd, check=True)
    import csv

    launches, names = {}, {}
    with open(log) as f:
        lines = [line for line in f if line.startswith('"')]  # ncu's own messages start otherwise
    for row in csv.DictReader(lines):
        launch = int(row["ID"])
        names[launch] = row["Kernel Name"]
        try:
            value = float(row["Metric Value"].replace(",", ""))
        except ValueError:  # "n/a": the metric does not apply to this launch
            value = 0.0
        launches.setdefault(launch, {})[row["Metric Name"]] = value
    by_name = {v: k for k, v in METRICS.items()}
    return [dict({by_name[m]: v for m, v in launches[i].items() if m in by_name}, kernel=names[i]) for i in sorted(launches)]


def per_instr(wavefronts, instructions):
    return wavefronts / instructions if instructions else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=HERE, help="where ncu.json and RESULTS.md are (default: bench/)")
    ap.add_argument("--quick", action="store_true", help="float32 only")
    ap.add_argument("--ops", type=lambda v: v.split(","), help="comma-separated operators (default: all)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args.quick, args.ops)
    if not torch.cuda.is_available():
        sys.exit("bench/ncu.py: needs a CUDA GPU (and Nsight Compute)")
    os.makedirs(args.out, exist_ok=True)

    torch.manual_seed(0)
    plan = []
    for op, dtype, kw, layout in each_launch(args.quick, args.ops):
        rep = explain(op, layout, dtype, **kw)
        xs = inputs(op, dtype, kw)
        ms = median_ms(lambda: call(op, layout, kw, xs))
        plan.append((op, dtype, kw, layout, rep, ms, len({r["kernel"] for r in rep.rows})))
        del xs
    measured = profile(args.quick, args.ops, args.out)
    expected = sum(p[-1] for p in plan)
    if len(measured) != expected:
        sys.exit(f"bench/ncu.py: ncu profiled {len(measured)} launches, the traces describe {expected}")

    rows, i = [], 0
    for op, dtype, kw, layout, rep, ms, n_launches in plan:
        got = measured[i : i + n_launches]
        i += n_launches
        total = {k: sum(g[k] for g in got) for k in METRICS}
        row = dict(op=op, dtype=str(dtype).replace("torch.", ""), layout=layout, ms=ms,
                   problem=rep.problem, shape={k: list(v) if isinstance(v, tuple) else v for k, v in kw.items()},
                   kernels=[g["kernel"].split("(")[0] for g in got], measured=total)
        for kind in ("ld", "st"):
            t = rep.totals[kind]
            pred = per_instr(t["wavefronts"], t["instructions"])
            meas = per_instr(total[f"{kind}_wavefronts"], total[f"{kind}_instructions"])
            row[f"{kind}_predicted"], row[f"{kind}_measured"] = pred, meas
            row[f"{kind}_instructions_predicted"] = t["instructions"]
            row[f"{kind}_instructions_measured"] = total[f"{kind}_instructions"]
            row[f"{kind}_agrees"] = (pred is None and meas is None) or (
                pred is not None and meas is not None and abs(pred - meas) <= TOLERANCE * meas)
        rows.append(row)
    meta = report.metadata(torch.cuda.get_device_name(), ROOT)
    with open(os.path.join(args.out, "ncu.json"), "w") as f:
        json.dump(dict(meta, tolerance=TOLERANCE, metrics=METRICS, results=rows), f, indent=1)
        f.write("\n")
    report.splice_ncu(args.out)
    print(report.ncu_markdown(dict(meta, tolerance=TOLERANCE, results=rows)))
    bad = [r for r in rows if not (r["ld_agrees"] and r["st_agrees"])]
    print(f"{len(rows) - len(bad)} of {len(rows)} cases: prediction within {TOLERANCE:.0%} of ncu")


if __name__ == "__main__":
    main()
