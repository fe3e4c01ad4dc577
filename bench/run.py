"""Time every bankops operator x layout x dtype against its torch peer, in one process.

    python3 bench/run.py [--quick] [--out DIR] [--reps N] [--ops transpose,gemm] [--sections inference,overhead]

Four sections: "ops", each operator on its own shapes; "models", gemm as a model's Linear
layer calls it (forward x@W.t(), input grad dy@W, weight grad dy.t()@x on the layer's views)
and the layer's forward + backward against torch.nn.Linear (op "linear"), also timed eagerly;
"inference", decode's x@W.t() with 1-128 rows (and x@W of a (K, N) weight), each call
reading its weight from DRAM, also timed eagerly, beside the read limit (torch.sum over a few
GB); "overhead", each operator's eager time per call on 64 x 64 tensors. Each graph timing
also records the SM clock it ran at and the board's power (bench/clocks.py: NVML).
Writes the GPU's own results, DIR/<gpu>.json, DIR/<gpu>.md and DIR/<gpu>/<section>.png (DIR
defaults to bench/results/; bench/report.py names the files), then prints a summary. Without
a CUDA GPU it times the CPU reference instead, on small shapes, says so, and writes to
bench/cpu/ unless --out says otherwise.
"""
import argparse
import gc
import itertools
import math
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(1, ROOT)  # benchmark the working tree's bankops, not an installed copy

import torch  # noqa: E402

import bankops  # noqa: E402
import cases  # noqa: E402
from bankops.tune import capture  # noqa: E402
import report  # noqa: E402
from cases import ROTATE_BYTES, SECTIONS, sets_over  # noqa: E402
from clocks import MHZ, WATTS, SmClock  # noqa: E402

WARMUP = 3
MIN_REPS = 5
BUDGET_S = 1.0  # per timed function: keeps a slow layout from stretching the run
GRAPH_MS = 1.0  # calls per CUDA graph: enough that a replay lasts about this long
GRAPH_CALLS_MAX = 64
COPY_TRIALS = 3  # buffer pairs per copy reference
READ_BYTES = {"cuda": 4 * 2**30, "cpu": 64 * 2**20}  # torch.sum's input for the read limit
# A decode row's weight GB/s per timing: the weight's bytes over the call's time.
WEIGHT_GBPS = {"ms": "weight_GBps", "peer_ms": "peer_weight_GBps", "eager_ms": "eager_weight_GBps",
               "eager_peer_ms": "eager_peer_weight_GBps"}


def time_ms(fn, cuda, max_reps, graph=True, cycle=1, wall=False):
    """Median milliseconds of fn() and the number of repetitions it was taken over: per call in
    CUDA graph replays (graph), between CUDA events around eager calls, or (wall, and on the CPU)
    on the host's clock from a synchronized start to a synchronized end of each call. cycle: the
    graph's calls are a multiple of it (graph_ms)."""
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    sync()
    t0 = time.perf_counter()
    for _ in range(WARMUP):
        fn()
    sync()
    est = (time.perf_counter() - t0) / WARMUP
    if cuda and graph:
        return graph_ms(fn, est, max_reps, cycle)
    reps = reps_within_budget(est, max_reps)
    if cuda and not wall:
        return eager_ms(fn, reps), reps
    times = []
    for _ in range(reps):  # each starts synchronized: after the warm-up's sync or its predecessor's
        t = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times), reps


def reps_within_budget(seconds_each, max_reps):
    """Repetitions of a timed unit that fit BUDGET_S, between MIN_REPS and max_reps."""
    return max(MIN_REPS, min(max_reps, int(BUDGET_S / max(seconds_each, 1e-9))))


def eager_ms(fn, reps):
    """GPU milliseconds per call, one event pair around each eager call, no sync in between (the
    queue stays full when a call's kernel outlasts its host overhead)."""
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for start, end in events:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(start.elapsed_time(end) for start, end in events)


def graph_ms(fn, est_s, max_reps, cycle=1):
    """GPU milliseconds per call: fn captured CALLS times into one CUDA graph, one event pair per
    replay. Timing eager calls instead would time the host wherever a call's Python and launch
    overhead exceeds its kernel, and then the ratio compares two dispatchers, not two kernels.
    CALLS is a multiple of cycle, so that an fn rotating through cycle input sets ends each replay
    where the next one starts (no set twice in a row)."""
    calls = max(1, min(GRAPH_CALLS_MAX, math.ceil(GRAPH_MS * 1e-3 / max(est_s, 1e-9))))
    calls = math.ceil(calls / cycle) * cycle
    graph = capture(fn, calls)
    graph.replay()
    reps = reps_within_budget(est_s * calls, max_reps)
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for start, end in events:  # no sync in between: replays queue back to back
        start.record()
        graph.replay()
        end.record()
    torch.cuda.synchronize()
    times = [start.elapsed_time(end) / calls for start, end in events]
    del graph
    return statistics.median(times), reps


