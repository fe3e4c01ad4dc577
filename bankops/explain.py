"""Why one layout is faster: the shared-memory instructions each operator's kernels issue,
with the bank conflicts the package's bank model predicts for them.

The rows come from ``torch.ops.bankops._smem_trace``: the C++ side replays each kernel's
own lane -> tile-coordinate functions through the same layout functor the kernel is
compiled with, one warp at a time, and asks the bank model (kernels/bank_model.h) how
many wavefronts each warp-wide access needs.
"""
import math
import operator
from typing import NamedTuple, Optional

import torch

from . import _C  # noqa: F401

__all__ = ["explain", "gemm_route", "GemmRoute", "Candidate", "Report"]

_STATS = ("op", "width", "count", "wavefronts", "ideal", "iterations", "worst_wavefronts", "peer", "bytes")
# kernels/smem_trace.h's SmemOp, as Nsight Compute names the kinds: lds, sts, ldmatrix and
# cp.async's write into shared memory.
OPS = ("ld", "st", "ldsm", "ldgsts")


def _device(device=None):
    """The CUDA device a route is planned for: ``device``, else the current one (None without a GPU)."""
    if device is not None and torch.device(device).type == "cuda":
        index = torch.device(device).index
        return index if index is not None else torch.cuda.current_device()
    return torch.cuda.current_device() if torch.cuda.is_available() else None


def _cc(cc=None, hopper=None, device=None):
    """Compute capability as 10 * major + minor: ``cc``; else 90 (hopper=True: an H100) or 80
    (hopper=False: a GPU without the Hopper kernel, an A100); else the GPU's; else an H100's."""
    if cc is not None:
        return int(cc)
    if hopper is not None:
        return 90 if hopper else 80
    d = _device(device)
    if d is not None:
        major, minor = torch.cuda.get_device_capability(d)
        return 10 * major + minor
    return 90


def _num_sms(num_sms=None, device=None):
    if num_sms is not None:
        return int(num_sms)
    d = _device(device)
    if d is not None:
        return torch.cuda.get_device_properties(d).multi_processor_count
    return 132  # an H100 SXM: the device the benchmarks are taken on


def _room(named, device=None):
    """The blocks the GPU holds in thread-block clusters, where the plan is that GPU's; None
    (every slot counts) for a device `named` by its numbers (num_sms, cc or hopper given)."""
    d = _device(device)
    return torch.ops.bankops._device_room(d) if d is not None and not named else None


def _gpu(gpu, named, device=None):
    """The device name the plan reads its cost constants and measured table by: ``gpu``; else
    the GPU's own, where the plan is that GPU's; else none ("")."""
    if gpu is not None:
        return str(gpu)
    d = _device(device)
    return torch.cuda.get_device_name(d) if d is not None and not named else ""


class Candidate(NamedTuple):
    """A plan the router weighed: its route, its tier (the router takes the lowest tier that has a
    legal plan), the microseconds its family's cost model predicts (None: no model), whether the
    router took it, and its key (``bankops.options(plan=key)`` makes a call take it)."""
    route: "GemmRoute"
    tier: str
    predicted_us: Optional[float]
    chosen: bool
    key: int


def _value(text):
    return int(text) if text.lstrip("-").isdigit() else text


class GemmRoute(str):
    """The kernel a gemm call runs. As a string, its one-line form, e.g. ``wgmma 128x256x64
    producer=tma a=mk b=kn repack=none split=1 persistent=1 multicast=2 tail=0 layout=swizzle
    blocks=132 sms=132 cc=90 scratch=0``: the family (``ffma``, ``mma``, ``wgmma``, ``rows``),
    its block tile (m x n x k), its plan's fields, then the call's.

    ``fields``: the same as a dict (``family``, ``tile``, then each key=value, integers as int,
    a bare flag such as ``ring`` as True). ``candidates``: every legal plan the router weighed
    for the call (``Candidate``), in the order it weighed them. ``chosen_by``: ``"model"`` (the
    router's tiers and cost models), ``"table <file>"`` (the GPU's measured table, bankops.tune)
    or ``"option"`` (``bankops.options(plan=...)``).
    """

    def __new__(cls, line, weigh=None):
        route = super().__new__(cls, line)
        route._weigh = weigh
        return route

    @property
    def fields(self):
        family, tile, *rest = self.split()
        out = {"family": family, "tile": tile}
        for item in rest:
            key, eq, value = item.partition("=")
            out[key] = _value(value) if eq else True
        return out

    def _weighed(self):
        if self._weigh is None:
            return [], [], [], [], -1, "model"
        return self._weigh()

    @property
    def candidates(self):
        lines, tiers, us, keys, chosen, _ = self._weighed()
        return [Candidate(GemmRoute(line), tier, None if math.isnan(t) else t, i == chosen, key)
                for i, (line, tier, t, key) in enumerate(zip(lines, tiers, us, keys))]

    @property
    def chosen_by(self):
        return self._weighed()[-1]


