"""Turn benchmark rows into one GPU's results: bench/results/<gpu>.json, <gpu>.md, <gpu>/*.png.

    python3 bench/report.py [JSON ...]        rewrite the .md and plots of results files
                                              (default: every bench/results/*.json)
    python3 bench/report.py --merge OUT.json --note TEXT IN.json ...
                                              one results file from sections run in separate processes
    python3 bench/report.py --readme          the README's summary table, a column per GPU
    python3 bench/report.py --bank-map bench/plots/bank_map.png    the README's bank map

Each GPU's files are named by its device name (slug: "NVIDIA H100 80GB HBM3" ->
h100-80gb-hbm3); a run writes its own GPU's files and leaves every other file as it is.
"""
import argparse
import datetime
import glob
import json
import math
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(1, ROOT)  # the working tree's bankops, not an installed copy

import torch  # noqa: E402

from cases import CASE_SECTIONS, SECTIONS  # noqa: E402
RESULTS = os.path.join(HERE, "results")
OPS = ("transpose", "reduce_sum", "gemm", "linear")
# A Linear layer's rows in the models section, each its row's "case", in the order forward,
# input grad, weight grad, then the layer's step.
PRODUCTS = (("x@W.t()", "forward"), ("dy@W", "input grad"), ("dy.t()@x", "weight grad"))
LAYER_CASES = (*PRODUCTS, ("layer", "forward + backward"))
MODEL_LAYOUT = "swizzle"  # bankops' default: the layout a best-layout cell names when it is another
# A decode row's product, as its case names it.
DECODE_PRODUCTS = {"decode": "x @ W.t()", "decode x@W": "x @ W"}
# A row shows its two sides' SM clocks (power) only where they differ by more than this fraction:
# a ratio taken at different clocks compares the clocks as much as the kernels.
MARGIN = {"sm_mhz": 0.03, "watts": 0.10}
UNITS = {"sm_mhz": "MHz", "watts": "W"}


def slug(device):
    """A device's file name: lower case without "NVIDIA", each run of other characters one "-"."""
    name = re.sub(r"^nvidia ", "", device.strip().lower())
    return re.sub(r"[^a-z0-9]+", "-", name).strip("-") or "unknown"


def metadata(device_name, root):
    return {
        "device": device_name,
        "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
        "commit": build_commit(root),
        "torch": torch.__version__,
    }


def build_commit(root):
    """BANKOPS_COMMIT, else the commit the library in root/bankops was built from (setup.py
    records it in _build.json), else "unknown": never the git metadata of a copied tree."""
    if os.environ.get("BANKOPS_COMMIT"):
        return os.environ["BANKOPS_COMMIT"]
    try:
        with open(os.path.join(root, "bankops", "_build.json")) as f:
            return json.load(f).get("commit") or "unknown"
    except (OSError, ValueError):
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


def cases_of(rows):
    """Rows grouped per case (op, label, dtype), in the order they were run."""
    out = {}
    for r in rows:
        out.setdefault((r["op"], label(r), r["dtype"]), []).append(r)
    return out


def best(case_rows):
    ok = [r for r in case_rows if valid(r)]
    return min(ok, key=lambda r: r["ms"]) if ok else None


def geomean(values):
    return statistics.geometric_mean(values) if values else None


def clean(v):
    """JSON has no NaN or Infinity: an unmeasurable number is null."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


# ---------------------------------------------------------------------------- files


def results_files(out_dir=RESULTS):
    """The results files in out_dir, one a GPU (not their Nsight Compute tables), the latest run's
    first (the README's first column), then by name."""
    paths = sorted(p for p in glob.glob(os.path.join(out_dir, "*.json")) if not p.endswith(".ncu.json"))
    return sorted(paths, key=lambda p: load(p).get("date", ""), reverse=True)


def results_path(device, out_dir=RESULTS):
    """A device's results file in out_dir; its .md and plot folder are beside it, of the same name."""
    return os.path.join(out_dir, slug(device) + ".json")


def write_all(rows, meta, out_dir=RESULTS):
    """The run's own GPU's json, md and plots in out_dir; returns the paths written."""
    os.makedirs(out_dir, exist_ok=True)
    doc = dict(meta, results=[{k: clean(v) for k, v in r.items()} for r in rows])
    path = results_path(meta["device"], out_dir)
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, allow_nan=False)
        f.write("\n")
    return [path, *render(path)]


