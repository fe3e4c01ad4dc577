"""The measured tables of gemm plans (bankops.tune writes them): where they live, how a user's
layers over the shipped one of its GPU, and handing them to the router. ``import bankops``
registers every table it finds; no GPU is touched to do so."""
import glob
import json
import os
import re
import sys

import torch

from . import _C  # noqa: F401

FORMAT = "bankops-tuning/1"
PACKAGE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tuning")
# kernels/dtype.h's DType codes and kernels/layout.cuh's Layout codes of what the tables hold.
DTYPE_CODES = {"float16": 6, "bfloat16": 7, "float32": 8, "float64": 9}
LAYOUT_CODES = {"none": 0, "pad": 1, "swizzle": 2}


def slug(name):
    """A GPU name as a file name: "NVIDIA H200" -> "h200", "NVIDIA H100 80GB HBM3" -> "h100-80gb-hbm3"."""
    name = re.sub(r"^nvidia\s+", "", name.strip().lower())
    return re.sub(r"[^a-z0-9]+", "-", name).strip("-") or "gpu"


def user_dir():
    return os.environ.get("BANKOPS_TUNING_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "bankops", "tuning")


def register(table, source):
    """Hands a table (the dict a tuning file holds) to the router."""
    entries = []
    for e in table["entries"]:
        # An entry where the model's own plan was timed fastest names plan 0: calls nearest it
        # keep the model's choice for their own shape rather than take that shape's plan.
        plan = 0 if e["plan"] == e.get("model_plan") else e["plan"]
        entries += [DTYPE_CODES[e["dtype"]], LAYOUT_CODES[e["layout"]], int(e["a_km"]), int(e["b_kn"]),
                    e["batch"], e["m"], e["n"], e["k"], plan]
    torch.ops.bankops._gemm_tuning(table["gpu"], table["sms"], table.get("cc", 0), table.get("driver", ""), entries,
                                   source)


def unregister(gpu, sms):
    """Drops the table of a GPU (its name and SM count): its calls take the model's plans."""
    torch.ops.bankops._gemm_tuning(gpu, sms, 0, "", [], "")


def call_key(e):
    """What names an entry's call: two entries of one key time the same call."""
    return e["dtype"], e["layout"], e["a_km"], e["b_kn"], e["batch"], e["m"], e["n"], e["k"]


def _read(path):
    with open(path) as f:
        table = json.load(f)
    if not isinstance(table, dict) or table.get("format") != FORMAT:
        raise ValueError(f"bankops.tune.load: {path} is not a {FORMAT} table (format: "
                         f"{table.get('format') if isinstance(table, dict) else type(table).__name__!r})")
    return table


def shipped(gpu, sms):
    """The table bankops/tuning/ ships for a GPU (its name and SM count), as (table, file name), or
    (None, None)."""
    path = os.path.join(PACKAGE_DIR, slug(gpu) + ".json")
    try:
        table = _read(path)
    except (OSError, ValueError):
        return None, None
    return (table, os.path.basename(path)) if (table.get("gpu"), table.get("sms")) == (gpu, sms) else (None, None)


def layered(table, source, path=None):
    """What the router takes for a table that is not the package's own (path elsewhere than
    bankops/tuning/): its entries, then the shipped table's of the same GPU for the calls it did not
    time, named "<source> over <shipped file>"; so a user's few tuned calls add to the shipped ones
    rather than drop them. A shipped table, or one of a GPU none ships for, stands alone."""
    if (path is not None and os.path.dirname(os.path.abspath(path)) == PACKAGE_DIR) or not isinstance(
            table.get("gpu"), str):
        return table, source  # (a table without a GPU's name fails in register, naming its file)
    base, name = shipped(table.get("gpu"), table.get("sms"))
    if base is None:
        return table, source
    timed = {call_key(e) for e in table["entries"]}
    entries = table["entries"] + [e for e in base["entries"] if call_key(e) not in timed]
    return {**table, "entries": entries}, f"{source} over {name}"


def load(path):
    """Reads and registers one tuning file (over the shipped table of its GPU: layered); returns
    its table, or raises ValueError naming the file."""
    table = _read(path)
    try:
        register(*layered(table, os.path.basename(path), path))
    except (KeyError, TypeError, RuntimeError) as e:
        raise ValueError(f"bankops.tune.load: {path}: {e}") from None
    return table


def load_all():
    """Registers the shipped tables, then the user's (each over the shipped one of its GPU)."""
    for directory in (PACKAGE_DIR, user_dir()):
        for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
            try:
                load(path)
            except (OSError, ValueError) as e:
                print(f"bankops: skipping tuning table {path}: {e}", file=sys.stderr)
