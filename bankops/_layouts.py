"""The layout names, the Python side's one spelling (the C++ side's is kernels/layout.cuh)."""
LAYOUTS = ("none", "pad", "swizzle")


def unknown_layout(op, layout):
    """The error message for a layout outside LAYOUTS, as the C++ side words it."""
    return f"{op}: unknown layout '{layout}' for argument layout; expected one of: {', '.join(LAYOUTS)}"
