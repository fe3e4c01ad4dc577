"""One of bankops.options off against on, in one process, on the bench's cases (bench/run.py's): the
A/B that design notes' "one process, off against on" figures come from.

    python3 bench/ab.py prefetch [--sections inference] [--ops gemm] [--match 4096] [--reps N] [--out FILE]

Per case: the peer, then the option off and on in turn, twice each (off, on, off, on), each at every
layout; a setting's time is its best layout's in the faster of its two turns, so that neither side
has the GPU cooler or the other's warm-up. Graph-timed on a GPU, and eagerly where the bench times the
case eagerly. Prints a markdown row a case (ms, the option's speedup off / on, each against the peer);
--out writes the rows as JSON. Without a GPU it times the CPU cases (the CPU reference ignores the
options: a check of the harness, not of a kernel).
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(1, os.path.dirname(HERE))  # the working tree's bankops, as run.py times it

import torch  # noqa: E402

import bankops  # noqa: E402
import cases  # noqa: E402
import report  # noqa: E402
import run  # noqa: E402
from bankops._options import NAMES  # noqa: E402

SWITCHES = [n for n in NAMES if n not in ("plan", "refuse_tma")]
TURNS = (False, True, False, True)


def time_case(case, option, device, max_reps):
    """The case's row: the peer's ms and, for the option off and on, the best layout's ms (and eager
    ms where the case has them), each the faster of its two turns."""
    cuda = device == "cuda"
    sets = [case.make(device) for _ in range(case.copies)]

    def timed(fn, graph=True):
        return run.time_ms(run.rotation(fn, sets), cuda, max_reps, graph, cycle=len(sets))[0]

    row = {"case": f"{case.model_case or case.op} {case.label}", "dtype": str(case.dtype).replace("torch.", ""),
           "peer_ms": timed(case.peer)}
    best = {}
    for on in TURNS:
        with bankops.options(**{option: on}):
            ms, layout = min((timed(lambda inp, layout=layout: case.run(inp, layout)), layout)
                             for layout in bankops.LAYOUTS)
            eager = timed(lambda inp: case.run(inp, layout), graph=False) if case.eager else None
        if on not in best or ms < best[on][0]:
            best[on] = (ms, layout, eager)
    for on, (ms, layout, eager) in best.items():
        side = "on" if on else "off"
        row.update({f"{side}_ms": ms, f"{side}_layout": layout, f"{side}_eager_ms": eager})
    if case.eager:
        row["eager_peer_ms"] = timed(case.peer, graph=False)
    if case.weight_bytes:
        for side in ("off", "on"):
            row[f"{side}_weight_GBps"] = case.weight_bytes / row[f"{side}_ms"] / 1e6
    return row


def markdown(rows, option):
    head = (f"| case | dtype | peer ms | {option}=False ms | {option}=True ms | speedup | against the peer, "
            "off / on | eager, off / on |")
    lines = [head, "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        eager = ""
        if r.get("eager_peer_ms"):
            eager = f"{r['eager_peer_ms'] / r['off_eager_ms']:.3g} / {r['eager_peer_ms'] / r['on_eager_ms']:.3g}"
        lines.append(f"| {r['case']} | {r['dtype']} | {r['peer_ms']:.4g} | {r['off_ms']:.4g} | {r['on_ms']:.4g} | "
                     f"{r['off_ms'] / r['on_ms']:.3f} | {r['peer_ms'] / r['off_ms']:.3g} / "
                     f"{r['peer_ms'] / r['on_ms']:.3g} | {eager} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("option", choices=SWITCHES, help="the switch of bankops.options to turn off and on")
    ap.add_argument("--sections", default=",".join(cases.SECTIONS[:3]), help="comma-separated of ops, models, "
                    "inference (bench/run.py's; default all three)")
    ap.add_argument("--ops", default=None, help="comma-separated subset of transpose,reduce_sum,gemm,linear")
    ap.add_argument("--match", default="", help="only cases whose name holds this text (e.g. 'decode 64x')")
    ap.add_argument("--reps", type=int, default=20, help="most repetitions per timing")
    ap.add_argument("--out", default=None, help="the rows as JSON")
    args = ap.parse_args(argv)
    sections = set(args.sections.split(","))
    if not sections <= set(cases.SECTIONS[:3]):
        ap.error(f"--sections: choose from {','.join(cases.SECTIONS[:3])}")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # as run.py: float32 against true float32
    todo = [c for c in (cases.gpu_cases() if device == "cuda" else cases.cpu_cases())
            if c.section in sections and (not args.ops or c.op in args.ops.split(","))]
    todo = [c for c in todo if args.match in f"{c.model_case or c.op} {c.label}"]
    torch.manual_seed(0)
    rows = []
    for case in todo:
        rows.append(time_case(case, args.option, device, args.reps))
        print(markdown(rows[-1:], args.option).splitlines()[-1], flush=True)
    where = torch.cuda.get_device_name() if device == "cuda" else "the CPU"
    print(f"\n{args.option}: {len(rows)} cases on {where}, commit {report.build_commit(os.path.dirname(HERE))}\n")
    print(markdown(rows, args.option))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)
    return rows


if __name__ == "__main__":
    main()
