"""Turn benchmark rows into results.json, RESULTS.md, plots/<op>.png and a text summary."""
import datetime
import json
import math
import os
import statistics
import subprocess

import torch

from bankops import LAYOUTS
from cases import CASE_SECTIONS
OPS = ("transpose", "reduce_sum", "gemm", "linear")
# The models section's tables: a Linear layer's gemm calls, each its row's "case", in the
# order forward, input grad, weight grad; and the layout they show (bankops' default).
PRODUCTS = (("x@W.t()", "forward"), ("dy@W", "input grad"), ("dy.t()@x", "weight grad"))
MODEL_LAYOUT = "swizzle"


def metadata(device_name, root):
    return {
        "device": device_name,
        "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
        "commit": git_commit(root),
        "torch": torch.__version__,
    }


def git_commit(root):
    # A copy of the tree without .git (the GPU machine gets one) names its commit in BANKOPS_COMMIT.
    if os.environ.get("BANKOPS_COMMIT"):
        return os.environ["BANKOPS_COMMIT"]
    try:
        git = ["git", "-C", root]
        head = subprocess.run(git + ["rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True)
        dirty = subprocess.run(git + ["status", "--porcelain"], capture_output=True, text=True, check=True)
        return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def fmt(v):
    """About 3 significant digits; large values without an exponent."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "—"
    if abs(v) >= 1000:
        return f"{v:.0f}"
    return f"{v:#.3g}".rstrip(".")


def label(row, case=True):
    """The shape (and reduce_sum's dim); with case, also the row's case and whether its inputs require grad."""
    s = "x".join(map(str, row["shape"]))
    if row["op"] == "reduce_sum":
        s += ", all" if row.get("dim") is None else f", dim={row['dim']}"
    if case and row.get("case"):  # a model's gemm calls of one shape differ only in this
        s += f", {row['case']}"
    if case and row.get("requires_grad"):
        s += ", requires_grad"
    return s


def span(values):
    """"3" or "3-5": the range of a set of counts."""
    values = sorted(set(values))
    return "—" if not values else f"{values[0]}" if len(values) == 1 else f"{values[0]}-{values[-1]}"


def section(row):
    """The bench section that made the row: ops, models, inference or overhead."""
    return CASE_SECTIONS.get(row.get("case"), "models")


def valid(row):
    return row.get("ms") is not None and row.get("check") == "ok"


def status(row):
    if row.get("error"):
        return "error: " + row["error"]
    return row.get("check", "—")


def groups(rows, op):
    """Rows of one op, grouped per case (shape, dtype), in the order they were run; the overhead
    rows (one layout, timed apart) have their own table."""
    out = {}
    for r in rows:
        if r["op"] == op and section(r) != "overhead":
            out.setdefault((label(r), r["dtype"]), []).append(r)
    return out


def best(case_rows):
    ok = [r for r in case_rows if valid(r)]
    return min(ok, key=lambda r: r["ms"]) if ok else None


def clean(v):
    """JSON has no NaN or Infinity: an unmeasurable number is null."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def write_all(rows, meta, how, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    doc = dict(meta, results=[{k: clean(v) for k, v in r.items()} for r in rows])
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(doc, f, indent=1, allow_nan=False)
        f.write("\n")
    with open(os.path.join(out_dir, "RESULTS.md"), "w") as f:
        f.write(markdown(rows, meta, how))
        f.write(kept_sections())
    splice_ncu(out_dir)
    return plots(rows, meta, os.path.join(out_dir, "plots"))


# Sections RESULTS.md carries over from files beside this one, as they are: runs this script
# does not make (two GPUs) and the figures behind the kernels' design.
KEPT = ("ddp.md", "design_notes.md")


def kept_sections():
    text = ""
    for name in KEPT:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name)
        if os.path.exists(path):
            with open(path) as f:
                text += "\n" + f.read()
    return text


def how_measured(how):
    if how["cuda"]:
        return (
            "Each case runs the bankops operator once per layout and its torch peer in the same process, "
            "the peer timed again right before each layout (graph timing, and eager timing where a row has "
            "it), so that each ratio compares two timings taken back to back, at about the same temperature "
            "(not always the same clock: at the board's power limit a kernel that draws more runs slower; the "
            "MHz and W columns give each side's). "
            "Before timing, the bankops result is checked against the peer once (transpose: bit-exact; "
            "reduce_sum and gemm: a loose tolerance relative to the dtype; integers exact). Timing: "
            f"{how['warmup']} warm-up calls, then the call is captured into a CUDA graph, repeated until one "
            f"replay lasts about {how.get('graph_ms', 1):g} ms (at most {how.get('graph_calls_max', 64)} calls), "
            "one pair of CUDA events around each replay, and the median per call "
            f"over {how['min_reps']}-{how['max_reps']} replays (fewer only when a call is slow enough to pass "
            f"{how['budget_s']:g} s). The graph removes the host's share (Python, dispatch, launch: 10-20 µs a "
            "call on both sides), so short calls such as gemm 1024³ compare kernels, not dispatchers. Inputs are random (randn / randint, never zeros); the memory-bound "
            "operators use inputs larger than the 50 MB L2, so they measure DRAM bandwidth. GB/s counts input "
            "plus output bytes; TFLOP/s is 2·B·M·N·K. *ratio vs peer* is peer ms / bankops ms (above 1: bankops "
            "is faster); *ratio to copy* is bankops GB/s over `y.copy_(x)` GB/s for the same input byte count, "
            "measured in the same run (eagerly, one event pair per call: in a graph the copy becomes a memcpy "
            "node, which runs slower than the copy kernel; the median over three fresh buffer pairs). TF32 is off (`torch.backends.cuda.matmul.allow_tf32 = False`, "
            "`torch.backends.cudnn.allow_tf32 = False`), so float32 gemm is FFMA against true-float32 cuBLAS."
        )
    return (
        "**No CUDA GPU: these are timings of the CPU reference implementation (plain C++ loops), not the "
        "CUDA kernels. They show that the benchmark runs; they say nothing about the kernels' speed.** "
        "Small shapes, time.perf_counter around each call after "
        f"{how['warmup']} warm-up calls, median over {how['min_reps']}-{how['max_reps']} repetitions, random "
        "inputs, each result checked against the torch CPU peer once; ratio to copy uses a CPU `y.copy_(x)`."
    )


def md_table(header, lines):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c).replace("|", "\\|") for c in line) + " |" for line in lines]
    return "\n".join(out) + "\n"


