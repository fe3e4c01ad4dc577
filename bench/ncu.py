"""Bank conflicts, predicted and measured: every operator x layout x dtype once under Nsight
Compute, beside bankops.explain's prediction and the layout's runtime; and the bank probe,
single warp-wide accesses of chosen patterns, beside the bank model.

    python3 bench/ncu.py [--out DIR] [--quick] [--ops transpose,reduce_sum,gemm] [--no-probe]

Per case and per kind of shared-memory instruction (ld: LDS, st: STS, ldsm: LDSM, ldgsts:
the shared write of LDGSTS), the model's wavefronts per instruction are put beside two
measurements of the same launches: the SASS-instrumented count
`smsp__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_op_<kind>.sum`, which follows from each
instruction's lane addresses, and the hardware counter
`l1tex__data_pipe_lsu_wavefronts_mem_shared_op_<kind>.sum`, which also counts the cycles a
data bank spends on other L1 traffic at the same time; both over
`smsp__sass_inst_executed_op_<kind>.sum`. Writes the GPU's bench/results/<gpu>.ncu.json (or
DIR/<gpu>.ncu.json) and the tables into its bench/results/<gpu>.md. Needs a CUDA GPU and ncu (PATH
or /usr/local/cuda/bin).
"""
import argparse
import csv
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(1, ROOT)

import torch  # noqa: E402

import bankops  # noqa: E402
import report  # noqa: E402
from run import eager_ms  # noqa: E402
from bankops.explain import OPS as KINDS  # noqa: E402
from bankops.explain import explain, totals_of  # noqa: E402

_INSTRUCTIONS = {"ld": "smsp__sass_inst_executed_op_shared_ld", "st": "smsp__sass_inst_executed_op_shared_st",
                 "ldsm": "smsp__sass_inst_executed_op_ldsm", "ldgsts": "smsp__sass_inst_executed_op_ldgsts"}
METRICS = {}
for _k in KINDS:
    METRICS[f"{_k}_instructions"] = _INSTRUCTIONS[_k] + ".sum"
    METRICS[f"{_k}_sass_wavefronts"] = f"smsp__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_op_{_k}.sum"
for _k in KINDS:  # ncu may know no hardware counter for some kinds: available_metrics() drops those
    METRICS[f"{_k}_wavefronts"] = f"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{_k}.sum"
    METRICS[f"{_k}_conflicts"] = f"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{_k}.sum"
TOLERANCE = 0.10  # predicted vs measured wavefronts per instruction


