"""Autograd formulas for the three operators.

Each backward calls bankops' own operators with the layout the forward was called with,
so a model that picked a layout runs it in both directions. The formulas are written in
terms of differentiable operations only, so double backward works as well.
"""
import torch

ops = torch.ops.bankops


def _gemm_setup(ctx, inputs, output):
    a, b, layout = inputs
    ctx.layout = layout
    ctx.save_for_backward(a, b)


def _gemm_backward(ctx, grad):
    # C = A @ B: dA = dC @ B^T, dB = A^T @ dC. gemm reads the transposed views in place,
    # so neither operand is copied.
    a, b = ctx.saved_tensors
    grad_a = grad_b = None
    if ctx.needs_input_grad[0]:
        grad_a = ops.gemm(grad, b.transpose(-1, -2), ctx.layout)
    if ctx.needs_input_grad[1]:
        grad_b = ops.gemm(a.transpose(-1, -2), grad, ctx.layout)
    return grad_a, grad_b, None


def _linear_setup(ctx, inputs, output):
    x, weight, bias, layout = inputs
    ctx.layout, ctx.has_bias = layout, bias is not None
    ctx.save_for_backward(x, weight)


def _linear_backward(ctx, grad):
    # y = x @ W.t() + b over x's rows: dx = dy @ W, dW = dy.t() @ x (written in W's own
    # (out, in) layout: no transposed copy of a (in, out) product), db = dy summed over rows.
    x, weight = ctx.saved_tensors
    dy = grad.reshape(-1, weight.shape[0])
    grad_x = grad_w = grad_b = None
    if ctx.needs_input_grad[0]:
        grad_x = ops.gemm(dy, weight, ctx.layout).reshape(x.shape)
    if ctx.needs_input_grad[1]:
        grad_w = ops.gemm(dy.t(), x.reshape(-1, weight.shape[1]), ctx.layout)
    if ctx.has_bias and ctx.needs_input_grad[2]:
        grad_b = ops.reduce_sum(dy, 0, False, ctx.layout)
    return grad_x, grad_w, grad_b, None


def _transpose_setup(ctx, inputs, output):
    _, dim0, dim1, layout = inputs
    ctx.dims, ctx.layout = (dim0, dim1), layout


def _transpose_backward(ctx, grad):
    # A permutation is its own inverse when it swaps two dims.
    if not ctx.needs_input_grad[0]:
        return None, None, None, None
    return ops.transpose(grad, *ctx.dims, ctx.layout), None, None, None


def _reduce_sum_setup(ctx, inputs, output):
    x, dim, keepdim, _ = inputs
    ctx.shape, ctx.dim, ctx.keepdim = x.shape, dim, keepdim


def _reduce_sum_backward(ctx, grad):
    # Every summed element receives the output's gradient: a broadcast view, as torch.sum's
    # backward gives (no memory is written for it).
    if not ctx.needs_input_grad[0]:
        return None, None, None, None
    shape, dim = ctx.shape, ctx.dim
    if dim is None:
        grad = grad.reshape(())  # keepdim's [1] * ndim as well as the 0-d result
    elif not ctx.keepdim and len(shape) > 0:
        grad = grad.unsqueeze(dim % len(shape))
    return grad.expand(shape), None, None, None


torch.library.register_autograd("bankops::gemm", _gemm_backward, setup_context=_gemm_setup)
torch.library.register_autograd("bankops::linear", _linear_backward, setup_context=_linear_setup)
torch.library.register_autograd("bankops::transpose", _transpose_backward, setup_context=_transpose_setup)
torch.library.register_autograd("bankops::reduce_sum", _reduce_sum_backward, setup_context=_reduce_sum_setup)
