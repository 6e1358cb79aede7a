"""INT8 weights written straight into the graph as it is built, in the form onnxruntime's dynamic quantization
writes them (`save.quantize`), so a converted model is never held in fp32 as a whole graph.

Converting a model through an fp32 graph holds its weights several times over: the fp32 initializers, the
serialized file, the optimizer's copy and the quantizer's. Written as INT8 from the start, each weight is held
once in fp32 (the checkpoint's tensor) and once in INT8 (the initializer).

- A weight MatMul: the activations quantized per call (DynamicQuantizeLinear), the weights per output column,
  symmetric, in [-127, 127]; onnxruntime fuses the pattern into DynamicQuantizeMatMul when it loads the graph.
- An embedding table: uint8, one scale and zero point for the table, dequantized after the Gather.
"""
from __future__ import annotations

import numpy as np

from .builder import GraphBuilder


def per_column(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric INT8 per output column of a [K, N] weight: (int8 [K, N], scales [N]); a column of zeros gets
    a scale of 1, as onnxruntime gives it."""
    absmax = np.abs(weight).max(axis=0)  # [N]
    scales = np.where(absmax > 0, absmax / 127.0, 1.0).astype(np.float32)
    quantized = np.clip(np.rint(weight / scales), -127, 127).astype(np.int8)
    return quantized, scales


def per_table(table: np.ndarray) -> tuple[np.ndarray, np.float32, np.uint8]:
    """Asymmetric uint8 for a whole table, its range widened to hold 0: (uint8 table, scale, zero point)."""
    low, high = min(float(table.min()), 0.0), max(float(table.max()), 0.0)
    scale = np.float32((high - low) / 255.0 if high > low else 1.0)
    zero = np.uint8(np.clip(np.rint(-low / scale), 0, 255))
    quantized = np.clip(np.rint(table / scale) + zero, 0, 255).astype(np.uint8)
    return quantized, scale, zero


def matmul(g: GraphBuilder, x: str, weight: np.ndarray, hint: str) -> str:
    """x @ weight with `weight` [K, N] in INT8; returns the fp32 product [..., N]."""
    quantized, scales = per_column(np.asarray(weight, np.float32))
    x_q, x_scale, x_zero = g.op("DynamicQuantizeLinear", [x], f"{hint}_x", outputs=3)
    w_q = g.const(f"{hint}_quantized", quantized)
    w_zero = g.const(f"{hint}_zero_point", np.zeros(quantized.shape[1], np.int8))
    product = g.op("MatMulInteger", [x_q, w_q, x_zero, w_zero], f"{hint}_int32")
    both = g.op("Mul", [x_scale, g.const(f"{hint}_scale", scales)], f"{hint}_scales")
    return g.op("Mul", [g.op("Cast", [product], f"{hint}_float", to=1), both], f"{hint}_mm")


def gather(g: GraphBuilder, table: np.ndarray, indices: str, hint: str) -> str:
    """table[indices] with `table` in uint8, dequantized after the Gather."""
    quantized, scale, zero = per_table(np.asarray(table, np.float32))
    rows = g.op("Gather", [g.const(f"{hint}_quantized", quantized), indices], f"{hint}_rows", axis=0)
    return g.op("DequantizeLinear", [rows, g.const(f"{hint}_scale", np.asarray(scale, np.float32)),
                                     g.const(f"{hint}_zero_point", np.asarray(zero, np.uint8))], hint)