def load(json_path):
    with open(json_path) as f:
        return json.load(f)


def ncu_path(device, out_dir=RESULTS):
    """A device's Nsight Compute tables (bench/ncu.py writes them), beside its results file."""
    return os.path.join(out_dir, slug(device) + ".ncu.json")


def ncu_doc(device):
    """The device's Nsight Compute tables, else None."""
    path = ncu_path(device)
    return load(path) if os.path.exists(path) else None


def render(json_path, ncu=None):
    """(Re)writes the .md and the plots beside a results file from its contents; returns their paths."""
    doc = load(json_path)
    rows, meta = doc["results"], {k: v for k, v in doc.items() if k != "results"}
    base = json_path[: -len(".json")]
    drawn = plots(rows, meta, base)
    for stale in set(glob.glob(os.path.join(base, "*.png"))) - set(drawn.values()):
        os.remove(stale)  # a plot of a section this file no longer has
    with open(base + ".md", "w") as f:
        f.write(markdown(rows, meta, os.path.basename(base), drawn, ncu or ncu_doc(meta["device"])))
    return [base + ".md", *drawn.values()]


def splice_ncu(doc):
    """Rewrites the .md of the GPU an Nsight Compute run measured (its results file, where there
    is one) with those tables."""
    if os.path.exists(results_path(doc["device"])):
        render(results_path(doc["device"]), doc)


def merge(docs, note):
    """One results file from results of one device, commit and torch whose sections ran in
    separate processes: their rows in section order, each process's sections and clocks one of
    `runs`, the read limit of the process that measured it."""
    for key in ("device", "commit", "torch"):
        values = {d.get(key) for d in docs}
        if len(values) > 1:
            raise SystemExit(f"report.py --merge: the files disagree on {key}: {sorted(map(str, values))}")
    per_run = ("date", "sm_clock_mhz", "board_watts")
    runs = [dict({"sections": [s for s in SECTIONS if any(section(r) == s for r in d["results"])],
                  "ops": list(dict.fromkeys(r["op"] for r in d["results"]))},
                 **{k: d[k] for k in per_run if k in d}) for d in docs]
    meta = {}
    for d in docs:
        meta.update({k: v for k, v in d.items() if k not in ("results", *per_run)})
    meta.update(date=max(d["date"] for d in docs), note=note, runs=runs)
    rows = [r for s in SECTIONS for d in docs for r in d["results"] if section(r) == s]
    return dict(meta, results=rows)


# ---------------------------------------------------------------------------- summary


def group(name, pick, key="ratio", against=None):
    """A summary line: its rows (pick), the value read from each case's best layout (key) and the
    peer it is against (by default the rows' own peers)."""
    return {"name": name, "pick": pick, "key": key, "against": against}


def ops_rows(op, dtypes=None):
    return lambda r: section(r) == "ops" and r["op"] == op and (dtypes is None or r["dtype"] in dtypes)


def model_rows(op, dtype, case=None):
    return lambda r: (section(r) == "models" and r["op"] == op and r["dtype"] == dtype
                      and (case is None or r.get("case") == case))


def decode_rows(case, dtype):
    return lambda r: r.get("case") == case and r["dtype"] == dtype