def markdown(rows, meta, how):
    parts = [
        "# bankops benchmark results\n",
        f"- date: {meta['date']} (UTC)\n- device: {meta['device']}\n- commit: {meta['commit']}\n"
        f"- torch: {meta['torch']}\n" + clock_line(meta),
        "## How measured\n",
        how_measured(how) + "\n",
    ]
    op_rows = [r for r in rows if section(r) == "ops"]  # the other sections have their own tables
    for op in OPS:
        if any(r["op"] == op for r in op_rows):
            parts += rows_section(f"## {op}\n", [r for r in op_rows if r["op"] == op])
    parts += models_markdown([r for r in rows if section(r) == "models"])
    parts += inference_markdown([r for r in rows if section(r) == "inference"], how)
    parts += overhead_markdown([r for r in rows if section(r) == "overhead"], how)

    lines = []
    for op in OPS:
        for (lab, dtype), case_rows in groups(rows, op).items():
            b = best(case_rows)
            if b is None:
                lines.append([op, lab, dtype, "no valid layout", "—", "—", "—", "—"])
                continue
            slowest = max(r["ms"] for r in case_rows if valid(r))
            lines.append([op, lab, dtype, b["layout"], fmt(b["ms"]), fmt(b["ratio"]),
                          fmt(b.get("ratio_to_copy")), fmt(slowest / b["ms"])])
    parts += [
        "## Best layout per case\n",
        "Fastest layout whose result checked ok; *slowest / best* is how much the layout choice matters.\n",
        md_table(["op", "shape", "dtype", "best layout", "ms", "ratio vs peer", "ratio to copy", "slowest / best"],
                 lines),
    ]
    return "\n".join(parts)


def clock_line(meta):
    c, w = meta.get("sm_clock_mhz"), meta.get("board_watts")
    if not c:
        return ""
    power = f"; board power median {w['median']:.0f} W, {w['min']:.0f}-{w['max']:.0f}" if w else ""
    columns = "*MHz* and *W* columns" if w else "*MHz* column"
    return (f"- SM clock while timing (NVML, every 50 ms): median {c['median']:.0f} MHz, "
            f"{c['min']:.0f}-{c['max']:.0f}{power}; each row's {columns}: the median over its bankops / peer timing\n")


