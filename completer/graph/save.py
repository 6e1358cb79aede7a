"""Write a built graph to disk, fuse what onnxruntime can fuse, and quantize its weights to INT8."""
from __future__ import annotations

import logging
from pathlib import Path

import onnx

from .architecture import Architecture

PROTOBUF_LIMIT = 2**31 - 2**26  # one protobuf file holds under 2 GiB; keep a margin for the graph itself
EMBEDDING_TABLES = ("embed", "positions")  # Gathers over these are quantized like the weight MatMuls


def save(model: onnx.ModelProto, path: Path) -> None:
    """One file, or the file plus `<name>.data` beside it when the weights pass protobuf's 2 GiB (measured
    from the initializers: a larger message cannot even report its own size)."""
    weights = sum(len(tensor.raw_data) for tensor in model.graph.initializer)
    if weights < PROTOBUF_LIMIT:
        onnx.checker.check_model(model)
        onnx.save(model, str(path))
        return
    onnx.save(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
              location=path.name + ".data", size_threshold=1024)
    onnx.checker.check_model(str(path))


def weights_apart(path: Path) -> None:
    """Move a one-file graph's weights into `<name>.data` beside it (in place). onnxruntime keeps a one-file
    graph's bytes as well as the tensors it copies out of them for as long as the session lives; from a file
    apart it holds the weights once (docs/benchmarks.md, "Converted models: released shapes", worker RSS)."""
    data = path.parent / (path.name + ".data")
    if data.exists():
        return
    model = onnx.load(str(path))
    onnx.save(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location=data.name,
              size_threshold=1024)


def optimize(fp32_path: Path, arch: Architecture) -> dict[str, int]:
    """onnxruntime's transformer fusions where they fit this hand-built graph (in place).

    The residual Add + LayerNorm pairs become SkipLayerNormalization (with RMSNorm, the LLaMA family's,
    SkipSimplifiedLayerNormalization) and GELU stays fused; the attention is our own shared-prefix form,
    which no fused attention op expresses. opt_level 0
    keeps the file portable across execution providers; the session applies its own at load.
    Only for one-file graphs: the optimizer's own save does not write external data."""
    if fp32_path.stat().st_size >= PROTOBUF_LIMIT or (fp32_path.parent / (fp32_path.name + ".data")).exists():
        return {}
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    logging.getLogger("onnxruntime.transformers").setLevel(logging.ERROR)
    optimized = optimize_model(str(fp32_path), model_type="gpt2", num_heads=arch.n_head, hidden_size=arch.hidden,
                               optimization_options=FusionOptions("gpt2"), opt_level=0)
    optimized.save_model_to_file(str(fp32_path))
    return {k: v for k, v in optimized.get_fused_operator_statistics().items() if v}


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