class CopyBandwidth:
    """GB/s of y.copy_(x) (bytes read + written), measured once per byte size in this run: the
    median over COPY_TRIALS fresh sets of buffer pairs, since one set's figure for inputs near
    the L2's size varies from set to set as much as the ratios it divides. The calls take a set's
    pairs in turn, as the cases take their input sets (together over ROTATE_BYTES on a GPU), so
    that the copy reads from DRAM as the kernels it is the reference of do."""

    def __init__(self, device, max_reps):
        self.device, self.max_reps, self.cache = device, max_reps, {}
        self.rotate_bytes = ROTATE_BYTES if device == "cuda" else 0

    def __call__(self, nbytes):
        if nbytes not in self.cache:
            speeds = []
            for _ in range(COPY_TRIALS):
                pairs = [(torch.randint(0, 256, (nbytes,), dtype=torch.uint8, device=self.device),
                          torch.empty(nbytes, dtype=torch.uint8, device=self.device))
                         for _ in range(sets_over(self.rotate_bytes, nbytes))]
                # Eager: captured in a CUDA graph, copy_ becomes a memcpy node, slower than the copy
                # kernel that eager calls run (and that the kernels are measured against).
                ms, _ = time_ms(rotation(lambda p: p[1].copy_(p[0]), pairs), self.device == "cuda", self.max_reps,
                                graph=False)
                speeds.append(2 * nbytes / (ms * 1e-3) / 1e9)
                del pairs
            self.cache[nbytes] = statistics.median(speeds)
        return self.cache[nbytes]


def read_limit(device, max_reps):
    """(GB/s, how) of torch.sum over READ_BYTES of float32, eager: the DRAM read limit that a
    decode row's weight GB/s is a fraction of."""
    nbytes = READ_BYTES[device]
    x = torch.randn(nbytes // 4, device=device)
    ms, reps = time_ms(lambda: torch.sum(x), device == "cuda", max_reps, graph=False)
    how = f"torch.sum over {nbytes / 1e9:.2f} GB of float32 (eager, median of {reps}) in the inference section"
    return nbytes / (ms * 1e-3) / 1e9, how


def short(exc):
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:300]


def rotation(fn, sets):
    """A call of fn on the next of the input sets, in turn (with one set, always that one)."""
    turn = itertools.cycle(sets)
    return lambda: fn(next(turn))


def add_clock(row, clock, prefix=""):
    """A timing's SM clock and board power into its row (sm_mhz, watts; the peer's with "peer_")."""
    for key, field in (("mhz", "sm_mhz"), ("watts", "watts")):
        if clock.get(key):
            row[prefix + field] = clock[key]