def mhz_cell(row):
    return f"{fmt(row.get('sm_mhz'))} / {fmt(row.get('peer_sm_mhz'))}"


def watts_cell(row):
    return f"{fmt(row.get('watts'))} / {fmt(row.get('peer_watts'))}"


def peers(rows):
    return ", ".join(dict.fromkeys(f"`{r['peer']}`" for r in rows))


SHAPE_NOTES = (("gemm", "gemm shapes are [B,] M, N, K"), ("linear", "linear shapes are M tokens, K in, N out"))


def rows_section(title, rows):
    """A heading, the peers and a table of every row: the ratio to copy for the memory-bound
    operators, the eager timings where the rows have them."""
    unit = rows[0]["unit"]
    memory_bound = unit == "GB/s"
    eager = "eager_ms" in rows[0]
    ops = {r["op"] for r in rows}
    notes = [note for op, note in SHAPE_NOTES if op in ops]
    shape_note = f" ({'; '.join(notes)})" if notes else ""
    header = ["shape", "dtype", "layout", "ms", unit, "peer ms", "ratio vs peer"]
    header += ["ratio to copy"] if memory_bound else []
    header += ["eager ms", "eager peer ms", "eager ratio"] if eager else []
    clocked, powered = any("sm_mhz" in r for r in rows), any("watts" in r for r in rows)
    header += ["MHz"] if clocked else []
    header += ["W"] if powered else []
    lines = []
    for r in rows:
        line = [label(r), r["dtype"], r["layout"], fmt(r.get("ms")), fmt(r.get("figure")),
                fmt(r.get("peer_ms")), fmt(r.get("ratio"))]
        line += [fmt(r.get("ratio_to_copy"))] if memory_bound else []
        line += [fmt(r.get(k)) for k in ("eager_ms", "eager_peer_ms", "eager_ratio")] if eager else []
        line += [mhz_cell(r)] if clocked else []
        line += [watts_cell(r)] if powered else []
        lines.append(line + [status(r)])
    return [title, f"Peer: {peers(rows)}{shape_note}.\n", md_table(header + ["check"], lines)]


def by_layer(rows):
    """Model rows grouped per Linear layer (dtype, [M, K, N]) in run order, each a dict of its
    rows of MODEL_LAYOUT by case."""
    out = {}
    for r in rows:
        if section(r) == "models" and r["layout"] == MODEL_LAYOUT:
            out.setdefault((r["dtype"], *r["linear_shape"]), {})[r["case"]] = r
    return out


def ratios(rows, key):
    """The checked rows' values of key ("ratio" or "eager_ratio")."""
    return [r[key] for r in rows if r is not None and valid(r) and r.get(key)]


def geomean(values):
    return statistics.geometric_mean(values) if values else None


def ratio_cell(rows):
    """graph / eager ratio, as the geometric mean where there are several rows."""
    rows = [r for r in rows if r is not None]
    if not rows:
        return "—"
    if len(rows) == 1 and not valid(rows[0]):
        return "error" if rows[0].get("error") else "wrong"
    return f"{fmt(geomean(ratios(rows, 'ratio')))} / {fmt(geomean(ratios(rows, 'eager_ratio')))}"