def cases(quick=False, ops=None):
    """(op, dtype, shape kwargs for explain) for every kind of launch the operators make; sizes
    are whole tiles so that every instruction runs with full warps (the realigning transpose
    issues every shared-memory instruction from every lane at any size). ``ops``: only these."""
    f32, f16, bf16 = torch.float32, torch.float16, torch.bfloat16
    out = []
    for dt in (f32,) if quick else (torch.int8, f16, bf16, f32, torch.float64, torch.complex128):
        out.append(("transpose", dt, dict(shape=(4096, 4096))))
    if not quick:  # odd rows: the realigning kernel, whose byte store phase reads words
        out.append(("transpose", torch.int8, dict(shape=(4097, 8191))))
    for dt in (f32,) if quick else (f16, bf16, f32, torch.float64, torch.int32):
        out.append(("reduce_sum", dt, dict(shape=(1 << 24,))))
    for dt in (f32,) if quick else (f16, f32):
        out.append(("reduce_sum", dt, dict(shape=(8192, 1024), dim=-1)))
        out.append(("reduce_sum", dt, dict(shape=(1024, 8192), dim=0)))
        out.append(("reduce_sum", dt, dict(shape=(64, 512, 256), dim=1)))
    for dt in (f32,) if quick else (f16, bf16, f32, torch.float64):  # 16-bit swizzle: the Hopper kernel's 128x64 tile
        out.append(("gemm", dt, dict(m=1024, n=1024, k=1024)))
    if not quick:  # float32's 128x256 tile, which copies A one element per cp.async; the
        # Hopper kernel (swizzle; none and pad run mma.sync's 128x256 tile there)
        out.append(("gemm", f32, dict(m=2048, n=2048, k=2048)))
        out.append(("gemm", f16, dict(m=2048, n=2048, k=2048)))
        out.append(("gemm", f16, dict(m=2048, n=2048, k=2047)))  # odd K: A copied into aligned rows first
        out.append(("gemm", f16, dict(m=1024, n=2048, k=1024)))  # the Hopper kernel's 128x128 tile
        out.append(("gemm", bf16, dict(m=4096, n=4096, k=4096)))  # its persistent blocks, C tiles for TMA stores
        # decode, x @ W.t(): the few-rows kernel (its windows of x and partial tile, split-K), 32
        # rows on mma.sync's split tiles; the Hopper kernel's thin tile (swizzle; mma.sync's tiles
        # on none and pad) split at 64 rows, unsplit against 14336 columns (its C tile half past C)
        for dt, m in ((f32, 8), (bf16, 8), (bf16, 32), (bf16, 64)):
            out.append(("gemm", dt, dict(m=m, n=4096, k=4096, b_transposed=True)))
        out.append(("gemm", bf16, dict(m=32, n=14336, k=4096, b_transposed=True)))
        # decode, x @ W in float32: the few-rows kernel reading the weight along n (x's 16-byte
        # reads at a lane's k, the warps' sums meeting in shared memory)
        for m in (8, 32):
            out.append(("gemm", f32, dict(m=m, n=4096, k=4096)))
        # float32 x @ W.t(): 16 rows on the few-rows ring along k, 64 rows on the FFMA kernel's
        # 64-row tiles split across a cluster (64x64; 64x128 against 14336 columns)
        out.append(("gemm", f32, dict(m=16, n=4096, k=4096, b_transposed=True)))
        for n in (4096, 14336):
            out.append(("gemm", f32, dict(m=64, n=n, k=4096, b_transposed=True)))
        # the Hopper kernel split across a cluster (128 rows against a weight), and its 128x192
        # persistent blocks (a weight gradient of 96 tiles over k = 16384)
        out.append(("gemm", bf16, dict(m=128, n=4096, k=4096, b_transposed=True)))
        out.append(("gemm", bf16, dict(m=3072, n=768, k=16384, a_transposed=True)))
        # 192x96 tiles on three consumers (x @ W.t() at 1536^3: 64-byte swizzled C blocks), 128x144
        # (dense C rows), and 128x192 with a split last wave (partials through the peer's ring)
        out.append(("gemm", bf16, dict(m=1536, n=1536, k=1536, b_transposed=True)))
        out.append(("gemm", bf16, dict(m=1156, n=3712, k=1000, b_transposed=True)))
        out.append(("gemm", bf16, dict(m=2048, n=2304, k=2048)))
    return [c for c in out if ops is None or c[0] in ops]