def _weigher(args):
    """The candidates of the call `args` spells (_gemm_candidates), on demand, under the options
    this thread has now (the route's own)."""
    spec = torch.ops.bankops._gemm_options("")

    def weigh():
        previous = torch.ops.bankops._gemm_options(spec)
        try:
            return torch.ops.bankops._gemm_candidates(*args)
        finally:
            torch.ops.bankops._gemm_options(previous)
    return weigh


def gemm_route(a, b, layout="swizzle", num_sms=None, cc=None, gpu=None):
    """The kernel ``bankops.gemm(a, b, layout)`` runs (a ``GemmRoute``: its one-line form as a
    string, its fields, the candidates the router weighed and who chose), under this thread's
    ``bankops.options``.

    ``a`` and ``b`` may be meta tensors (``torch.empty(..., device="meta")``, views too).
    ``num_sms`` and ``cc`` (10 * major + minor: 90 for an H100 or H200, 80 for an A100) default
    to the inputs' GPU, else the current one, else an H100's (132, 90). The GPU's own plan also
    counts the blocks it can hold in thread-block clusters (``_device_room``) and reads its cost
    constants and measured table (bankops.tune) by its name; a device given by its numbers is
    planned as if every SM slot took a cluster's block, with ``gpu`` (a device name, as
    ``torch.cuda.get_device_name`` gives it) for those.
    """
    named = num_sms is not None or cc is not None
    args = (a, b, layout, _num_sms(num_sms, a.device), _cc(cc, None, a.device), _room(named, a.device),
            _gpu(gpu, named, a.device))
    return GemmRoute(torch.ops.bankops._gemm_route(*args), _weigher(args))


def _problem_operands(problem, dtype):
    """Meta tensors of a gemm problem as problem_of lays it out (contiguous, or transposed views)."""
    batch, m, n, k, a_k_fast, b_k_fast = problem
    lead = (batch,) if batch != 1 else ()
    a = torch.empty(*lead, m, k, dtype=dtype, device="meta") if a_k_fast else \
        torch.empty(*lead, k, m, dtype=dtype, device="meta").transpose(-1, -2)
    b = torch.empty(*lead, n, k, dtype=dtype, device="meta").transpose(-1, -2) if b_k_fast else \
        torch.empty(*lead, k, n, dtype=dtype, device="meta")
    return a, b


def problem_of(op, shape=None, dim=None, m=None, n=None, k=None, batch=1, a_transposed=False, b_transposed=False):
    """The launch problem ``_smem_trace`` takes for an operator's call.

    - transpose: ``shape`` of a contiguous input whose last two dims are transposed;
    - reduce_sum: ``shape`` and ``dim`` (None: every element), as torch.sum takes them;
    - gemm: ``m``, ``n``, ``k`` (and ``batch``); ``a_transposed`` / ``b_transposed`` when the
      input is a transposed view (``x.t()`` of a contiguous tensor).
    """
    def count(name, v, lo=0):  # a size: an int no tensor outgrows (a dim index: lo < 0)
        try:
            i = None if isinstance(v, bool) else operator.index(v)
        except TypeError:
            i = None
        if i is None or not lo <= i <= 2**62:
            raise ValueError(f"explain('{op}'): expected {name} to be an int in [{lo}, 2^62], got {v!r}")
        return i

    def elements(name, dims):
        if math.prod(dims) > 2**62:
            raise ValueError(f"explain('{op}'): {name} holds {math.prod(dims)} elements, more than any tensor (2^62)")

    if shape is not None:
        shape = [count(f"shape[{i}]", d) for i, d in enumerate(shape)]
        elements("shape", shape)
    if op == "transpose":
        if shape is None or len(shape) < 2:
            raise ValueError("explain('transpose'): expected shape=(..., rows, cols) with at least 2 dims")
        return [math.prod(shape[:-2]), shape[-2], shape[-1]]
    if op == "reduce_sum":
        if shape is None:
            raise ValueError("explain('reduce_sum'): expected shape=(...) and optionally dim")
        shape = list(shape) or [1]
        dim = None if dim is None else count("dim", dim, -len(shape))
        if dim is None:
            return [1, math.prod(shape), 1]
        if not -len(shape) <= dim < len(shape):
            raise ValueError(f"explain('reduce_sum'): dim={dim} is out of range for a {len(shape)}-d shape "
                             f"(expected {-len(shape)} to {len(shape) - 1})")
        d = dim % len(shape)
        return [math.prod(shape[:d]), shape[d], math.prod(shape[d + 1 :])]
    if op == "gemm":
        if None in (m, n, k):
            raise ValueError("explain('gemm'): expected m=, n= and k= (and optionally batch=)")
        m, n, k, batch = count("m", m), count("n", n), count("k", k), count("batch", batch)
        for name, dims in (("a", (batch, m, k)), ("b", (batch, k, n)), ("the output", (batch, m, n))):
            elements(name, dims)
        # The kernels stage along whichever dim is contiguous: k for a row-major A and for a
        # transposed view of B.
        return [batch, m, n, k, int(not a_transposed), int(b_transposed)]
    raise ValueError(f"explain: unknown op '{op}'; expected one of: reduce_sum, transpose, gemm")