SIXTEEN = ("float16", "bfloat16")
SUMMARY = [
    group("`transpose`, 1-8 byte elements", ops_rows("transpose"), "ratio_to_copy",
          against="copy bandwidth (`y.copy_(x)`)"),
    group("`transpose`", ops_rows("transpose")),
    group("`reduce_sum`", ops_rows("reduce_sum")),
    group("`gemm` float32 (FFMA)", ops_rows("gemm", ("float32",))),
    group("`gemm` float16, bfloat16", ops_rows("gemm", SIXTEEN)),
    group("a Linear layer's three gemms, float32", model_rows("gemm", "float32")),
    group("a Linear layer's three gemms, bfloat16", model_rows("gemm", "bfloat16")),
    group("`bankops.nn.Linear` forward + backward, float32", model_rows("linear", "float32", "layer")),
    group("`bankops.nn.Linear` forward + backward, bfloat16", model_rows("linear", "bfloat16", "layer")),
    group("the same, float32 under `torch.autocast` bfloat16",
          model_rows("linear", "float32", "layer, autocast bfloat16")),
    group("decode `x @ W.t()`, float32", decode_rows("decode", "float32")),
    group("decode `x @ W.t()`, bfloat16", decode_rows("decode", "bfloat16")),
    group("decode `x @ W` (W stored (K, N)), float32", decode_rows("decode x@W", "float32")),
    group("decode `x @ W` (W stored (K, N)), bfloat16", decode_rows("decode x@W", "bfloat16")),
    group("per-call time, 64x64, eager: µs more than torch", lambda r: section(r) == "overhead", "diff_us",
          against="torch's peer"),
]


def against(rows, g):
    """The peer a summary line is against: its own, else its rows' peers (on the same views, for a
    Linear layer's gemms)."""
    if g["against"]:
        return g["against"]
    names = dict.fromkeys(f"`{r['peer']}`" for r in rows if g["pick"](r))
    return ", ".join(names) + (" on the same views" if any(section(r) == "models" and r["op"] == "gemm"
                                                          for r in rows if g["pick"](r)) else "")


def summary_values(rows, g):
    """The values of g's key over its cases: each case's best layout (the overhead rows, one a case, as they are)."""
    picked = [r for r in rows if g["pick"](r)]
    if g["key"] == "diff_us":
        return [r["diff_us"] for r in picked if r.get("diff_us") is not None]
    bests = (best(c) for c in cases_of(picked).values())
    return [b[g["key"]] for b in bests if b is not None and b.get(g["key"]) is not None]


def summary_cell(values, key):
    """"min-max (median)" of ratios; for the overhead, bankops' µs minus torch's, as a range."""
    if not values:
        return "—"
    lo, hi, mid = min(values), max(values), statistics.median(values)
    if key == "diff_us":
        return f"{lo:+.1f} to {hi:+.1f}"
    return f"{fmt(lo)}-{fmt(hi)} ({fmt(mid)})" if len(values) > 1 else fmt(lo)


def summary_lines(rows):
    """[what, against, cell] for each summary line the rows have."""
    out = []
    for g in SUMMARY:
        values = summary_values(rows, g)
        if values:
            out.append([g["name"], against(rows, g), summary_cell(values, g["key"])])
    return out


def readme_table(json_paths, link_root=ROOT):
    """The README's summary: a line per SUMMARY entry, a column per GPU (its .md linked)."""
    docs = [load(p) for p in json_paths]
    header = ["", "against"] + [
        f"[{d['device'].replace('NVIDIA ', '')}]({os.path.relpath(p[:-len('.json')] + '.md', link_root)})"
        for d, p in zip(docs, json_paths)]
    lines = []
    for g in SUMMARY:
        cells = [summary_cell(summary_values(d["results"], g), g["key"]) for d in docs]
        if any(c != "—" for c in cells):
            lines.append([g["name"], against([r for d in docs for r in d["results"]], g), *cells])
    return md_table(header, lines)


def summary(rows, meta):
    """Plain text for the end of a run: the summary lines, then any row that failed."""
    out = [f"bankops vs torch on {meta['device']} ({meta['date']}, commit {meta['commit']}, torch {meta['torch']}): "
           "best layout per case, ratio = peer ms / ms (above 1: bankops is faster), min-max (median)"]
    lines = summary_lines(rows)
    width = max((len(w) for w, _, _ in lines), default=0)
    out += [f"  {what:<{width}}  {cell:<24} against {against}" for what, against, cell in lines]
    bad = [f"  {r['op']} {label(r)} {r['dtype']} {r['layout']}: {status(r)}" for r in rows
           if r.get("error") or (r.get("check") not in (None, "ok"))]
    return "\n".join(out + (["", "problems:"] + bad if bad else []))


