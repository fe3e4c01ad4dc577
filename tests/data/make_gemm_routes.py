"""Writes tests/data/gemm_routes.txt: the golden corpus of gemm routes, one call and its route a
line, which tests/test_gemm_route.py holds the router to (a change that moves a route changes
this file in the same commit, and its message says why).

    python3 tests/data/make_gemm_routes.py [--check]

The calls: the bench's gemm cases (bench/cases.py: the operator sweep, a Linear layer's three
products, decode) and a seeded sweep over dtype x shape x operand majors x batch x layout x
misaligned rows x device x options, every one built from meta tensors (no GPU needed). A line:

    dtype layout device a=shape:strides+offset b=shape:strides+offset options | route

device is sms/cc or sms/cc/h100 (the H100's measured cluster room); options '-' or the per-call
options set apart from their defaults (split_k=0,...). --check compares instead of writing.
"""
import argparse
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [ROOT, os.path.join(ROOT, "bench")]

import torch  # noqa: E402

import bankops  # noqa: E402

CORPUS = os.path.join(HERE, "gemm_routes.txt")
DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32, "float64": torch.float64}
# The blocks an H100 holds at once in thread-block clusters (torch.ops.bankops._device_room on
# one; rows: 1..4 blocks an SM, columns: clusters of 2..8).
ROOMS = {"h100": [132, 117, 120, 110, 102, 105, 120, 264, 237, 248, 235, 234, 224, 240,
                  396, 372, 368, 345, 372, 329, 360, 528, 489, 496, 470, 474, 483, 496]}
DEVICES = ["132/90/h100", "132/90", "108/80", "80/86", "16/75"]
OPTIONS = ("wgmma", "repack", "stream_k", "split_k", "persistent")  # the sweep turns each off


def operand(dtype, shape, strides, offset):
    """A meta tensor view of the given shape, element strides and storage offset."""
    span = 1 + offset + sum((s - 1) * abs(st) for s, st in zip(shape, strides) if s > 0)
    return torch.empty(span, dtype=dtype, device="meta").as_strided(shape, strides, offset)


def spell(t):
    return f"{'x'.join(map(str, t.shape))}:{','.join(map(str, t.stride()))}+{t.storage_offset()}"


def parse_operand(text, dtype):
    shape, rest = text.split(":")
    strides, offset = rest.split("+")
    ints = lambda s: [int(v) for v in s.split(",")] if s else []  # noqa: E731
    return operand(dtype, [int(v) for v in shape.split("x")], ints(strides), int(offset))


def options_of(options):
    """The options of a corpus line ('-' or name=0,...) as bankops.options takes them."""
    return {} if options == "-" else {kv.split("=")[0]: kv.split("=")[1] == "1" for kv in options.split(",")}


def route_of(line):
    """The route the router gives the call a corpus line spells (everything before ' | ')."""
    dtype, layout, device, a, b, options = line.split(" | ")[0].split()
    dt = DTYPES[dtype]
    sms, cc, *room = device.split("/")
    with bankops.options(**options_of(options)):
        return torch.ops.bankops._gemm_route(parse_operand(a[2:], dt), parse_operand(b[2:], dt), layout, int(sms),
                                             int(cc), ROOMS[room[0]] if room else None)


def call(dtype, layout, device, a, b, options="-"):
    """A corpus line's call part for meta tensors a and b."""
    return f"{dtype} {layout} {device} a={spell(a)} b={spell(b)} {options}"


def views(dtype, batch, m, n, k, a_t, b_t, skew, broadcast=False):
    """a (.., m, k) and b (.., k, n): row-major, or transposed views (a_t, b_t) of row-major
    storage; skew 'offset' starts both one element in, 'pitch' pads their rows by one element
    (16-byte rows broken either way); broadcast: b one matrix expanded over the batch."""
    dt = DTYPES[dtype]
    off = 1 if skew == "offset" else 0
    pad = 1 if skew == "pitch" else 0

    def stored(rows, cols, transposed, bcast=False):
        r, c = (cols, rows) if transposed else (rows, cols)  # the storage's own rows and columns
        pitch = c + pad
        st = [pitch, 1][::-1] if transposed else [pitch, 1]
        shape = [rows, cols]
        if batch:
            st = [0 if bcast else r * pitch] + st
            shape = [batch] + shape
        return operand(dt, shape, st, off)

    return stored(m, k, a_t), stored(k, n, b_t, broadcast)


def bench_calls():
    """The bench's gemm cases on an H100 (its measured room) and on a 132-SM device without one."""
    import cases  # bench/cases.py

    out = []
    for case in cases.gpu_cases():
        if case.op != "gemm":
            continue
        a, b = case.make("meta")[:2]
        dtype = str(case.dtype).replace("torch.", "")
        for layout in bankops.LAYOUTS:
            for device in DEVICES[:2]:
                out.append(call(dtype, layout, device, a, b))
    return out