def run_case(case, device, max_reps, copy_bw, clock=None):
    """One row per layout; an exception is recorded in its row and the sweep goes on. Each timed
    call takes the next of case.copies input sets; the result is checked on the first. Each
    layout's row has its own timings of the peer (graph, and eager where the case has it), each
    taken right before the layout's own. With a clock (SmClock), each graph timing also gets the
    median SM clock it ran at and the board's median power (sm_mhz, watts; peer_sm_mhz,
    peer_watts)."""
    cuda = device == "cuda"
    base = {"op": case.op, "layout": None, "dtype": str(case.dtype).replace("torch.", ""), "shape": case.shape}
    if case.model_case is not None:
        base.update(case=case.model_case, linear_shape=case.linear_shape)
    if case.op == "reduce_sum":
        base["dim"] = case.dim
    base.update(ms=None, figure=None, unit=case.unit, peer=case.peer_name, peer_ms=None,
                ratio=None, ratio_to_copy=None)
    if case.eager:
        base.update(eager_ms=None, eager_peer_ms=None, eager_ratio=None)
    if case.weight_bytes:
        base.update(weight_bytes=case.weight_bytes, copies=case.copies, **dict.fromkeys(WEIGHT_GBPS.values()))
    rows = []

    def timed(fn, graph=True):
        return time_ms(rotation(fn, sets), cuda, max_reps, graph, cycle=len(sets))

    def clocked(fn):  # a graph timing, and the SM clock it ran at and the board's watts
        t0 = time.perf_counter()
        ms, reps = timed(fn)
        if not clock:
            return ms, reps, {}
        t1 = time.perf_counter()
        return ms, reps, {"mhz": clock.median_between(t0, t1), "watts": clock.median_between(t0, t1, WATTS)}

    try:
        sets = [case.make(device) for _ in range(case.copies)]
        inputs = sets[0]
        ref = case.peer(inputs)
        peer_ms, _, peer_clock = clocked(case.peer)
        copy_gbps = copy_bw(sum(t.nbytes for t in inputs)) if case.memory_bound else None
        for i, layout in enumerate(bankops.LAYOUTS):
            # The peer again right before each later layout: a slow layout before heats the GPU,
            # and its clock drops for whatever runs next.
            if i > 0 and cuda:
                peer_ms, _, peer_clock = clocked(case.peer)
            row = dict(base, layout=layout, peer_ms=peer_ms)
            add_clock(row, peer_clock, "peer_")
            rows.append(row)
            try:
                out = case.run(inputs, layout)
                row["check"] = case.check(out, ref, case.scale)
                work = case.work(inputs, out)
                del out
                ms, row["reps"], own_clock = clocked(lambda inp: case.run(inp, layout))
                row.update(ms=ms, figure=case.figure(work, ms), ratio=peer_ms / ms)
                add_clock(row, own_clock)
                if copy_gbps:
                    row.update(ratio_to_copy=row["figure"] / copy_gbps, copy_GBps=copy_gbps)
                if case.eager:  # the peer's eager timing right before this layout's, as the graph ones
                    row["eager_peer_ms"], _ = timed(case.peer, graph=False)
                    row["eager_ms"], _ = timed(lambda inp: case.run(inp, layout), graph=False)
                    row["eager_ratio"] = row["eager_peer_ms"] / row["eager_ms"]
                if case.weight_bytes:
                    row.update({gb: case.weight_bytes / (row[k] * 1e6) for k, gb in WEIGHT_GBPS.items() if row[k]})
            except Exception as e:  # noqa: BLE001  (a failing layout must not end the sweep)
                row["error"] = short(e)
            progress(row)
    except Exception as e:  # noqa: BLE001  (inputs or peer failed: every layout gets the error)
        done = {r["layout"] for r in rows}
        for layout in bankops.LAYOUTS:
            if layout not in done:
                rows.append(dict(base, layout=layout, error=short(e)))
                progress(rows[-1])
    finally:
        sets = inputs = ref = None
        gc.collect()
        if cuda:
            try:
                torch.cuda.empty_cache()  # hand the big blocks back so peak memory stays per-case
            except Exception:  # noqa: BLE001  (a broken CUDA context: later cases record their own errors)
                pass
    return rows


def back_to_back(fn, inputs, calls):
    """One timed unit of the overhead rows: calls calls of fn(*inputs), their results dropped."""
    def run():
        for _ in range(calls):
            fn(*inputs)
    return run


def run_overhead(case, device, max_reps):
    """One row: microseconds per eager call of bankops and of its torch peer on the same inputs,
    each the wall time of case.calls back-to-back calls, synchronized before the first and after
    the last, median over repetitions (after WARMUP such runs), divided by case.calls."""
    row = {"op": case.op, "case": "overhead", "layout": case.layout, "dtype": str(case.dtype).replace("torch.", ""),
           "shape": case.shape, "requires_grad": case.requires_grad, "peer": case.peer_name, "calls": case.calls,
           "us": None, "torch_us": None, "diff_us": None}
    if case.op == "reduce_sum":
        row["dim"] = case.dim
    try:
        inputs = case.make(device)
        row["check"] = cases.check_close(case.fn(*inputs), case.peer(*inputs), 64.0)
        for key, fn in (("torch_us", case.peer), ("us", case.fn)):
            ms, row["reps"] = time_ms(back_to_back(fn, inputs, case.calls), device == "cuda", max_reps, graph=False,
                                      wall=True)
            row[key] = ms * 1e3 / case.calls
        row["diff_us"] = row["us"] - row["torch_us"]
    except Exception as e:  # noqa: BLE001  (as in run_case: the sweep goes on)
        row["error"] = short(e)
    progress(row)
    return [row]