# ---------------------------------------------------------------------------- markdown


def md_table(header, lines):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c).replace("|", "\\|") for c in line) + " |" for line in lines]
    return "\n".join(out) + "\n"


def range_text(s, unit):
    if s["min"] == s["max"]:
        return f"{s['min']:.0f} {unit} throughout"
    return f"median {s['median']:.0f} {unit}, {s['min']:.0f}-{s['max']:.0f}"


def run_line(run):
    """One process's clocks and power while it timed: a line of text, or "" without NVML."""
    parts = []
    if run.get("sm_clock_mhz"):
        parts.append("SM clock " + range_text(run["sm_clock_mhz"], "MHz"))
    if run.get("board_watts"):
        parts.append("board power " + range_text(run["board_watts"], "W"))
    return "; ".join(parts)


def header_markdown(meta):
    lines = [f"- device: {meta['device']}" + (f", driver {meta['driver']}" if meta.get("driver") else ""),
             f"- date: {meta['date']} (UTC)", f"- commit: {meta['commit']}", f"- torch: {meta['torch']}"]
    if meta.get("runs"):
        lines.append(f"- {meta['note']}")
        for run in meta["runs"]:
            what = ("section " if len(run["sections"]) == 1 else "sections ") + ", ".join(run["sections"])
            clocks = run_line(run)
            lines.append(f"  - {what} ({', '.join(run['ops'])})" + (f": {clocks}" if clocks else ""))
    elif run_line(meta):
        lines.append(f"- while timing (NVML, every 50 ms): {run_line(meta)}")
    if meta.get("dram_read_GBps"):
        lines.append(f"- DRAM read limit: {fmt(meta['dram_read_GBps'])} GB/s, {meta['dram_read']}")
    return "\n".join(lines) + "\n"


def how_measured(meta):
    timing = meta.get("timing")
    if meta["device"] == "cpu":
        return ("**No CUDA GPU: these are timings of the CPU reference implementation (plain C++ loops), not the "
                "CUDA kernels. They show that the benchmark runs; they say nothing about the kernels' speed.**\n")
    text = ("Each case runs the bankops operator once per layout and its torch peer in the same process, the peer "
            "timed again right before each layout, so that each ratio compares two timings taken back to back. "
            "*ratio* is peer ms / bankops ms (above 1: bankops is faster); *of copy* is bankops' GB/s (input + "
            "output bytes) over `y.copy_(x)`'s for as many bytes in the same run; every result is checked against "
            "the peer once before it is timed. How the timings are taken: [README.md](README.md).")
    if timing:
        text += (f" This run: {timing['warmup']} warm-up calls, CUDA graphs of calls lasting about "
                 f"{timing['graph_ms']:g} ms (at most {timing['graph_calls_max']} calls), the median over "
                 f"{timing['min_reps']}-{timing['max_reps']} replays within {timing['budget_s']:g} s.")
    return text + "\n"


def clock_note(row):
    """Each side's SM clock (and power) where they differ by more than MARGIN; "" elsewhere."""
    notes = []
    for key, margin in MARGIN.items():
        own, peer = row.get(key), row.get("peer_" + key)
        if own and peer and abs(own - peer) > margin * max(own, peer):
            notes.append(f"{fmt(own)} / {fmt(peer)} {UNITS[key]}")
    return ", ".join(notes)


def with_notes(header, lines, rows):
    """The table with a last column of clock notes where any row has one."""
    notes = [clock_note(r) for r in rows]
    if any(notes):
        return md_table(header + ["bankops / peer clock"], [line + [n] for line, n in zip(lines, notes)])
    return md_table(header, lines)


def peers(rows):
    return ", ".join(dict.fromkeys(f"`{r['peer']}`" for r in rows))


def best_cell(row, key="ratio"):
    """A best row's value, and its layout where that is not MODEL_LAYOUT."""
    return fmt(row.get(key)) + ("" if row["layout"] == MODEL_LAYOUT else f" ({row['layout']})")