def models_markdown(rows):
    """The models section: a Linear layer's three gemm calls and its training step, ratio of
    MODEL_LAYOUT to torch per layer shape, a geometric mean per dtype, then every row."""
    if not rows:
        return []
    layers = by_layer(rows)
    dtypes = list(dict.fromkeys(dt for dt, *_ in layers))
    product_lines = [[dt, m, k, n] + [ratio_cell([by_case.get(c)]) for c, _ in PRODUCTS]
                     for (dt, m, k, n), by_case in layers.items()]
    product_lines += [[f"geomean {dt}", "", "", ""]
                      + [ratio_cell([cs.get(c) for (d, *_), cs in layers.items() if d == dt]) for c, _ in PRODUCTS]
                      for dt in dtypes]
    layer_lines = []
    for (dt, m, k, n), by_case in layers.items():
        for case in (c for c in by_case if c.startswith("layer")):  # "layer", "layer, autocast bfloat16"
            r = by_case[case]
            layer_lines.append([dt + case[len("layer"):], m, k, n, ratio_cell([r])]
                               + [fmt(r.get(f)) for f in ("figure", "ms", "peer_ms")])
    products, _ = model_rows(rows)
    return [
        "## Models\n",
        "gemm as a model's Linear layer y = x @ W.t() + b calls it, W (N, K), x (M, K) and dy (M, N) contiguous: "
        "the forward `x @ W.t()`, the input grad `dy @ W` and the weight grad `dy.t() @ x` on those views (the "
        "rows' shapes are each product's own M, N, K), against `torch.matmul` on the same views; then the layer's "
        "forward with bias and backward (grads of x, weight and bias), `bankops.nn.Linear` against "
        f"`torch.nn.Linear` sharing its parameters. Cells: ratio vs torch of layout `{MODEL_LAYOUT}`, graph / eager "
        "(above 1: bankops is faster). *graph* is timed as above, kernels only; *eager* times eager calls, one "
        "CUDA event pair around each, no sync in between: a call's host overhead counts where it outlasts the "
        "kernel, as in a model run eagerly. The geomean rows are over the shapes of that dtype.\n",
        md_table(["dtype", "M", "K", "N"] + [f"{what} `{c}`" for c, what in PRODUCTS], product_lines),
        f"Geometric mean over every product above: {fmt(geomean(ratios(products, 'ratio')))} graph, "
        f"{fmt(geomean(ratios(products, 'eager_ratio')))} eager.\n",
        "### Linear layer: forward + backward\n",
        "TFLOP/s counts the three products (6·M·N·K); ms is graph-timed.\n",
        md_table(["dtype", "M", "K", "N", "ratio graph / eager", "TFLOP/s", "ms", "torch ms"], layer_lines),
        *rows_section("### Every model row\n", rows),
    ]


def graph_eager(row, key, scale=1):
    """"graph / eager" cell of a row's key and eager_<key> (ms, peer_ms, ratio, weight_GBps, ...)."""
    def value(k):
        return None if row.get(k) is None else row[k] * scale
    return f"{fmt(value(key))} / {fmt(value('eager_' + key))}"


def decode_best(rows, case="decode"):
    """The fastest checked layouts' rows (graph time) of the decode cases of one product
    ("decode": x @ W.t(), "decode x@W"), in run order."""
    cases = groups([r for r in rows if r.get("case") == case], "gemm").values()
    return [b for b in map(best, cases) if b is not None]


# A decode row's product, as its case names it.
DECODE_PRODUCTS = {"decode": "x @ W.t()", "decode x@W": "x @ W"}


def inference_markdown(rows, how):
    """The inference section: per decode case the best layout against torch, then every row."""
    if not rows:
        return []
    lines = []
    for (_, dtype), case_rows in groups(rows, "gemm").items():
        m, k, n = case_rows[0]["linear_shape"]
        b = best(case_rows)
        head = [DECODE_PRODUCTS[case_rows[0]["case"]], m, k, n, dtype]
        lines.append(head + (["no valid layout"] + ["—"] * 5 if b is None else [
            b["layout"], graph_eager(b, "ms", 1e3), graph_eager(b, "peer_ms", 1e3), graph_eager(b, "ratio"),
            graph_eager(b, "weight_GBps"), graph_eager(b, "peer_weight_GBps")]))
    sets = span(r["copies"] for r in rows if r.get("copies"))
    together = (f"together at least four times the 50 MB L2 and at least two ({sets} sets here)" if how["cuda"]
                else f"{sets} here (on the CPU, whose caches are not the point)")
    return [
        "## Inference (decode)\n",
        "A served model's layer at decode: `x @ W.t()` with x (M, K) of M = 1-128 tokens and the weight W (N, K) "
        "row-major, read in place (`bankops.gemm(x, W.t(), layout)`, i.e. `torch.ops.bankops.gemm`), against "
        "`torch.matmul(x, W.t())` on the same views; and `x @ W` of a weight stored (K, N), as models that keep "
        "it (in, out) call it. Each call reads its weight from DRAM, as in a model whose "
        "layers each read their own weights: the timed calls take the next of several fresh (x, W) sets in turn, "
        f"{together}, bankops and torch the same sets in the same turn, and a CUDA graph holds whole turns. "
        "*graph* is timed as above, kernels only; *eager* times eager calls, one CUDA event pair around each, no "
        "sync in between, so a call's host overhead counts where it outlasts its kernel. *weight GB/s*: the "
        "weight's N·K·element bytes over the call's time. The layout is the fastest graph-timed layout whose "
        "result checked ok; its eager figures are that layout's. Ratio above 1: bankops is faster.\n",
        md_table(["product", "M", "K", "N", "dtype", "layout", "µs graph / eager", "torch µs graph / eager",
                  "ratio graph / eager", "weight GB/s graph / eager", "torch weight GB/s graph / eager"], lines),
        "Geometric mean of the ratios above (graph / eager): "
        + ", ".join(f"{p} {ratio_cell(decode_best(rows, c))}" for c, p in DECODE_PRODUCTS.items() if decode_best(rows, c))
        + ".\n",
        *rows_section("### Every decode row\n", rows),
    ]


