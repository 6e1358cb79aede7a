"""INT8 weights written straight into the graph as it is built, in the form onnxruntime's dynamic quantization
writes them (`save.quantize`), so a converted model is never held in fp32 as a whole graph.

Converting a model through an fp32 graph holds its weights several times over: the fp32 initializers, the
serialized file, the optimizer's copy and the quantizer's. Written as INT8 from the start, one weight at a time
is in memory, read from the checkpoint when taken (lazy.py) and quantized a block of rows at a time.

- A weight MatMul: the activations quantized per call (DynamicQuantizeLinear), the weights per output column,
  symmetric, in [-127, 127]; onnxruntime fuses the pattern into DynamicQuantizeMatMul when it loads the graph.
- An embedding table: uint8, one scale and zero point for the table, dequantized after the Gather.
"""
from __future__ import annotations

from typing import Callable, Iterator

import numpy as np

from .builder import GraphBuilder
from .lazy import Lazy

BLOCK_VALUES = 1 << 22  # 16 MB of fp32 temporaries at a time


def _blocks(shape: tuple[int, ...]) -> Iterator[slice]:
    """Blocks of leading rows, so that the fp32 temporaries of quantizing a weight are a block's, not the weight's."""
    step = max(1, BLOCK_VALUES // max(1, int(np.prod(shape[1:]))))
    for start in range(0, shape[0], step):
        yield slice(start, start + step)


def _reader(value: np.ndarray | Lazy) -> Callable[[slice], np.ndarray]:
    """Blocks of a tensor's leading rows in fp32: read from the file for a tensor not read yet that can be read
    so (lazy.py), else sliced from the whole tensor, read once."""
    if isinstance(value, Lazy) and value.has_rows:
        return lambda rows: np.asarray(value.rows(rows.start, rows.stop), np.float32)
    whole = np.asarray(value, np.float32)
    return lambda rows: whole[rows]


def per_column(weight: np.ndarray | Lazy) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric INT8 per output column of a [K, N] weight: (int8 [K, N], scales [N]); a column of zeros gets
    a scale of 1, as onnxruntime gives it. A transpose of a tensor read by rows (a [V, C] embedding table as
    the [C, V] output head) is quantized from blocks of those rows, never read whole."""
    source = weight.transpose_of if isinstance(weight, Lazy) else None
    if source is not None and source.has_rows:
        return _per_row_transposed(source)
    read = _reader(weight)
    absmax = np.zeros(weight.shape[1], np.float32)  # [N]
    for rows in _blocks(weight.shape):
        np.maximum(absmax, np.abs(read(rows)).max(axis=0), out=absmax)
    scales = _scales(absmax)
    quantized = np.empty(weight.shape, np.int8)
    for rows in _blocks(weight.shape):
        quantized[rows] = _rounded(read(rows) / scales)
    return quantized, scales


def _per_row_transposed(source: Lazy) -> tuple[np.ndarray, np.ndarray]:
    """`per_column` of source.T [K, N], from blocks of the source's N rows: each row is one column's scale."""
    quantized = np.empty(source.shape[::-1], np.int8)  # [K, N]
    scales = np.empty(source.shape[0], np.float32)  # [N]
    for rows in _blocks(source.shape):
        block = np.asarray(source.rows(rows.start, rows.stop), np.float32)  # [n, K], maybe the caller's own rows
        scales[rows] = _scales(np.abs(block).max(axis=1))
        quantized[:, rows] = _rounded(block / scales[rows, None]).T  # a new array: the rows read are never written
    return quantized, scales


def _scales(absmax: np.ndarray) -> np.ndarray:
    """Each column's scale from its largest magnitude; a column of zeros gets 1, as onnxruntime gives it."""
    return np.where(absmax > 0, absmax / 127.0, 1.0).astype(np.float32)


def _rounded(scaled: np.ndarray) -> np.ndarray:
    """Weights already divided by their scales, rounded and clipped to [-127, 127] in place."""
    return np.clip(np.rint(scaled, out=scaled), -127, 127, out=scaled)


def per_table(table: np.ndarray | Lazy) -> tuple[np.ndarray, np.float32, np.uint8]:
    """Asymmetric uint8 for a whole table, its range widened to hold 0: (uint8 table, scale, zero point)."""
    read = _reader(table)
    low = high = 0.0
    for rows in _blocks(table.shape):
        block = read(rows)
        low, high = min(float(block.min()), low), max(float(block.max()), high)
    scale = np.float32((high - low) / 255.0 if high > low else 1.0)
    zero = np.uint8(np.clip(np.rint(-low / scale), 0, 255))
    quantized = np.empty(table.shape, np.uint8)
    for rows in _blocks(table.shape):
        block = read(rows) / scale
        np.rint(block, out=block)
        block += zero
        quantized[rows] = np.clip(block, 0, 255, out=block)
    return quantized, scale, zero


def matmul(g: GraphBuilder, x: str, weight: np.ndarray | Lazy, hint: str) -> str:
    """x @ weight with `weight` [K, N] in INT8; returns the fp32 product [..., N]."""
    quantized, scales = per_column(weight)
    x_q, x_scale, x_zero = g.op("DynamicQuantizeLinear", [x], f"{hint}_x", outputs=3)
    w_q = g.const(f"{hint}_quantized", quantized)
    w_zero = g.const(f"{hint}_zero_point", np.zeros(quantized.shape[1], np.int8))
    product = g.op("MatMulInteger", [x_q, w_q, x_zero, w_zero], f"{hint}_int32")
    both = g.op("Mul", [x_scale, g.const(f"{hint}_scale", scales)], f"{hint}_scales")
    return g.op("Mul", [g.op("Cast", [product], f"{hint}_float", to=1), both], f"{hint}_mm")


def gather(g: GraphBuilder, table: np.ndarray | Lazy, indices: str, hint: str) -> str:
    """table[indices] with `table` in uint8, dequantized after the Gather."""
    quantized, scale, zero = per_table(table)
    rows = g.op("Gather", [g.const(f"{hint}_quantized", quantized), indices], f"{hint}_rows", axis=0)
    return g.op("DequantizeLinear", [rows, g.const(f"{hint}_scale", np.asarray(scale, np.float32)),
                                     g.const(f"{hint}_zero_point", np.asarray(zero, np.uint8))], hint)