def every_layout(title, rows):
    """The per-layout rows of a section, after its best-layout table."""
    unit = rows[0]["unit"]
    memory_bound, eager = unit == "GB/s", any("eager_ms" in r for r in rows)
    header = ["case", "dtype", "layout", "ms", unit, "peer ms", "ratio"] + (["of copy"] if memory_bound else [])
    header += ["eager ratio"] if eager else []
    lines = []
    for r in rows:
        line = [label(r), r["dtype"], r["layout"], fmt(r.get("ms")), fmt(r.get("figure")), fmt(r.get("peer_ms")),
                fmt(r.get("ratio"))]
        line += [fmt(r.get("ratio_to_copy"))] if memory_bound else []
        line += [fmt(r.get("eager_ratio"))] if eager else []
        lines.append(line + [status(r)])
    return [title, with_notes(header + ["check"], lines, rows)]


def picture(plot_dir, drawn, name):
    return [f"![{name}]({plot_dir}/{name}.png)\n"] if name in drawn else []


def ops_markdown(op, rows, plot_dir, drawn):
    """An operator's section: its cases' best layouts, the plot, then every layout."""
    memory_bound = rows[0]["unit"] == "GB/s"
    lines, bests = [], []
    for case_rows in cases_of(rows).values():
        b = best(case_rows)
        r0 = case_rows[0]
        if b is None:
            lines.append([label(r0), r0["dtype"], "no valid layout"] + ["—"] * (6 if memory_bound else 5))
            bests.append(r0)
            continue
        slowest = max(r["ms"] for r in case_rows if valid(r))
        lines.append([label(b), b["dtype"], b["layout"], fmt(b["ratio"])]
                     + ([fmt(b.get("ratio_to_copy"))] if memory_bound else [])
                     + [fmt(b["figure"]), fmt(b["ms"]), fmt(b["peer_ms"]), fmt(slowest / b["ms"])])
        bests.append(b)
    header = ["case", "dtype", "best layout", "ratio"] + (["of copy"] if memory_bound else [])
    header += [rows[0]["unit"], "ms", "peer ms", "slowest / best"]
    shape = {"gemm": " Shapes are [B,] M, N, K."}.get(op, "")
    return [f"## {op}\n", f"Against {peers(rows)}.{shape} *slowest / best*: how much the layout matters.\n",
            with_notes(header, lines, bests), *picture(plot_dir, drawn, op),
            *every_layout(f"### {op}: every layout\n", rows)]


def layers(rows):
    """Model rows per Linear layer (dtype, M, K, N) in run order: {case: its rows}."""
    out = {}
    for r in rows:
        out.setdefault((r["dtype"], *r["linear_shape"]), {}).setdefault(r["case"], []).append(r)
    return out


def graph_eager(row, key="ratio"):
    return "—" if row is None else f"{best_cell(row, key)} / {fmt(row.get('eager_' + key))}"


def models_markdown(rows, meta, plot_dir, drawn):
    """The models section: per Linear layer its three gemms and its step, best layout against torch."""
    by_layer = layers(rows)
    lines, geo = [], {}
    for (dt, m, k, n), by_case in by_layer.items():
        cells = []
        for case, _ in LAYER_CASES:
            b = best(by_case.get(case, []))
            cells.append(graph_eager(b))
            if b is not None:
                geo.setdefault((dt, case), []).append(b)
        lines.append([dt, m, k, n, *cells])
        for case in by_case:
            if case.startswith("layer, "):  # the layer under autocast: a line of its own
                b = best(by_case[case])
                lines.append([f"{dt}, {case[len('layer, '):]}", m, k, n, "", "", "", graph_eager(b)])
    for dt in dict.fromkeys(dt for dt, *_ in by_layer):
        lines.append([f"geomean {dt}", "", "", ""] + [
            f"{fmt(geomean([b['ratio'] for b in geo.get((dt, c), [])]))} / "
            f"{fmt(geomean([b['eager_ratio'] for b in geo.get((dt, c), []) if b.get('eager_ratio')]))}"
            for c, _ in LAYER_CASES])
    return [
        "## Models\n",
        "gemm as a model's Linear layer y = x @ W.t() + b calls it (x (M, K), W (N, K), dy (M, N) contiguous): "
        "the forward `x @ W.t()`, the input grad `dy @ W` and the weight grad `dy.t() @ x` on those views against "
        "`torch.matmul` on the same views, and the layer's forward with bias and backward, `bankops.nn.Linear` "
        "against `torch.nn.Linear` sharing its parameters. Cells: the best layout's ratio, CUDA graphs / eager "
        f"calls (eager: host overhead counts where it outlasts the kernel), its layout named where it is not "
        f"`{MODEL_LAYOUT}`.\n",
        md_table(["dtype", "M", "K", "N"] + [f"{what} `{c}`" if c != "layer" else what for c, what in LAYER_CASES],
                 lines),
        *picture(plot_dir, drawn, "models"),
        *every_layout("### Models: every layout (gemm rows: the product's own M, N, K; layer rows: M, K, N)\n", rows),
    ]