def totals_of(rows):
    """Per-launch instructions, wavefronts and ideal of report rows, by kind ("ld" and "st" always,
    any other kind the rows issue)."""
    totals = {}
    for kind in OPS:
        of_kind = [r for r in rows if r["op"] == kind]
        if not of_kind and kind not in ("ld", "st"):
            continue
        totals[kind] = {key: sum(r[key] * r["iterations"] for r in of_kind) for key in ("count", "wavefronts", "ideal")}
        totals[kind]["instructions"] = totals[kind].pop("count")
    return totals


class Report:
    """The shared-memory instructions of one operator call, predicted by the bank model.

    ``rows``: one dict per instruction of one iteration of the kernel's main loop (a tile),
    with ``kernel``, ``instruction``, ``op`` (one of OPS), ``width`` (bytes per lane),
    ``count`` (warp-level executions per iteration), ``wavefronts`` and ``ideal`` (per
    iteration; ideal = no conflict), ``per_instruction`` (wavefronts / count),
    ``iterations`` (per launch), ``conflicts`` (wavefronts - ideal, per launch) and ``peer``
    (True: the instruction reaches a cluster peer's shared memory, distributed shared memory,
    whose banks are that SM's; Nsight Compute's shared-memory counters count it on neither) and
    ``bytes`` (what its active lanes move, per iteration).
    ``totals``: per launch, for "ld", "st" and any other kind the kernels issue: instructions,
    wavefronts, ideal.
    """

    def __init__(self, op, layout, dtype, problem, num_sms, names, stats, worst, route=None):
        self.op, self.layout, self.dtype, self.problem, self.num_sms = op, layout, dtype, problem, num_sms
        self.route = route  # gemm: the route (bankops.gemm_route) the rows belong to
        self.rows = []
        self._worst = worst
        for name, values in zip(names, stats.tolist()):
            s = dict(zip(_STATS, values))
            kernel, instruction = name.split(": ", 1)
            self.rows.append(
                {
                    "kernel": kernel,
                    "instruction": instruction,
                    "op": OPS[s["op"]],
                    "width": s["width"],
                    "count": s["count"],
                    "wavefronts": s["wavefronts"],
                    "ideal": s["ideal"],
                    "per_instruction": s["wavefronts"] / s["count"] if s["count"] else 0.0,
                    "iterations": s["iterations"],
                    "conflicts": (s["wavefronts"] - s["ideal"]) * s["iterations"],
                    "worst_wavefronts": s["worst_wavefronts"],
                    "peer": bool(s["peer"]),
                    "bytes": s["bytes"],
                }
            )
        self.totals = totals_of(self.rows)

    @property
    def conflicts(self):
        """Wavefronts beyond the conflict-free ideal, per launch (loads and stores)."""
        return sum(t["wavefronts"] - t["ideal"] for t in self.totals.values())

    def per_instruction(self, kind):
        """Predicted wavefronts per warp-level instruction of one kind (see OPS), per launch."""
        t = self.totals.get(kind, {"instructions": 0})
        return t["wavefronts"] / t["instructions"] if t["instructions"] else 0.0

    def find(self, instruction):
        """Index of a row: an int, or a substring of ``kernel: instruction``."""
        if isinstance(instruction, int):
            if not -len(self.rows) <= instruction < len(self.rows):
                raise ValueError(f"instruction {instruction} is out of range: the report has {len(self.rows)} rows "
                                 f"({[r['instruction'] for r in self.rows]})")
            return instruction
        hits = [i for i, r in enumerate(self.rows) if instruction in f"{r['kernel']}: {r['instruction']}"]
        if not hits:
            raise ValueError(f"no instruction matches '{instruction}'; rows: {[r['instruction'] for r in self.rows]}")
        return hits[0]

    def worst_access(self, instruction=0):
        """(lane byte addresses, width) of the costliest warp access of an instruction; -1 = inactive lane."""
        i = self.find(instruction)
        return self._worst[i].tolist(), self.rows[i]["width"]

    def __str__(self):
        head = f"{self.op} layout={self.layout} dtype={str(self.dtype).replace('torch.', '')} problem={self.problem}"
        cols = ("kernel", "instruction", "op", "width", "count", "wavefronts", "ideal", "per_instruction")
        table = [cols] + [
            tuple(f"{r[c]:.2f}" if c == "per_instruction" else str(r[c]) for c in cols) for r in self.rows
        ]
        widths = [max(len(row[i]) for row in table) for i in range(len(cols))]
        by = getattr(self.route, "chosen_by", "model")
        lines = [head] + ([f"route: {self.route}" + (f" (chosen by the {by})" if by != "model" else "")]
                          if self.route else [])
        for c in getattr(self.route, "candidates", []):
            us = "-" if c.predicted_us is None else f"{c.predicted_us:.1f} us"
            lines.append(f"  {'*' if c.chosen else ' '} {c.tier:<15} {us:>10}  {c.route}")
        for j, row in enumerate(table):
            lines.append("  ".join(v.rjust(w) if i >= 3 else v.ljust(w) for i, (v, w) in enumerate(zip(row, widths))))
            if j == 0:
                lines.append("  ".join("-" * w for w in widths))
        for kind, t in self.totals.items():
            lines.append(
                f"per launch, {kind}: {t['instructions']} instructions, {t['wavefronts']} wavefronts "
                f"({self.per_instruction(kind):.2f} per instruction; {t['wavefronts'] - t['ideal']} conflicts)"
            )
        return "\n".join(lines)

    __repr__ = __str__


