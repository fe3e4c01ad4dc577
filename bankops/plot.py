"""Bank maps: which lane each of the 32 banks serves in each wavefront of one shared-memory
instruction, drawn like the tables of seed note 000. The map comes from the bank model
itself (``torch.ops.bankops._bank_map``), for the costliest warp access of the instruction
``bankops.explain`` lists.
"""
import torch

from .explain import explain

__all__ = ["plot_banks", "bank_map"]


def bank_map(addr, width, active=-1, store=False):
    """(lane, sharers, phase) of one warp-wide access: ``lane[w][b]`` is the lowest lane bank
    ``b`` serves in wavefront ``w`` (-1: idle), ``sharers[w][b]`` how many lanes that word
    serves (broadcast), ``phase[w]`` the phase (group of lanes) the wavefront belongs to."""
    return torch.ops.bankops._bank_map(torch.as_tensor(addr), width, active, store)


def plot_banks(op, layout="swizzle", instruction=0, dtype=torch.float32, path=None, ax=None, num_sms=None, **shape):
    """Draws the bank map of one instruction of ``op`` under ``layout`` (a 32-bank x wavefront
    grid, cells coloured and numbered by lane; rows past a phase's first are bank conflicts,
    marked red) and returns the matplotlib Figure; ``path`` also saves it (PNG), ``ax`` draws
    into an existing Axes instead of a new figure.

    ``instruction``: a row index of ``bankops.explain(op, layout, dtype, **shape).rows`` or a
    substring of its ``kernel: instruction``. Shapes as for :func:`bankops.explain`.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    report = explain(op, layout, dtype, num_sms=num_sms, **shape)
    i = report.find(instruction)
    row = report.rows[i]
    addr, width = report.worst_access(i)
    active = sum(1 << lane for lane, a in enumerate(addr) if a >= 0)
    lane, sharers, phase = (t.tolist() for t in bank_map([max(a, 0) for a in addr], width, active, row["op"] != "ld"))

    waves = len(lane)
    if ax is None:
        _, ax = plt.subplots(figsize=(12, 0.8 + 0.34 * max(waves, 1)))
    fig = ax.figure
    cmap = plt.get_cmap("hsv")
    first_of_phase = [w == 0 or phase[w] != phase[w - 1] for w in range(waves)]
    for w in range(waves):
        for b in range(32):
            if lane[w][b] < 0:
                continue
            ax.add_patch(Rectangle((b, w), 1, 1, facecolor=cmap(lane[w][b] / 32), alpha=0.45,
                                  edgecolor="red" if not first_of_phase[w] else "white", linewidth=1.5))
            text = str(lane[w][b]) + (f"+{sharers[w][b] - 1}" if sharers[w][b] > 1 else "")
            ax.text(b + 0.5, w + 0.5, text, ha="center", va="center", fontsize=6)
    ax.set_xlim(0, 32)
    ax.set_ylim(max(waves, 1), 0)
    ax.set_xticks([b + 0.5 for b in range(32)], [str(b) for b in range(32)], fontsize=6)
    ax.set_yticks([w + 0.5 for w in range(waves)],
                  [f"p{phase[w]} w{w}" + ("" if first_of_phase[w] else " conflict") for w in range(waves)], fontsize=6)
    ax.set_xlabel("bank (4-byte words); cell: lane served (+n: lanes sharing the word)")
    conflicts = waves - sum(first_of_phase)
    dt = str(dtype).replace("torch.", "")
    ax.set_title(f"{op}, layout={layout}, {dt}: {row['kernel']}: {row['instruction']}\n"
                 f"{width}-byte lanes, worst warp: {waves} wavefronts, {conflicts} from bank conflicts "
                 f"(red-edged rows)", fontsize=8)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=150)
    return fig