def overhead_markdown(rows, how):
    """The overhead section: one line per operator call, bankops' µs per call beside torch's."""
    if not rows:
        return []
    lines = [[r["op"], label(r, case=False), "yes" if r.get("requires_grad") else "no", f"`{r['peer']}`",
              fmt(r.get("us")), fmt(r.get("torch_us")), fmt(r.get("diff_us")), status(r)] for r in rows]
    return [
        "## Per-call overhead\n",
        "Eager time per call where the kernel is tiny and the host's share (Python, the dispatcher, argument "
        "checks, allocation, the launch) sets it: each operator on 64 x 64 float32 tensors (gemm [M, N, K], "
        "linear [M tokens, K in, N out] with bias), bankops with its default layout `swizzle` against its torch "
        f"peer on the same inputs. The wall time of {span(r['calls'] for r in rows)} back-to-back calls, "
        f"synchronized before the first and after the last, after {how['warmup']} such runs to warm up, median "
        f"over {span(r['reps'] for r in rows if r.get('reps'))} runs, divided by the calls. *requires_grad*: "
        "every input requires grad, so the call also records its autograd node (forward only). *difference* is "
        "bankops µs − torch µs.\n",
        md_table(["op", "shape", "requires_grad", "torch peer", "bankops µs", "torch µs", "difference µs", "check"],
                 lines),
    ]


def model_rows(rows):
    """The MODEL_LAYOUT rows of the Linear layers' products, and of the layers' steps."""
    layers = by_layer(rows).values()
    return [cs[c] for cs in layers for c, _ in PRODUCTS if c in cs], [cs["layer"] for cs in layers if "layer" in cs]