def inference_markdown(rows, meta, plot_dir, drawn):
    """The inference section: per decode case the best layout against torch, then every row."""
    read = meta.get("dram_read_GBps")
    lines, bests = [], []
    for case_rows in cases_of(rows).values():
        r0 = case_rows[0]
        m, k, n = r0["linear_shape"]
        b = best(case_rows)
        head = [DECODE_PRODUCTS[r0["case"]], m, k, n, r0["dtype"]]
        if b is None:
            lines.append(head + ["no valid layout"] + ["—"] * 5)
            bests.append(r0)
            continue
        lines.append(head + [b["layout"], f"{fmt(b['ratio'])} / {fmt(b.get('eager_ratio'))}",
                             f"{fmt(b['ms'] * 1e3)} / {fmt(b['peer_ms'] * 1e3)}", fmt(b.get("weight_GBps")),
                             fmt(b.get("peer_weight_GBps")), fmt(b.get("limit_fraction"))])
        bests.append(b)
    limit = (f"*of limit*: the weight's GB/s over the read limit above ({fmt(read)} GB/s)." if read else
             "This run did not measure a read limit.")
    geo = [f"{p} {fmt(geomean([b['ratio'] for b in bests if b.get('case') == c and valid(b)]))}"
           for c, p in DECODE_PRODUCTS.items() if any(b.get("case") == c for b in bests)]
    return [
        "## Inference (decode)\n",
        "A served model's layer at decode: `x @ W.t()` with x (M, K) of M tokens and the weight W (N, K) read in "
        "place, and `x @ W` of a weight stored (K, N), against `torch.matmul` on the same views. Each call reads "
        "its weight from DRAM: the timed calls take fresh (x, W) sets in turn, together larger than the L2. "
        f"*weight GB/s*: the weight's bytes over the call's graph-timed time. {limit}\n",
        md_table(["product", "M", "K", "N", "dtype", "best layout", "ratio graph / eager", "µs / torch µs",
                  "weight GB/s", "torch weight GB/s", "of limit"], lines),
        f"Geometric mean of the best layouts' ratios: {', '.join(geo)}.\n",
        *picture(plot_dir, drawn, "inference"),
        *every_layout("### Inference: every layout (shapes M, N, K)\n", rows),
    ]


def overhead_markdown(rows, meta, plot_dir, drawn):
    """The overhead section: one line per operator call, bankops' µs per call beside torch's."""
    lines = [[r["op"], label(r, case=False), "yes" if r.get("requires_grad") else "no", f"`{r['peer']}`",
              fmt(r.get("us")), fmt(r.get("torch_us")), fmt(r.get("diff_us")), status(r)] for r in rows]
    return [
        "## Per-call overhead\n",
        "Eager time per call where the host's share (Python, the dispatcher, checks, allocation, the launch) sets "
        "it: each operator on 64 x 64 float32 tensors, bankops' default layout against its torch peer, the wall "
        f"time of {span(r['calls'] for r in rows)} back-to-back calls over the calls, median over "
        f"{span(r['reps'] for r in rows if r.get('reps'))} runs. *requires_grad*: the call also records its "
        "autograd node.\n",
        md_table(["op", "shape", "requires_grad", "torch peer", "bankops µs", "torch µs", "difference µs", "check"],
                 lines),
        *picture(plot_dir, drawn, "overhead"),
    ]