def probes():
    """(name, width, kind, 32 lane shared-memory byte addresses with -1 for a lane that sits out,
    for kind "ldgsts" (cp.async) the 32 lanes' global source offsets, and whether the cp.async
    takes the zero-filling form): the seed notes' cases,
    the ones that decide how 8 and 16-byte accesses are split into phases, and cp.async with
    the gemm kernels' patterns on both sides."""
    lanes = range(32)
    col = lambda stride: [stride * r for r in lanes]  # noqa: E731
    half = lambda lo, hi: [lo(i) if i < 16 else hi(i - 16) for i in lanes]  # noqa: E731
    out = [
        ("4B: stride 1", 4, "ld", col(4)),
        ("4B: stride 2 words", 4, "ld", col(8)),
        ("4B: stride 33 words (padded column)", 4, "ld", col(132)),
        ("4B: stride 32 words (column)", 4, "ld", col(128)),
        ("4B: broadcast", 4, "ld", [256] * 32),
        ("4B: two words, one bank", 4, "ld", half(lambda i: 0, lambda i: 128)),
        ("4B: stride 32 words, store", 4, "st", col(128)),
        ("4B: same word, store", 4, "st", [64] * 32),
        ("1B: 32 consecutive bytes", 1, "ld", col(1)),
        ("1B: stride 128 bytes", 1, "ld", col(128)),
        ("2B: stride 64 bytes (f16 32x32 column)", 2, "ld", col(64)),
        ("8B: 32 consecutive", 8, "ld", col(8)),
        ("8B: broadcast", 8, "ld", [512] * 32),
        ("8B: halves read X and X+8", 8, "ld", half(lambda i: 0, lambda i: 8)),
        ("8B: halves read X and X+128", 8, "ld", half(lambda i: 0, lambda i: 128)),
        ("8B: lanes i and i+16 share (16 consecutive)", 8, "ld", [8 * (i % 16) for i in lanes]),
        ("8B: halves swapped (lane i -> (i+16)%32)", 8, "ld", [8 * ((i + 16) % 32) for i in lanes]),
        ("8B: lane pairs share (i/2)", 8, "ld", [8 * (i // 2) for i in lanes]),
        ("8B: stride 2 (16 bytes)", 8, "ld", col(16)),
        ("8B: stride 33 (padded column)", 8, "ld", col(264)),
        ("8B: stride 32 (column)", 8, "ld", col(256)),
        ("8B: lanes 0-15 only", 8, "ld", [8 * i if i < 16 else -1 for i in lanes]),
        ("8B: even lanes only", 8, "ld", [8 * i if i % 2 == 0 else -1 for i in lanes]),
        ("8B: even lanes only, lane 2j -> j", 8, "ld", [4 * i if i % 2 == 0 else -1 for i in lanes]),
        ("8B: quads share (i/4)", 8, "ld", [8 * (i // 4) for i in lanes]),
        ("8B: pairs share, stride 2", 8, "ld", [16 * (i // 2) for i in lanes]),
        ("8B: pairs share but lane 31", 8, "ld", [8 * (i // 2) if i < 31 else 160 for i in lanes]),
        ("8B: lanes i and i^2 share", 8, "ld", [8 * ((i & 1) | (i >> 1 & ~1)) for i in lanes]),
        ("8B: 32 consecutive, store", 8, "st", col(8)),
        ("8B: pairs share (i/2), store", 8, "st", [8 * (i // 2) for i in lanes]),
        ("8B: lanes i and i+16 share, store", 8, "st", [8 * (i % 16) for i in lanes]),
        ("16B: 32 consecutive", 16, "ld", col(16)),
        ("16B: broadcast", 16, "ld", [1024] * 32),
        ("16B: lanes i, i+8, i+16, i+24 share", 16, "ld", [16 * (i % 8) for i in lanes]),
        ("16B: quarters read X, X+16, X+32, X+48", 16, "ld", [16 * (i // 8) for i in lanes]),
        ("16B: lane groups of 4 share (i/4)", 16, "ld", [16 * (i // 4) for i in lanes]),
        ("16B: pairs share (i/2)", 16, "ld", [16 * (i // 2) for i in lanes]),
        ("16B: even lanes only, lane 2j -> j", 16, "ld", [8 * i if i % 2 == 0 else -1 for i in lanes]),
        ("16B: pairs share, stride 2", 16, "ld", [32 * (i // 2) for i in lanes]),
        ("16B: lanes i and i^2 share (gemm B fragment)", 16, "ld", [16 * ((i & 1) | (i >> 1 & ~1)) for i in lanes]),
        ("16B: lanes i and i^2 share but lane 31", 16, "ld", [16 * ((i & 1) | (i >> 1 & ~1)) if i < 31 else 512 for i in lanes]),
        ("16B: lanes i and i^4 share", 16, "ld", [16 * ((i & 3) | (i >> 1 & ~3)) for i in lanes]),
        ("16B: stride 2 (32 bytes)", 16, "ld", col(32)),
        ("16B: 128-byte rows, column (seed 003 none)", 16, "ld", col(128)),
        ("16B: 144-byte rows, column (seed 003 pad)", 16, "ld", col(144)),
        ("16B: Swizzle<3,3,3> column (seed 003 swizzle)", 16, "ld", [128 * r + 16 * ((r % 8) ^ 0) for r in lanes]),
        ("16B: 32 consecutive, store", 16, "st", col(16)),
        ("16B: 128-byte rows, column, store", 16, "st", col(128)),
        ("16B: pairs share (i/2), store", 16, "st", [16 * (i // 2) for i in lanes]),
    ]
    out = [(*p, None, False) for p in out]
    rows = lambda n, stride: [stride * (i // (32 // n)) + 16 * (i % (32 // n)) for i in lanes]  # noqa: E731
    g_rows = 2048  # global row pitch of the source: rows 2 KiB apart, as in a K = 1024 half matrix
    out += [(*p, False) for p in [
        ("cp.async 16B: both sides contiguous", 16, "ldgsts", col(16), col(16)),
        ("cp.async 16B: 8 lanes only", 16, "ldgsts", [16 * i if i < 8 else -1 for i in lanes],
         [16 * i if i < 8 else -1 for i in lanes]),
        ("cp.async 16B: from 2 rows of 256 B", 16, "ldgsts", col(16), rows(2, g_rows)),
        ("cp.async 16B: from 8 rows of 64 B", 16, "ldgsts", col(16), rows(8, g_rows)),
        ("cp.async 16B: from 32 rows", 16, "ldgsts", col(16), col(g_rows)),
        ("cp.async 16B: from 64 bytes past a 128-byte line", 16, "ldgsts", col(16), [64 + 16 * i for i in lanes]),
        ("cp.async 16B: to 16 bytes past a 128-byte line", 16, "ldgsts", [16 + 16 * i for i in lanes], col(16)),
        ("cp.async 16B: to 32 bytes past a 128-byte line", 16, "ldgsts", [32 + 16 * i for i in lanes], col(16)),
        ("cp.async 16B: to 64 bytes past a 128-byte line", 16, "ldgsts", [64 + 16 * i for i in lanes], col(16)),
        ("cp.async 16B: from 16 bytes past a 128-byte line", 16, "ldgsts", col(16), [16 + 16 * i for i in lanes]),
        ("cp.async 16B: to 2 rows of 256 B + 16 B pad", 16, "ldgsts", rows(2, 272), col(16)),
        ("cp.async 16B: 8 rows of 64 B + 16 B pad", 16, "ldgsts", rows(8, 80), rows(8, g_rows)),
        ("cp.async 16B: 8 rows of 64 B, swizzled", 16, "ldgsts", [16 * (i ^ (i >> 3 & 3)) for i in lanes],
         rows(8, g_rows)),
        ("cp.async 16B: to a column of 128-byte rows", 16, "ldgsts", col(128), col(16)),
        ("cp.async 8B: both sides contiguous", 8, "ldgsts", col(8), col(8)),
        ("cp.async 4B: both sides contiguous", 4, "ldgsts", col(4), col(4)),
        # 4-byte copies that transpose (the 128x256 gemm tile's k-major staging): lanes 2i and
        # 2i+1 copy bytes 0 and 16 of global row i into tile rows 0 and 4 of one column.
        ("cp.async 4B: 16 rows x 2 lanes -> rows 0 and 4 of 512 B (gemm none)", 4, "ldgsts",
         [(i % 2) * 2048 + 4 * (i // 2) for i in lanes], [g_rows * (i // 2) + 16 * (i % 2) for i in lanes]),
        ("cp.async 4B: 16 rows x 2 lanes -> rows 0 and 4, other banks", 4, "ldgsts",
         [(i % 2) * 2064 + 4 * (i // 2) for i in lanes], [g_rows * (i // 2) + 16 * (i % 2) for i in lanes]),
        ("cp.async 4B: 16 rows x 2 lanes -> one 128-byte line", 4, "ldgsts", col(4),
         [g_rows * (i // 2) + 16 * (i % 2) for i in lanes]),
        ("cp.async 4B: 4 rows x 8 lanes -> 8 rows of 512 B", 4, "ldgsts", [512 * (i % 8) + 4 * (i // 8) for i in lanes],
         [g_rows * (i // 8) + 4 * (i % 8) for i in lanes]),
        ("cp.async 4B: 4 rows x 8 lanes -> 8 rows of 528 B", 4, "ldgsts", [528 * (i % 8) + 4 * (i // 8) for i in lanes],
         [g_rows * (i // 8) + 4 * (i % 8) for i in lanes]),
        ("cp.async 4B: 32 rows -> one 128-byte line", 4, "ldgsts", col(4), col(g_rows)),
        ("cp.async 4B: 32 rows -> a column of 512 B rows", 4, "ldgsts", col(512), col(g_rows)),
    ]]
    # The zero-filling form (source size in a register), as kernels with predicated tails issue it.
    out += [
        ("cp.async 16B zero-filling: both sides contiguous", 16, "ldgsts", col(16), col(16), True),
        ("cp.async 16B zero-filling: from 8 rows of 64 B", 16, "ldgsts", col(16), rows(8, g_rows), True),
        ("cp.async 16B zero-filling: to 64 bytes past a 128-byte line", 16, "ldgsts", [64 + 16 * i for i in lanes],
         col(16), True),
    ]
    return out


def inputs(op, dtype, kw):
    if op == "gemm":
        b = torch.randn(kw["n"], kw["k"], device="cuda").t() if kw.get("b_transposed") else \
            torch.randn(kw["k"], kw["n"], device="cuda")
        a = torch.randn(kw["k"], kw["m"], device="cuda").t() if kw.get("a_transposed") else \
            torch.randn(kw["m"], kw["k"], device="cuda")
        return [a.to(dtype), b.to(dtype)]
    if dtype.is_floating_point or dtype.is_complex:
        return [torch.randn(kw["shape"], device="cuda").to(dtype)]
    return [torch.randint(-100, 100, kw["shape"], device="cuda").to(dtype)]


# 16-bit gemm's swizzle layout on the mma.sync kernel: on Hopper swizzle runs the wgmma kernel,
# whose tiles TMA fills and the tensor cores read without the warps' shared-memory
# instructions, so this row is where swizzle's ldmatrix reads and cp.async copies show.
MMA_SYNC = "swizzle/mma.sync"


def layouts(op, dtype, kw):
    # decode (128 rows or fewer): mma.sync splits k on the H100, which explain(hopper=False) does not plan
    hopper = op == "gemm" and dtype in (torch.float16, torch.bfloat16) and kw["m"] > 128
    return bankops.LAYOUTS + ((MMA_SYNC,) if hopper else ())


def model(op, layout, dtype, kw):
    if layout == MMA_SYNC:
        return explain(op, "swizzle", dtype, hopper=False, **kw)
    return explain(op, layout, dtype, **kw)


def call(op, layout, kw, xs):
    if layout == MMA_SYNC:
        with bankops.options(wgmma=False):
            return bankops.gemm(*xs, layout="swizzle")
    if op == "gemm":
        return bankops.gemm(*xs, layout=layout)
    if op == "reduce_sum":
        return bankops.reduce_sum(xs[0], kw.get("dim"), layout=layout)
    return bankops.transpose(xs[0], layout=layout)


def each_launch(quick, ops):
    for op, dtype, kw in cases(quick, ops):
        for layout in layouts(op, dtype, kw):
            yield op, dtype, kw, layout


def worker(quick, ops, probe):
    """Runs under ncu: each case (or each probe) once, in order."""
    torch.manual_seed(0)
    if probe:
        for _, width, kind, addr, src, zfill in probes():
            torch.ops.bankops._smem_probe(torch.tensor([addr], device="cuda"), width, kind == "st",
                                          None if src is None else torch.tensor([src], device="cuda"), zfill)
        torch.cuda.synchronize()
        return
    for op, dtype, kw, layout in each_launch(quick, ops):
        xs = inputs(op, dtype, kw)
        call(op, layout, kw, xs)
        torch.cuda.synchronize()


def median_ms(fn, reps=20):
    for _ in range(3):
        fn()
    return eager_ms(fn, reps)


def ncu_binary():
    return shutil.which("ncu") or "/usr/local/cuda/bin/ncu"


def available_metrics():
    """METRICS without those this GPU's ncu does not know (an unknown name fails the whole run)."""
    try:
        text = subprocess.run([ncu_binary(), "--query-metrics"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return dict(METRICS)
    known = set(re.findall(r"\b[a-z0-9]+__[a-z0-9_]+", text))
    return {k: m for k, m in METRICS.items() if m.rsplit(".", 1)[0] in known} if known else dict(METRICS)


def profile(quick, ops, probe, metrics, out_dir):
    """Runs the worker under ncu; returns one dict of metric values per profiled launch, in order."""
    log = os.path.join(out_dir, "ncu_probe.csv" if probe else "ncu_raw.csv")
    cmd = [ncu_binary(), "--clock-control", "none", "--csv", "--log-file", log, "--kernel-name-base", "demangled",
           "--kernel-name", "regex:smem_probe" if probe else "regex:bankops::", "--metrics", ",".join(metrics.values()),
           sys.executable, os.path.abspath(__file__), "--worker"] + (["--quick"] if quick else []) + (
               ["--ops", ",".join(ops)] if ops else []) + (["--probe"] if probe else [])
    subprocess.run(cmd, check=True)
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
    by_name = {v: k for k, v in metrics.items()}
    return [dict({by_name[m]: v for m, v in launches[i].items() if m in by_name}, kernel=names[i]) for i in sorted(launches)]


def ratio(wavefronts, instructions):
    return wavefronts / instructions if instructions and wavefronts is not None else None


def close(pred, meas):
    return pred is not None and meas is not None and abs(pred - meas) <= TOLERANCE * meas


def compare(kind, predicted, measured):
    """One kind of instruction of one case: the model's and both measurements' wavefronts per
    instruction, instruction counts, and whether they agree."""
    p_instr, m_instr = predicted.get("instructions", 0), measured.get(f"{kind}_instructions", 0.0)
    out = dict(predicted=ratio(predicted.get("wavefronts"), p_instr),
               sass=ratio(measured.get(f"{kind}_sass_wavefronts"), m_instr),
               hardware=ratio(measured.get(f"{kind}_wavefronts"), m_instr),
               instructions_predicted=p_instr, instructions_measured=m_instr)
    out["instructions_agree"] = p_instr == m_instr
    out["agrees"] = out["instructions_agree"] and (p_instr == 0 or close(out["predicted"], out["sass"]))
    out["agrees_hardware"] = out["instructions_agree"] and (p_instr == 0 or close(out["predicted"], out["hardware"]))
    return out


def counted_totals(rep):
    """The report's per-launch totals over the instructions the shared-memory counters see: all
    but those that reach a cluster peer's shared memory (rows marked ``peer``: split-K's loads of
    the peers' partial tiles, a split last wave's partial stores into the peer), which the
    counters count on neither SM (measured: a split of s blocks shows 1/s of its sums' loads)."""
    return totals_of([r for r in rep.rows if not r["peer"]])


def run_cases(args, metrics):
    torch.manual_seed(0)
    plan = []
    for op, dtype, kw, layout in each_launch(args.quick, args.ops):
        rep = model(op, layout, dtype, kw)
        xs = inputs(op, dtype, kw)
        ms = median_ms(lambda: call(op, layout, kw, xs))
        # One launch per kernel the trace names, and the copy kernel before a repacked gemm
        # (it uses no shared memory, so the trace has no row of it).
        kernels = {r["kernel"] for r in rep.rows}
        plan.append((op, dtype, kw, layout, rep, ms, len(kernels) + sum(k.endswith("/repacked") for k in kernels)))
        del xs
    measured = profile(args.quick, args.ops, False, metrics, args.out)
    expected = sum(p[-1] for p in plan)
    if len(measured) != expected:
        sys.exit(f"bench/ncu.py: ncu profiled {len(measured)} launches, the traces describe {expected}")
    rows, i = [], 0
    for op, dtype, kw, layout, rep, ms, n_launches in plan:
        got = measured[i: i + n_launches]
        i += n_launches
        total = {k: sum(g.get(k, 0.0) for g in got) for k in metrics}
        predicted = counted_totals(rep)
        kinds = {k: compare(k, predicted.get(k, {}), total) for k in KINDS
                 if predicted.get(k, {}).get("instructions") or total.get(f"{k}_instructions")}
        rows.append(dict(op=op, dtype=str(dtype).replace("torch.", ""), layout=layout, ms=ms, problem=rep.problem,
                         shape={k: list(v) if isinstance(v, tuple) else v for k, v in kw.items()},
                         kernels=[g["kernel"].split("(")[0] for g in got], measured=total, kinds=kinds))
    return rows


def run_probes(args, metrics):
    found = profile(False, None, True, metrics, args.out)
    rows = []
    for (name, width, kind, addr, src, zfill), got in zip(probes(), found):
        active = sum(1 << i for i, a in enumerate(addr) if a >= 0)
        wavefronts, ideal = torch.ops.bankops._bank_cost(torch.tensor([max(a, 0) for a in addr]), width, active,
                                                         kind != "ld", None if src is None else
                                                         torch.tensor([max(a, 0) for a in src]), zfill).tolist()
        row = compare(kind, {"instructions": 1, "wavefronts": wavefronts}, got)
        rows.append(dict(row, name=name, width=width, op=kind, addr=addr, src=src, zfill=zfill, ideal=ideal))
    if len(found) != len(rows):
        sys.exit(f"bench/ncu.py: ncu profiled {len(found)} probe launches, expected {len(rows)}")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=report.RESULTS, help="where <gpu>.ncu.json goes (default: bench/results/)")
    ap.add_argument("--quick", action="store_true", help="float32 only")
    ap.add_argument("--ops", type=lambda v: v.split(","), help="comma-separated operators (default: all)")
    ap.add_argument("--no-probe", action="store_true", help="skip the single-pattern bank probes")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args.quick, args.ops, args.probe)
    if not torch.cuda.is_available():
        sys.exit("bench/ncu.py: needs a CUDA GPU (and Nsight Compute)")
    os.makedirs(args.out, exist_ok=True)
    metrics = available_metrics()
    missing = sorted(set(METRICS.values()) - set(metrics.values()))
    doc = dict(report.metadata(torch.cuda.get_device_name(), ROOT), tolerance=TOLERANCE, metrics=metrics,
               unavailable=missing, probes=[] if args.no_probe else run_probes(args, metrics),
               results=run_cases(args, metrics))
    with open(report.ncu_path(doc["device"], args.out), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    report.splice_ncu(doc)
    print(report.ncu_markdown(doc))


if __name__ == "__main__":
    main()