def plots(rows, meta, plot_dir):
    """One grouped bar chart per op; returns whether matplotlib was there to draw them."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("note: matplotlib is not importable, no plots written")
        return False
    os.makedirs(plot_dir, exist_ok=True)
    rows = [r for r in rows if not r.get("case")]  # the model rows would crowd the operators' bars
    for op in OPS:
        cases = groups(rows, op)
        if not cases:
            continue
        fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(cases) + 2), 4.5))
        width = 0.8 / len(LAYOUTS)
        for i, layout in enumerate(LAYOUTS):
            xs, ys, hatches = [], [], []
            for x, case_rows in enumerate(cases.values()):
                r = next((r for r in case_rows if r["layout"] == layout), None)
                if r is not None and r.get("ratio") is not None:
                    xs.append(x + (i - (len(LAYOUTS) - 1) / 2) * width)
                    ys.append(r["ratio"])
                    hatches.append("" if valid(r) else "xx")  # a wrong answer's speed is not to be trusted
            bars = ax.bar(xs, ys, width, label=layout)
            for bar, h in zip(bars, hatches):
                bar.set_hatch(h)
        ax.axhline(1.0, color="black", linewidth=1)
        ratios = [r["ratio"] for rs in cases.values() for r in rs if r.get("ratio")]
        if ratios and max(ratios) / min(ratios) > 20:  # a linear axis would flatten the small bars to nothing
            ax.set_yscale("log")
        ax.set_xticks(range(len(cases)))
        ax.set_xticklabels([f"{lab}\n{dt}" for lab, dt in cases], rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("ratio vs peer (peer ms / ms; >1 faster)")
        peer = next(r["peer"] for r in rows if r["op"] == op)
        ax.set_title(f"{op} vs {peer}\n{meta['device']}, {meta['date']}, {meta['commit']}", fontsize=10)
        ax.legend(title="layout")
        fig.tight_layout()
        fig.savefig(os.path.join(plot_dir, f"{op}.png"), dpi=110)
        plt.close(fig)
    bank_map(plot_dir, plt)
    return True


def bank_map(plot_dir, plt):
    """plots/bank_map.png: the transpose's tile-column read under none and swizzle, as the bank
    model serves it (bankops.plot_banks): the picture in the README."""
    import bankops

    shape = dict(shape=(64, 64))
    rows = bankops.explain("transpose", "none", torch.float32, **shape).rows
    worst = max(range(len(rows)), key=lambda i: rows[i]["worst_wavefronts"])  # the tile-column read
    fig, axes = plt.subplots(2, 1, figsize=(12, 13), gridspec_kw=dict(height_ratios=[32, 2.5]))
    for ax, layout in zip(axes, ("none", "swizzle")):
        bankops.plot_banks("transpose", layout, worst, torch.float32, ax=ax, **shape)
    fig.tight_layout()
    fig.savefig(os.path.join(plot_dir, "bank_map.png"), dpi=110)
    plt.close(fig)


def summary(rows, meta):
    """Compact plain text: one line per case, the ratio vs peer of each layout and the best one."""
    head = f"{'op':<10} {'shape':<28} {'dtype':<8} " + " ".join(f"{l:>7}" for l in LAYOUTS)
    head += f"  {'best':<7} {'figure':>14} {'vs copy':>7}"
    out = [f"bankops vs torch peer on {meta['device']} ({meta['date']}, commit {meta['commit']}, "
           f"torch {meta['torch']}); ratio = peer ms / ms, >1 means bankops is faster",
           head, "-" * len(head)]
    bad = []
    for op in OPS:
        for (lab, dtype), case_rows in groups(rows, op).items():
            by_layout = {r["layout"]: r for r in case_rows}
            cells = []
            for layout in LAYOUTS:
                r = by_layout.get(layout)
                if r is None:
                    cells.append("—")
                elif r.get("error"):
                    cells.append("ERR")
                    bad.append(f"{op} {lab} {dtype} {layout}: {r['error']}")
                elif not valid(r):
                    cells.append("WRONG")
                    bad.append(f"{op} {lab} {dtype} {layout}: {r.get('check')}")
                else:
                    cells.append(fmt(r["ratio"]))
            b = best(case_rows)
            tail = (f"{b['layout']:<7} {fmt(b['figure']) + ' ' + b['unit']:>14} {fmt(b.get('ratio_to_copy')):>7}"
                    if b else f"{'—':<7} {'—':>14} {'—':>7}")
            out.append(f"{op:<10} {lab:<28} {dtype:<8} " + " ".join(f"{c:>7}" for c in cells) + "  " + tail)
    products, layers = model_rows(rows)
    if products or layers:
        out += ["", f"models, {MODEL_LAYOUT} vs torch, geometric mean of ratios (graph / eager): Linear layers' gemm "
                    f"calls {ratio_cell(products)}, their forward + backward {ratio_cell(layers)}"]
    for case, product in DECODE_PRODUCTS.items():
        decode = decode_best(rows, case)
        if decode:
            out += [f"inference, decode {product}, best layout vs torch, geometric mean of ratios (graph / eager): "
                    f"{ratio_cell(decode)}"]
    overhead = [r for r in rows if section(r) == "overhead"]
    if overhead:
        out += ["", "per-call overhead, eager, us a call:"]
        out += [f"{r['op']:<10} {label(r):<38} bankops {fmt(r.get('us')):>6}  torch {fmt(r.get('torch_us')):>6}  "
                f"{status(r)}" for r in overhead]
    if bad:
        out += ["", "problems:"] + [f"  {b}" for b in bad]
    return "\n".join(out)


NCU_MARK = "<!-- bank conflicts: bench/ncu.py -->"


def ncu_markdown(doc):
    """The predicted-vs-measured tables of bench/ncu.py's ncu.json."""
    tol = doc["tolerance"]

    def trio(k):
        if k is None:
            return ""
        mark = "" if k["agrees"] else " ✗"
        hw = f" / {fmt(k['hardware'])}" if k.get("hardware") is not None else ""
        return f"{fmt(k['predicted'])} / {fmt(k['sass'])}{hw}{mark}"

    probe_lines = [[p["name"], str(p["width"]), p["op"], fmt(p["predicted"]), fmt(p["sass"]), fmt(p["hardware"]),
                    "" if p["agrees"] else "✗"] for p in doc.get("probes", [])]
    kinds = [k for k in ("ld", "st", "ldsm", "ldgsts") if any(k in r["kinds"] for r in doc["results"])]
    lines, none_ms = [], {}
    for r in doc["results"]:
        key = (r["op"], json.dumps(r["shape"]), r["dtype"])
        if r["layout"] == "none":
            none_ms[key] = r["ms"]
        base = none_ms.get(key)
        counts = [f"{k} {v['instructions_predicted']} / {v['instructions_measured']:.0f}"
                  for k, v in r["kinds"].items() if not v["instructions_agree"]]
        lines.append([r["op"], ", ".join(f"{k}={v}" for k, v in r["shape"].items()), r["dtype"], r["layout"],
                      fmt(r["ms"]), fmt(base / r["ms"]) if base else "—"]
                     + [trio(r["kinds"].get(k)) for k in kinds] + ["; ".join(counts) or "✓"])
    ok = sum(all(k["agrees"] for k in r["kinds"].values()) for r in doc["results"])
    ok_hw = sum(all(k["agrees_hardware"] for k in r["kinds"].values()) for r in doc["results"])
    probes_ok = sum(p["agrees"] for p in doc.get("probes", []))
    out = [
        "## Bank conflicts: predicted vs measured\n",
        f"- date: {doc['date']} (UTC)\n- device: {doc['device']}\n- commit: {doc['commit']}\n",
        "`bench/ncu.py` runs under Nsight Compute (`ncu --clock-control none`). *model* is the bank model's "
        "wavefronts per warp-wide shared-memory instruction (`kernels/bank_model.h`); *SASS* is "
        "`smsp__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_op_<kind>.sum`, which ncu derives from each "
        "executed instruction's lane addresses; *hw* is the L1 hardware counter "
        "`l1tex__data_pipe_lsu_wavefronts_mem_shared_op_<kind>.sum`, which also counts wavefronts a data bank "
        "loses to other L1 traffic (global loads and stores share the banks); each over "
        "`smsp__sass_inst_executed_op_<kind>.sum`. 1 is conflict-free for accesses of up to 4 bytes, 2 for "
        f"8-byte and 4 for 16-byte accesses. ✗ marks a model more than {tol:.0%} off the SASS count.\n",
    ]
    if probe_lines:
        out += [
            "### The bank probe\n",
            "One warp issues one access (`torch.ops.bankops._smem_probe`, PTX `ld/st.shared` or `cp.async` "
            f"of the given width) at the lane addresses named. {probes_ok} of {len(probe_lines)} patterns agree.\n",
            md_table(["access", "width", "op", "model", "SASS", "hw", ""], probe_lines), "",
        ]
    out += [
        "### Operators\n",
        "Each operator x layout x dtype once; the model is `bankops.explain` for the launch (the kernels' own "
        "coordinate functions and layout functors replayed through the bank model). Cells: wavefronts per "
        "instruction, model / SASS / hw. *instructions*: ✓ when the trace lists exactly the shared-memory "
        "instructions ncu counts, else predicted / measured; accesses to a cluster peer's shared memory "
        "(distributed shared memory: split-K's loads of the peers' partial tiles, a split last wave's partial "
        "stores), which the counters count on neither SM, are left out of both. *ms*: median runtime (CUDA "
        "events, outside the "
        f"profiler); *x none*: speed relative to `none`. {ok} of {len(doc['results'])} cases agree with SASS "
        f"within {tol:.0%}, {ok_hw} with the hardware counter.\n",
        md_table(["op", "problem", "dtype", "layout", "ms", "x none"] + kinds + ["instructions"], lines),
    ]
    if doc.get("unavailable"):
        out.append(f"\nMetrics this ncu does not offer (not measured): {', '.join(doc['unavailable'])}.")
    return "\n".join(out)


def splice_ncu(out_dir):
    """Puts ncu.json's table at the end of RESULTS.md (replacing an older one)."""
    ncu_path, md_path = os.path.join(out_dir, "ncu.json"), os.path.join(out_dir, "RESULTS.md")
    if not (os.path.exists(ncu_path) and os.path.exists(md_path)):
        return
    with open(ncu_path) as f:
        doc = json.load(f)
    with open(md_path) as f:
        text = f.read().split(NCU_MARK)[0].rstrip("\n")
    with open(md_path, "w") as f:
        f.write(f"{text}\n\n{NCU_MARK}\n{ncu_markdown(doc)}")