def markdown(rows, meta, plot_dir, drawn, ncu=None):
    parts = [f"# bankops on {meta['device']}\n", header_markdown(meta), how_measured(meta),
             "## Summary\n",
             "Each case's best layout against its peer: min-max (median) over the cases (per-call time: bankops' "
             "µs minus torch's).\n",
             md_table(["", "against", "ratio"], summary_lines(rows)), *picture(plot_dir, drawn, "summary")]
    op_rows = [r for r in rows if section(r) == "ops"]
    for op in OPS:
        if any(r["op"] == op for r in op_rows):
            parts += ops_markdown(op, [r for r in op_rows if r["op"] == op], plot_dir, drawn)
    for name, of_section in (("models", models_markdown), ("inference", inference_markdown),
                             ("overhead", overhead_markdown)):
        chosen = [r for r in rows if section(r) == name]
        if chosen:
            parts += of_section(chosen, meta, plot_dir, drawn)
    if ncu:
        parts.append(ncu_markdown(ncu))
    return "\n".join(parts)


# ---------------------------------------------------------------------------- plots


def plots(rows, meta, plot_dir):
    """plot_dir/<section>.png (each operator of the ops section its own) and summary.png;
    returns {name: path} of those drawn ({} without matplotlib)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("note: matplotlib is not importable, no plots written")
        return {}
    os.makedirs(plot_dir, exist_ok=True)
    title = f"{meta['device']}, {meta['date']}, commit {meta['commit']}"
    figures = {}
    for op in OPS:
        chosen = [r for r in rows if section(r) == "ops" and r["op"] == op]
        if chosen:
            limit = ("of copy bandwidth (GB/s over y.copy_(x)'s)", "ratio_to_copy") if chosen[0]["unit"] == "GB/s" \
                else None
            figures[op] = dot_plot(plt, chosen, f"{op} vs {chosen[0]['peer']}\n{title}", limit)
    for name, limit in (("models", None), ("inference", ("of the DRAM read limit (weight GB/s)", "limit_fraction"))):
        chosen = [r for r in rows if section(r) == name]
        if chosen:
            has_limit = limit and any(r.get(limit[1]) for r in chosen)
            figures[name] = dot_plot(plt, chosen, f"{name} vs torch\n{title}", limit if has_limit else None)
    overhead = [dict(r, ratio=r["torch_us"] / r["us"]) for r in rows if section(r) == "overhead" and valid_us(r)]
    if overhead:
        figures["overhead"] = dot_plot(plt, overhead, f"per-call time, eager, torch µs / bankops µs\n{title}")
    lines = [(g["name"].replace("`", ""), summary_values(rows, g)) for g in SUMMARY if g["key"] != "diff_us"]
    lines = [(n, v) for n, v in lines if v]
    if lines:
        figures["summary"] = summary_plot(plt, lines, f"each case's best layout vs its peer\n{title}")
    out = {}
    for name, fig in figures.items():
        out[name] = os.path.join(plot_dir, f"{name}.png")
        fig.savefig(out[name], dpi=100)
        plt.close(fig)
    return out


def valid_us(row):
    return row.get("check") == "ok" and row.get("us") and row.get("torch_us")


MARKERS = {"none": "o", "pad": "^", "swizzle": "s"}


def dot_plot(plt, rows, title, limit=None):
    """One line per case, each layout's ratio to the peer a marker (log axis, 1 = as fast); with
    limit = (what, key), a second panel of each layout's fraction of that limit."""
    cases = list(cases_of(rows).items())
    panels = [("ratio to the peer (peer ms / ms; right of 1: bankops faster)", "ratio")] + ([limit] if limit else [])
    fig, axes = plt.subplots(1, len(panels), sharey=True, squeeze=False,
                             figsize=(6 * len(panels) + 3, 1.2 + 0.24 * len(cases)))
    for ax, (what, key) in zip(axes[0], panels):
        for layout in dict.fromkeys(r["layout"] for r in rows):
            points = [(r[key], y) for y, (_, case_rows) in enumerate(cases) for r in case_rows
                      if r["layout"] == layout and r.get(key) and r.get("check") == "ok"]
            if points:
                ax.scatter(*zip(*points), marker=MARKERS.get(layout, "o"), label=layout, alpha=0.8, s=24)
        ax.axvline(1.0, color="black", linewidth=1)
        if key == "ratio":
            plain_log_axis(ax)
        ax.set_xlabel(what, fontsize=8)
        ax.grid(axis="x", alpha=0.3)
    axes[0][0].set_yticks(range(len(cases)), [f"{lab}  {dt}" for (_, lab, dt), _ in cases], fontsize=7)
    axes[0][0].set_ylim(len(cases) - 0.5, -0.5)
    axes[0][-1].legend(title="layout", fontsize=7, loc="best")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig


def plain_log_axis(ax):
    """A log x axis labelled 0.1, 0.2, 0.5, 1, 2, 5 (not 2 x 10^-1)."""
    from matplotlib.ticker import FuncFormatter

    def plain(v, _):
        return f"{v:g}" if round(v / 10 ** math.floor(math.log10(v))) in (1, 2, 5) else ""

    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(plain))
    ax.xaxis.set_minor_formatter(FuncFormatter(plain))
    ax.tick_params(axis="x", which="both", labelsize=7)


def summary_plot(plt, lines, title):
    """Each summary line's range of best-layout ratios (a bar from min to max, its median a dot)."""
    fig, ax = plt.subplots(figsize=(9, 1 + 0.4 * len(lines)))
    for y, (_, values) in enumerate(lines):
        ax.plot([min(values), max(values)], [y, y], color="tab:blue", linewidth=6, alpha=0.4, solid_capstyle="butt")
        ax.plot([statistics.median(values)], [y], "o", color="tab:blue")
    ax.axvline(1.0, color="black", linewidth=1)
    plain_log_axis(ax)
    ax.set_yticks(range(len(lines)), [name for name, _ in lines], fontsize=8)
    ax.set_ylim(len(lines) - 0.5, -0.5)
    ax.set_xlabel("ratio to the peer, min-max and median (right of 1: bankops faster)", fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig


def bank_map(path):
    """The README's picture: the transpose's tile-column read under none and swizzle, as the bank
    model serves it (bankops.plot_banks)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    import bankops

    shape = dict(shape=(64, 64))
    rows = bankops.explain("transpose", "none", torch.float32, **shape).rows
    worst = max(range(len(rows)), key=lambda i: rows[i]["worst_wavefronts"])  # the tile-column read
    fig, axes = plt.subplots(2, 1, figsize=(12, 13), gridspec_kw=dict(height_ratios=[32, 2.5]))
    for ax, layout in zip(axes, ("none", "swizzle")):
        bankops.plot_banks("transpose", layout, worst, torch.float32, ax=ax, **shape)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------------------- Nsight Compute


def ncu_markdown(doc):
    """The predicted-vs-measured tables of bench/ncu.py's <gpu>.ncu.json."""
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
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", help="results files (default: every bench/results/*.json)")
    ap.add_argument("--merge", metavar="OUT", help="write OUT from the files (one device, commit and torch)")
    ap.add_argument("--note", default="", help="--merge: how the files' processes ran, for the metadata and the .md")
    ap.add_argument("--readme", action="store_true", help="print the README's summary table")
    ap.add_argument("--bank-map", metavar="PNG", help="draw the README's bank map (bench/plots/bank_map.png)")
    args = ap.parse_args()
    files = args.files or results_files()
    if args.bank_map:
        bank_map(args.bank_map)
    elif args.readme:
        print(readme_table(files), end="")
    elif args.merge:
        if not args.note:
            ap.error("--merge needs --note: how the processes ran (one machine? one session?)")
        with open(args.merge, "w") as f:
            json.dump(merge([load(p) for p in args.files], args.note), f, indent=1, allow_nan=False)
            f.write("\n")
        print("\n".join([args.merge, *render(args.merge)]))
    else:
        for path in files:
            print("\n".join([path, *render(path)]))


if __name__ == "__main__":
    main()