def progress(row):
    label = f"{row['op']:<10} {report.label(row):<26} {row['dtype']:<8} {row['layout']:<7}"
    if row.get("error"):
        print(f"  {label} ERROR {row['error']}", flush=True)
    elif row.get("case") == "overhead":
        print(f"  {label} {row['us']:.3g} us a call, torch {row['torch_us']:.3g} us ({row['diff_us']:+.3g})  "
              f"{row['check']}", flush=True)
    else:
        eager = f" (eager x{row['eager_ratio']:.3g})" if row.get("eager_ratio") else ""
        weight = f"  weight {row['weight_GBps']:.4g} GB/s" if row.get("weight_GBps") else ""
        print(f"  {label} {row['ms']:.4g} ms  {row['figure']:.4g} {row['unit']}{weight}  "
              f"x{row['ratio']:.3g} vs peer{eager}  {row['check']}", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a smaller, faster sweep (fewer cases and reps)")
    ap.add_argument("--out", default=None, help="where <gpu>.json, <gpu>.md and <gpu>/ go (default: bench/results/ "
                    "on a GPU, bench/cpu/ without one)")
    ap.add_argument("--reps", type=int, default=None, help="most repetitions per timing (default 20, --quick 10)")
    ap.add_argument("--ops", default=None, help="comma-separated subset of transpose,reduce_sum,gemm,linear")
    ap.add_argument("--sections", default=",".join(SECTIONS),
                    help="comma-separated subset of ops (the operator sweep), models (Linear layers' gemms and "
                         "steps), inference (decode's x @ W.t() and x @ W, weights read from DRAM) and overhead "
                         "(eager time per call on 64 x 64 tensors); default all. --sections models --ops linear: "
                         "the layer rows only")
    args = ap.parse_args(argv)
    sections = set(args.sections.split(","))
    if not sections <= set(SECTIONS):
        ap.error(f"--sections: unknown {','.join(sorted(sections - set(SECTIONS)))}; choose from {','.join(SECTIONS)}")
    max_reps = args.reps or (10 if args.quick else 20)

    cuda = torch.cuda.is_available()
    if cuda:
        device, device_name = "cuda", torch.cuda.get_device_name()
        # float32 gemm is compared as true float32 on both sides: TF32 would flatter the peer.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        todo = cases.gpu_cases()
    else:
        device, device_name = "cpu", "cpu"
        print("=" * 72)
        print("no CUDA GPU: timing the CPU reference implementation, not the kernels")
        print("=" * 72, flush=True)
        todo = cases.cpu_cases()
    todo = [c for c in todo if c.section in sections]
    out = args.out or (report.RESULTS if cuda else os.path.join(HERE, "cpu"))
    if args.quick:
        todo = [c for c in todo if c.quick]
    if args.ops:
        wanted = set(args.ops.split(","))
        todo = [c for c in todo if c.op in wanted]
    by_section = {s: [c for c in todo if c.section == s] for s in SECTIONS}
    by_section = {s: cs for s, cs in by_section.items() if cs}

    torch.manual_seed(0)
    copy_bw = CopyBandwidth(device, max_reps)
    clock = SmClock(torch.cuda.current_device()) if cuda else None
    meta = report.metadata(device_name, ROOT)
    rows = []
    t0 = time.perf_counter()
    left = len(todo)
    try:
        for i, (name, section_cases) in enumerate(by_section.items(), 1):
            print(f"\n== section {name} ({i} of {len(by_section)}): {len(section_cases)} cases; {left} cases left "
                  f"of {len(todo)}, {time.perf_counter() - t0:.0f} s so far", flush=True)
            if name == "inference":
                meta["dram_read_GBps"], meta["dram_read"] = read_limit(device, max_reps)
                print(f"  read limit {meta['dram_read_GBps']:.4g} GB/s: {meta['dram_read']}", flush=True)
            for case in section_cases:
                if name == "overhead":
                    rows += run_overhead(case, device, max_reps)
                else:
                    rows += run_case(case, device, max_reps, copy_bw, clock)
            left -= len(section_cases)
    finally:
        if clock:
            clock.close()
    elapsed = time.perf_counter() - t0
    if meta.get("dram_read_GBps"):
        for r in rows:
            if r.get("weight_GBps"):
                r["limit_fraction"] = r["weight_GBps"] / meta["dram_read_GBps"]

    if clock and clock.driver():
        meta["driver"] = clock.driver()
    for key, field in (("sm_clock_mhz", MHZ), ("board_watts", WATTS)):
        if clock and clock.summary(field):
            meta[key] = clock.summary(field)
    meta["timing"] = dict(warmup=WARMUP, min_reps=MIN_REPS, max_reps=max_reps, budget_s=BUDGET_S, graph_ms=GRAPH_MS,
                          graph_calls_max=GRAPH_CALLS_MAX)
    written = report.write_all(rows, meta, out)
    print(f"\n{len(todo)} cases in {elapsed:.0f} s; wrote " + ", ".join(os.path.relpath(p) for p in written))
    print(report.summary(rows, meta))


if __name__ == "__main__":
    main()