def explain(op, layout="swizzle", dtype=torch.float32, num_sms=None, hopper=None, cc=None, gpu=None, **shape):
    """The shared-memory instructions of ``op`` under ``layout`` for a problem, with the bank
    model's predicted wavefronts.

    >>> print(bankops.explain("transpose", "none", torch.float32, shape=(8192, 8192)))

    Shapes: ``shape=`` for transpose (last two dims transposed) and reduce_sum (with
    ``dim=``), ``m=, n=, k=`` (``batch=``, ``a_transposed=``, ``b_transposed=``) for gemm.
    The launch plan is the current GPU's, or an H100's without one: ``num_sms`` (132) and
    ``cc``, its compute capability as 10 * major + minor (90); ``hopper=True`` / ``False``
    is short for cc 90 / 80. A gemm report starts with its route (``bankops.gemm_route``):
    16-bit swizzle runs the Hopper kernel (wgmma) where it applies on cc 90, the mma.sync
    kernel elsewhere; ``bankops.options`` steers explain as it steers the calls. The report
    lists, under the route, every legal plan the router weighed: its tier, the time its family's
    model predicts (where it has one), and a star on the one taken; ``gpu`` names the device
    whose cost constants and measured table it plans with (``gemm_route``'s).
    """
    problem = problem_of(op, **shape)
    sms, ccv = _num_sms(num_sms), _cc(cc, hopper)
    named = num_sms is not None or cc is not None or hopper is not None
    room, name = _room(named), _gpu(gpu, named)
    names, stats, worst = torch.ops.bankops._smem_trace(op, layout, dtype, problem, sms, ccv, room, name)
    route = None
    if op == "gemm":
        args = (*_problem_operands(problem, dtype), layout, sms, ccv, room, name)
        route = GemmRoute(torch.ops.bankops._gemm_route(*args), _weigher(args))
    return Report(op, layout, dtype, problem, sms, names, stats, worst, route)
