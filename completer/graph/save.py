"""Write a built graph to disk, fuse what onnxruntime can fuse, and quantize its weights to INT8."""
from __future__ import annotations

import logging
from pathlib import Path

import onnx
from onnx.external_data_helper import set_external_data

from .architecture import Architecture
from .builder import APART_BYTES

PROTOBUF_LIMIT = 2**31 - 2**26  # one protobuf file holds under 2 GiB; keep a margin for the graph itself
EMBEDDING_TABLES = ("embed", "positions")  # Gathers over these are quantized like the weight MatMuls


def save(model: onnx.ModelProto, path: Path) -> None:
    """The graph to `path` and its weights to `<name>.data` beside it, each tensor's bytes let go from `model` as
    they are written, so a model is not held twice as it is serialized; `model` keeps the graph, its weights
    named by their place in that file. Apart, too, because onnxruntime keeps a one-file graph's bytes as well
    as the tensors it copies out of them for as long as the session lives; from a file apart it holds the
    weights once (docs/benchmarks.md, "Converted models: released shapes", worker RSS)."""
    for tensor in model.graph.initializer:  # those the builder has not already written (GraphBuilder.weights_file)
        if len(tensor.dims) >= 2 and len(tensor.raw_data) >= APART_BYTES:  # vectors stay: the fusions' shape
            set_external_data(tensor, location=path.name + ".data")  # inference reads some (scales) by value
    onnx.save(model, str(path))  # writes the tensors marked apart and clears their bytes from `model`
    onnx.checker.check_model(str(path))


def fuse(model: onnx.ModelProto, arch: Architecture) -> tuple[onnx.ModelProto, dict[str, int]]:
    """onnxruntime's transformer fusions where they fit this hand-built graph: the fused graph and the count of
    each fusion.

    The residual Add + LayerNorm pairs become SkipLayerNormalization (with RMSNorm, the LLaMA family's,
    SkipSimplifiedLayerNormalization) and GELU stays fused; the attention is our own shared-prefix form,
    which no fused attention op expresses. opt_level 0 keeps the file portable across execution providers;
    the session applies its own at load."""
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    logging.getLogger("onnxruntime.transformers").setLevel(logging.ERROR)
    optimized = optimize_model(model, model_type="gpt2", num_heads=arch.n_head, hidden_size=arch.hidden,
                               optimization_options=FusionOptions("gpt2"), opt_level=0)
    optimized.topological_sort()
    return optimized.model, {k: v for k, v in optimized.get_fused_operator_statistics().items() if v}


def fuse_saved(model: onnx.ModelProto, path: Path, arch: Architecture) -> dict[str, int]:
    """`fuse` a graph `save` wrote, its weights already apart, and write the fused graph over it: the
    optimizer's copies of the model (its shape inference serializes it) are of the graph alone."""
    fused, fusions = fuse(model, arch)
    onnx.save(fused, str(path))
    return fusions


def optimize(fp32_path: Path, arch: Architecture) -> dict[str, int]:
    """`fuse` a one-file graph on disk (in place); a graph over protobuf's 2 GiB is left as it is, since
    the optimizer's own save does not write external data."""
    if fp32_path.stat().st_size >= PROTOBUF_LIMIT or (fp32_path.parent / (fp32_path.name + ".data")).exists():
        return {}
    fused, fusions = fuse(onnx.load(str(fp32_path)), arch)
    onnx.save(fused, str(fp32_path))
    return fusions


def quantize(fp32_path: Path, int8_path: Path) -> None:
    """Dynamic INT8 of the weight MatMuls and the embedding Gathers only: activation-by-activation
    products (attention scores) and the beam step's Gathers stay fp32. Per channel: one scale per
    output column makes the file 1.6 % larger and closed most of the INT8-vs-fp32 gap
    (docs/experiments/2026-11-23-model-history.md)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model = onnx.load(str(fp32_path), load_external_data=False)
    weights = {init.name for init in model.graph.initializer}
    chosen = [n.name for n in model.graph.node
              if (n.op_type == "MatMul" and n.input[1] in weights)
              or (n.op_type == "Gather" and n.input[0] in weights and n.input[0].startswith(EMBEDDING_TABLES))]
    large = (fp32_path.parent / (fp32_path.name + ".data")).exists()
    logging.getLogger().setLevel(max(logging.getLogger().level, logging.ERROR))  # its advice to pre-process
    quantize_dynamic(str(fp32_path), str(int8_path), weight_type=QuantType.QInt8, per_channel=True,
                     nodes_to_quantize=chosen, op_types_to_quantize=["MatMul", "Gather"], use_external_data_format=large,
                     extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
