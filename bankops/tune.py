"""The tuner: times every legal plan of gemm calls on this GPU and writes the table of the
fastest, which the router then takes before its own model for calls near those shapes.

    python -m bankops.tune [--shapes 4096x4096x4096,64x4096x4096t ...] [--dtypes bfloat16,float16] [--out FILE]
    python -m bankops.tune --update --out FILE --shapes ...   those calls timed again into FILE, its others kept
    python -m bankops.tune --report FILE     a table's calls as markdown: the model's plan, the table's
    python -m bankops.tune --calls FILE      the calls a program recorded (below), each in its own dtype and layout

A program's own calls: ``with bankops.tune.record() as calls:`` around a model's steps (forward
and backward) collects every gemm and linear call made meanwhile, on any thread, as the router
keys it; ``bankops.tune(calls)`` times exactly those, or ``bankops.tune.write_calls(calls, FILE)``
keeps them for ``--calls FILE``.

A table is a JSON file keyed by the GPU's name and SM count (the driver it was timed under is
recorded beside them): ``bankops/tuning/<gpu>.json`` for the tables that ship with the package,
``$BANKOPS_TUNING_DIR`` (else ``~/.cache/bankops/tuning``) for a user's own, which layer over the
shipped table of the same GPU (theirs first: the shipped entries serve the calls they did not
time). ``import bankops`` registers every table it finds (no GPU is touched to do so); a GPU with
no table takes the model's plans. For a call, the router looks up the entry of the same dtype,
layout and operand majors nearest its batch, m, n and k (within a factor of two on one dim:
kernels/gemm/tuning.h) and takes that entry's plan where the call has it among its legal plans; the
same table gives a call the same plan, and so the same bits. ``bankops.gemm_route(a, b).chosen_by``
says whether the table, the model or an option chose.
"""
import argparse
import collections
import contextlib
import datetime
import itertools
import json
import math
import os
import statistics
import subprocess
import sys
import types

import torch

from ._tuning import (DTYPE_CODES, FORMAT, LAYOUT_CODES, call_key, layered, load, register, slug,  # noqa: F401  (load, for users)
                      unregister, user_dir)

MARGIN = 0.02  # how much sooner than the model's plan another must end to take its place
L2_BYTES = 60 * 2**20  # an H100's or H200's L2 and a little more: timed inputs rotate past it

DECODE_WEIGHTS = ((4096, 4096), (4096, 14336), (14336, 4096))  # (K, N) of the decode rows' weights

# The calls the tuner times by default, "MxNxK" with "t" after a dim whose operand is a transposed
# view (x @ W.t(): "4096x4096x4096t" has B = W.t()): the bench's 16-bit squares and mid-size grids,
# a Linear layer's three products for the bench's model shapes, and decode rows (x @ W.t() and x @ W).
MODEL_SHAPES = [(8192, 4096, 4096), (8192, 4096, 14336), (8192, 14336, 4096), (4096, 1024, 4096),
                (2048, 2048, 2048), (16384, 768, 3072), (1024, 4096, 4096), (1536, 1536, 1536)]
DEFAULT_SHAPES = (
    [f"{s}x{s}x{s}" for s in (1024, 1536, 2048, 3072, 4096, 8192)]
    + ["2048x2304x2048", "1152x4096x1024", "8192x8192x1024", "1024x8192x8192"]
    + [shape for m, k, n in MODEL_SHAPES for shape in (f"{m}x{n}x{k}t", f"{m}x{k}x{n}", f"t{n}x{k}x{m}")]
    + [f"{m}x{n}x{k}t" for m in (1, 4, 8, 16, 32, 64, 128) for k, n in DECODE_WEIGHTS]
    + [f"{m}x{n}x{k}" for m in (1, 4, 8, 16, 32, 64) for k, n in DECODE_WEIGHTS]
)


Shape = collections.namedtuple("Shape", "batch m n k a_t b_t")


def parse_shape(text):
    """'MxNxK' (or 'BxMxNxK', a batch of B products) with 't' after it where B is a transposed view
    (x @ W.t()) and 't' before it where A is (a weight gradient's dy.t()) -> Shape."""
    a_t = text.startswith("t")
    body = text[1:] if a_t else text
    b_t = body.endswith("t")
    body = body[:-1] if b_t else body
    try:
        dims = [int(v) for v in body.split("x")]
    except ValueError:
        dims = []
    if len(dims) not in (3, 4):
        raise ValueError(f"bankops.tune: expected a shape as MxNxK or BxMxNxK (optionally 't' before it or after it), "
                         f"got {text!r}")
    if min(dims) < 1:
        raise ValueError(f"bankops.tune: expected dims >= 1, got {text!r}")
    return Shape(*([1] + dims)[-4:], a_t, b_t)