SIZES = [1, 2, 3, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 40, 48, 63, 64, 65, 96, 100, 127, 128, 129, 192, 255, 256,
         257, 384, 500, 512, 513, 640, 768, 1000, 1024, 1030, 1152, 1536, 2000, 2048, 2304, 3072, 4095, 4096, 4097,
         6144, 8192, 14336]


def sweep_calls(rng, count):
    """count seeded calls over the axes the router reads."""
    out = []
    for _ in range(count):
        dtype = rng.choice(["bfloat16"] * 4 + ["float16"] * 2 + ["float32"] * 3 + ["float64"])
        layout = rng.choice(["swizzle"] * 4 + ["none", "pad"])
        device = rng.choice(DEVICES[:2] * 3 + DEVICES[2:])
        m, n, k = (rng.choice(SIZES) for _ in range(3))
        if rng.random() < 0.3:  # a few rows against a weight
            m = rng.randint(1, 130)
            n, k = rng.choice([(4096, 4096), (14336, 4096), (4096, 14336), (1024, 4096), (4096, 256)])
        batch = rng.choice([None] * 5 + [2, 3])
        skew = rng.choice([None] * 6 + ["offset", "pitch"])
        options = rng.choice(["-"] * 8 + [f"{o}=0" for o in OPTIONS])
        a, b = views(dtype, batch, m, n, k, rng.random() < 0.3, rng.random() < 0.5, skew,
                     broadcast=batch is not None and rng.random() < 0.3)
        out.append(call(dtype, layout, device, a, b, options))
    return out


def grid_calls(rng, count, k_major=False):
    """16-bit grids of 2 to 40 waves of tiles (the Hopper plan's tile, split, walk, multicast and
    last-wave choices), some misaligned (the copies, or the realigning producer without them);
    k_major: x @ W.t() only (the tiles that take k-major A and B alone)."""
    out = []
    for _ in range(count):
        dtype = rng.choice(["bfloat16", "float16"])
        m, n = (64 * rng.randint(4, 128) + rng.choice([0] * 6 + [-1, 1, 8]) for _ in range(2))
        k = rng.choice([64, 256, 520, 1000, 1024, 1030, 2048, 4096, 8192, 16384])
        skew = rng.choice([None] * 4 + ["offset", "pitch"])
        options = rng.choice(["-"] * 6 + ["repack=0", "persistent=0", "split_k=0"])
        a_t, b_t = (False, True) if k_major else (rng.random() < 0.3, rng.random() < 0.5)
        a, b = views(dtype, None, m, n, k, a_t, b_t, skew)
        out.append(call(dtype, "swizzle", rng.choice(DEVICES[:2]), a, b, options))
    return out


def strided_calls(rng, count):
    """Views with no unit-stride dim (every other column): the element-by-element fills."""
    out = []
    for _ in range(count):
        dtype = rng.choice(list(DTYPES))
        m, n, k = (rng.choice(SIZES[5:40]) for _ in range(3))
        a = operand(DTYPES[dtype], [m, k], [2 * k, 2], 0)
        b = operand(DTYPES[dtype], [k, n], [n, 1], 0) if rng.random() < 0.5 else \
            operand(DTYPES[dtype], [k, n], [2, 2 * k], 0)
        out.append(call(dtype, rng.choice(bankops.LAYOUTS), rng.choice(DEVICES), a, b))
    return out


def decode_calls():
    """Every M from 1 to 130 against the decode weights, both weight majors, both dtypes, on an H100."""
    out = []
    for dtype in ("bfloat16", "float32"):
        for n, k in ((4096, 4096), (14336, 4096), (4096, 14336)):
            for m in range(1, 131):
                for b_t in (True, False):
                    a, b = views(dtype, None, m, n, k, False, b_t, None)
                    out.append(call(dtype, "swizzle", DEVICES[0], a, b))
    return out


def corpus_calls():
    rng = random.Random(53)
    calls = bench_calls() + decode_calls() + sweep_calls(rng, 2500) + grid_calls(rng, 700) + \
        grid_calls(rng, 300, k_major=True) + strided_calls(rng, 150)
    return list(dict.fromkeys(calls))  # each call once, in first-seen order


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare the router with the corpus instead of writing it")
    args = ap.parse_args()
    lines = [f"{c} | {route_of(c)}" for c in corpus_calls()]
    if args.check:
        with open(CORPUS) as f:
            old = f.read().splitlines()
        diff = [(o, n) for o, n in zip(old, lines) if o != n]
        for o, n in diff[:20]:
            print(f"- {o}\n+ {n}")
        print(f"{len(diff)} of {len(lines)} routes differ" + ("" if len(old) == len(lines) else
                                                               f"; the corpus holds {len(old)} calls"))
        sys.exit(1 if diff or len(old) != len(lines) else 0)
    with open(CORPUS, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {len(lines)} routes to {os.path.relpath(CORPUS)}")


if __name__ == "__main__":
    main()