def shape_text(batch, m, n, k, a_t, b_t):
    """parse_shape's inverse: "MxNxK" with the batch first past 1 and the 't' marks."""
    return ("t" if a_t else "") + (f"{batch}x" if batch > 1 else "") + f"{m}x{n}x{k}" + ("t" if b_t else "")


def operands(m, n, k, a_t, b_t, dtype, batch=1):
    """Random a (m, k) and b (k, n) (a batch of them past 1), each a transposed view of row-major
    storage where asked."""
    lead = (batch,) if batch > 1 else ()
    def rand(rows, cols, t):
        return torch.randn(*lead, cols, rows, device="cuda", dtype=dtype).transpose(-1, -2) if t else \
            torch.randn(*lead, rows, cols, device="cuda", dtype=dtype)
    return rand(m, k, a_t), rand(k, n, b_t)


# A recorded call: its shape as parse_shape reads it, dtype and layout names, and how often it ran.
Call = collections.namedtuple("Call", "shape dtype layout count")


@contextlib.contextmanager
def record():
    """Collects the gemm and linear calls made inside the block, every thread's (autograd's
    backward too), as the router keys them (dtype, layout, operand majors, batch, m, n, k): the
    list it gives is filled when the block ends, a Call for each distinct call in the order first
    made. Records do not nest."""
    calls = []
    torch.ops.bankops._gemm_record(1)
    try:
        yield calls
    finally:
        flat = torch.ops.bankops._gemm_record(0)
        dtypes = {v: k for k, v in DTYPE_CODES.items()}
        layouts = {v: k for k, v in LAYOUT_CODES.items()}
        for i in range(0, len(flat), 9):
            dtype, layout, a_km, b_kn, batch, m, n, k, count = flat[i:i + 9]
            # The tuner's operands take those majors: A m-contiguous as a transposed view, B k-contiguous likewise.
            calls.append(Call(shape_text(batch, m, n, k, bool(a_km), not b_kn), dtypes[dtype], layouts[layout], count))


def write_calls(calls, path):
    """Recorded calls to a JSON file, for python -m bankops.tune --calls."""
    with open(path, "w") as f:
        json.dump([c._asdict() for c in calls], f, indent=1)


def read_calls(path):
    """write_calls' file as Calls, each checked (shape, dtype, layout)."""
    with open(path) as f:
        items = json.load(f)
    try:
        calls = [Call(str(c["shape"]), str(c["dtype"]), str(c["layout"]), int(c.get("count", 1))) for c in items]
    except (TypeError, KeyError, ValueError) as e:
        raise ValueError(f"bankops.tune: {path} does not hold recorded calls (write_calls' format): {e}") from None
    for c in calls:
        parse_shape(c.shape)
        if c.dtype not in DTYPE_CODES or c.layout not in LAYOUT_CODES:
            raise ValueError(f"bankops.tune: {path}: call {c.shape} has dtype {c.dtype!r} and layout {c.layout!r}; "
                             f"expected one of {', '.join(DTYPE_CODES)} and of {', '.join(LAYOUT_CODES)}")
    return calls


def majors(a, b):
    """The operands' tile orientations as the router reads them (kernels/gemm/operands.h: a tile's
    columns follow the contiguous dim, or the faster of two strided ones)."""
    def cols_fast(s_col, s_row):
        return s_col == 1 or (s_row != 1 and s_col <= s_row)
    return cols_fast(a.stride(-2), a.stride(-1)), cols_fast(b.stride(-1), b.stride(-2))


def answer(a, b):
    """a @ b in float64 and the bound a plan's result must fall within: eps(dtype) times |a| @ |b|
    elementwise, plus float32 accumulation over k (agrees() takes both)."""
    size = a.abs().double() @ b.abs().double()
    eps = torch.finfo(a.dtype).eps + 4 * a.shape[-1] * torch.finfo(torch.float32).eps
    return a.double() @ b.double(), eps * size + 1e-30


def agrees(out, ref, bound):
    """Whether a plan's result is within bound of ref everywhere: a NaN or an unwritten element fails."""
    return bool(((out.double() - ref).abs() <= bound).all())


def capture(fn, calls):
    """fn captured `calls` times into one CUDA graph, after a call on a side stream (capture needs
    warmed-up libraries: cuBLAS's workspaces). bench/run.py times its cases through it too."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    return graph


def time_us(fn, reps, cycle=1):
    """Microseconds a call, as the bench takes them: the median over reps back-to-back replays of
    a CUDA graph of enough calls to last about a millisecond, a multiple of cycle (fn rotates
    through cycle input sets itself)."""
    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    calls = math.ceil(max(1, min(64, math.ceil(1.0 / max(start.elapsed_time(end), 1e-3)))) / cycle) * cycle
    graph = capture(fn, calls)
    graph.replay()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for a, b in events:
        a.record()
        graph.replay()
        b.record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) * 1e3 / calls for a, b in events)


def driver_version():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30)
        return out.stdout.split()[0] if out.returncode == 0 and out.stdout.split() else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def write(table, path):
    """The table to path, whole or not at all (a file beside it, then renamed)."""
    with open(path + ".tmp", "w") as f:
        json.dump(table, f, indent=1)
    os.replace(path + ".tmp", path)


def merged(old, new):
    """Table `old` with the calls `new` timed replaced by new's entries (the others kept, in their
    order, then new's); the header is new's. Tables of another GPU, driver or torch do not mix:
    their times are not comparable."""
    for field in ("format", "gpu", "sms", "cc", "driver", "torch"):
        if old.get(field) != new.get(field):
            raise ValueError(f"bankops.tune: cannot update a table of {field} {old.get(field)!r} with calls timed "
                             f"under {new.get(field)!r}; time all of its calls again instead")
    timed = {call_key(e) for e in new["entries"]}
    return {**new, "entries": [e for e in old["entries"] if call_key(e) not in timed] + new["entries"]}


def to_time(shapes, dtypes, layouts):
    """The (Shape, dtype, layout) calls tune() times: each recorded Call in its own dtype and layout,
    each shape string in every one of dtypes and layouts (each checked)."""
    for name, given, known in (("dtype", dtypes, DTYPE_CODES), ("layout", layouts, LAYOUT_CODES)):
        for v in given:
            if v not in known:
                raise ValueError(f"bankops.tune: unknown {name} {v!r}; expected one of {', '.join(known)}")
    todo = []
    for s in shapes:
        if isinstance(s, Call):
            todo.append((parse_shape(s.shape), s.dtype, s.layout))
        else:
            todo += [(parse_shape(s), dt, layout) for dt in dtypes for layout in layouts]
    return todo


def tune(shapes=None, dtypes=("bfloat16", "float16"), layouts=("swizzle",), out=None, reps=10, log=print,
         update=False):
    """Times every legal plan of each call on the current GPU (shapes: "MxNxK" strings as
    DEFAULT_SHAPES spells them, each in every dtype and layout given, or the Calls record() gave,
    each in its own), writes the table of the fastest to `out` (default: the user's
    tuning directory, <gpu>.json), registers it and returns it. With update, the table at `out`
    keeps its entries for the calls not timed now (merged)."""
    import bankops  # noqa: PLC0415  (bankops imports this module)

    todo = to_time(shapes or DEFAULT_SHAPES, dtypes, layouts)
    if not torch.cuda.is_available():
        raise RuntimeError("bankops.tune: needs a CUDA GPU (it times the plans on the GPU at hand)")
    name, props = torch.cuda.get_device_name(), torch.cuda.get_device_properties(torch.cuda.current_device())
    table = {"format": FORMAT, "gpu": name, "sms": props.multi_processor_count, "cc": 10 * props.major + props.minor,
             "driver": driver_version(), "torch": torch.__version__,
             "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"), "entries": []}
    unregister(name, table["sms"])  # time the model's choice, not an earlier table's
    out = out or os.path.join(user_dir(), slug(name) + ".json")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    old = None
    if update and os.path.exists(out):
        with open(out) as f:
            old = json.load(f)
        merged(old, table)  # refuses another GPU's, driver's or torch's table before anything is timed
    for i, ((batch, m, n, k, a_t, b_t), dt, layout) in enumerate(todo):
        dtype = getattr(torch, dt)
        copies = max(1, math.ceil(2 * L2_BYTES / (batch * (m * k + k * n) * dtype.itemsize)))  # reads past the L2
        sets = [operands(m, n, k, a_t, b_t, dtype, batch) for _ in range(copies)]
        turn = itertools.count()
        a, b = sets[0]
        route = bankops.gemm_route(a, b, layout)
        check = operands(m, n, k, a_t, b_t, dtype, batch)  # fresh: an unwritten output cannot hold its answer
        ref, bound = answer(*check)
        timed, wrong = [], []
        for c in route.candidates:
            with bankops.options(plan=c.key):
                if not agrees(bankops.gemm(*check, layout), ref, bound):
                    wrong.append(str(c.route))
                    continue
                us = time_us(lambda: bankops.gemm(*sets[next(turn) % len(sets)], layout), reps, len(sets))
            timed.append((us, c))
        if wrong:
            log(f"bankops.tune: {m}x{n}x{k} {dt}: not timed, their results disagree with a @ b: {'; '.join(wrong)}")
        if not any(c.chosen for _, c in timed):
            raise RuntimeError(f"bankops.tune: the model's plan for {m}x{n}x{k} {dt} disagrees with a @ b: "
                               f"{route}")
        fastest_us, fastest = min(timed, key=lambda t: t[0])
        model_us, model = next((us, c) for us, c in timed if c.chosen)
        # The model's plan stays unless another ends measurably sooner (timings repeat to ~1%).
        best_us, best = (fastest_us, fastest) if fastest_us < (1 - MARGIN) * model_us else (model_us, model)
        a_km, b_kn = majors(a, b)
        table["entries"].append({
            "dtype": dt, "layout": layout, "a_km": a_km, "b_kn": b_kn, "batch": batch, "m": m, "n": n, "k": k,
            "plan": best.key, "route": str(best.route), "us": round(best_us, 3),
            "model_plan": model.key, "model_route": str(route), "model_us": round(model_us, 3),
            "timed": [[str(c.route), round(us, 3)] for us, c in timed], **({"wrong": wrong} if wrong else {})})
        than = "the model's plan" if best is model else f"model {model_us:.1f} us, x{model_us / best_us:.3f}"
        log(f"[{i + 1}/{len(todo)}] {dt} {layout} {shape_text(batch, m, n, k, a_t, b_t)}: "
            f"{best_us:.1f} us on {best.route.fields['family']} {best.route.fields['tile']} ({than}; {len(timed)} plans)")
        del sets, a, b, check, ref, bound
        torch.cuda.empty_cache()
        write(merged(old, table) if old else table, out)  # after each call: a run cut short keeps what it timed
    table = merged(old, table) if old else table
    register(*layered(table, os.path.basename(out), out))
    log(f"wrote {len(table['entries'])} entries to {out}")
    return table


def report(table):
    """The table's calls as markdown lines: each call (dtype, layout, [batch x] m x n x k, operand majors),
    the model's plan when it was timed and its microseconds, the plan the table names and its, and
    the ratio."""
    def plan(route):  # family, tile, split and the bare flags (ring, persistent)
        fields = route.split(" layout=")[0].split()
        return " ".join(fields[:2] + [f for f in fields[2:] if f.startswith("split=") or "=" not in f])

    lines = [f"{table['gpu']} ({table['sms']} SMs, driver {table['driver']}, torch {table['torch']}, {table['date']}): "
             f"{len(table['entries'])} calls",
             "", "| dtype | layout | m x n x k | a, b | model's plan | µs | table's plan | µs | model / table |",
             "|---|---|---|---|---|---|---|---|---|"]
    for e in table["entries"]:
        majors = f"{'km' if e['a_km'] else 'mk'}, {'kn' if e['b_kn'] else 'nk'}"
        chosen = "the model's" if e["plan"] == e["model_plan"] else plan(e["route"])
        dims = shape_text(e["batch"], e["m"], e["n"], e["k"], False, False)  # the majors have their own column
        lines.append(f"| {e['dtype']} | {e['layout']} | {dims} | {majors} | {plan(e['model_route'])} | "
                     f"{e['model_us']:.1f} | {chosen} | {e['us']:.1f} | {e['model_us'] / e['us']:.3f} |")
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bankops.tune", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default=None, help="comma-separated MxNxK (default: the bench's and the models' shapes)")
    ap.add_argument("--dtypes", default="bfloat16,float16", help="comma-separated of " + ",".join(DTYPE_CODES))
    ap.add_argument("--layouts", default="swizzle", help="comma-separated of none,pad,swizzle")
    ap.add_argument("--out", default=None, help="the table's file (default: <user dir>/<gpu>.json)")
    ap.add_argument("--update", action="store_true", help="keep --out's entries for the calls not timed now")
    ap.add_argument("--reps", type=int, default=10, help="graph replays a plan's time is the median of")
    ap.add_argument("--report", metavar="FILE", default=None, help="print FILE's calls as markdown and stop (no GPU)")
    ap.add_argument("--calls", metavar="FILE", default=None,
                    help="time the calls write_calls put in FILE (each in its own dtype and layout) instead of --shapes")
    args = ap.parse_args(argv)
    if args.report:
        with open(args.report) as f:
            print("\n".join(report(json.load(f))))
        return
    if args.calls and args.shapes:
        ap.error("--calls and --shapes both name the calls to time: give one")
    shapes = read_calls(args.calls) if args.calls else args.shapes.split(",") if args.shapes else None
    tune(shapes, tuple(args.dtypes.split(",")), tuple(args.layouts.split(",")), args.out, args.reps, update=args.update)


class _CallableModule(types.ModuleType):
    """bankops.tune is this module and, called, its tune()."""

    def __call__(self, *args, **kwargs):
        return tune(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

if __name__ == "__main__":
    main()
