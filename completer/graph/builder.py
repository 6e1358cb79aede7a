"""A thin accumulator of ONNX nodes and initializers with unique names, for graphs built by hand."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

OPSET = 17
IR_VERSION = 8  # readable by onnxruntime releases well before the one we pin
NEG_INF = np.float32(-np.inf)
APART_BYTES = 1024  # smaller weights stay in the graph file, as onnx.save's size_threshold leaves them


@dataclass
class GraphBuilder:
    nodes: list = field(default_factory=list)
    counter: int = 0
    int8: bool = False  # weight MatMuls and embedding tables written in INT8 as they are built (int8.py)
    # the model being built: initializers go straight into it, since gathering them into a graph and the graph
    # into a model (onnx.helper) copies every weight twice more
    proto: onnx.ModelProto = field(default_factory=onnx.ModelProto)
    # where the weights (initializers of two or more axes) are written as they are made, the graph naming their
    # place in it, so a model is never held in memory whole: onnx's external data, `<model file>.data`
    weights_file: Path | None = None

    def name(self, hint: str) -> str:
        self.counter += 1
        return f"{hint}_{self.counter}"

    def const(self, hint: str, value: np.ndarray) -> str:
        name = self.name(hint)
        array = np.asarray(value)
        if self.weights_file is not None and array.ndim >= 2 and array.nbytes >= APART_BYTES:
            self.proto.graph.initializer.append(self._apart(name, array))
        else:
            self.proto.graph.initializer.append(numpy_helper.from_array(array, name))
        return name

    def _apart(self, name: str, array: np.ndarray) -> onnx.TensorProto:
        """`array` appended to the weights file, as onnx.save writes external data, and the initializer naming it."""
        array = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))  # ONNX's byte order
        with open(self.weights_file, "ab") as data:
            offset = data.seek(0, os.SEEK_END)
            data.write(array.data)
        tensor = onnx.TensorProto(name=name, data_type=helper.np_dtype_to_tensor_dtype(array.dtype),
                                  dims=array.shape, data_location=onnx.TensorProto.EXTERNAL)
        for key, text in (("location", self.weights_file.name), ("offset", offset), ("length", array.nbytes)):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, str(text)
        return tensor

    def model(self, name: str, inputs: list, outputs: list, opsets: dict[str, int]) -> onnx.ModelProto:
        """The finished model, its initializers where `const` put them; the builder is spent."""
        model = self.proto
        model.ir_version = IR_VERSION
        model.graph.name = name
        model.graph.node.extend(self.nodes)
        model.graph.input.extend(inputs)
        model.graph.output.extend(outputs)
        model.opset_import.extend(helper.make_opsetid(domain, version) for domain, version in opsets.items())
        self.nodes, self.proto = [], onnx.ModelProto()
        return model

    def i64(self, hint: str, value: int | list[int]) -> str:
        return self.const(hint, np.array(value, dtype=np.int64))

    def op(self, op_type: str, inputs: list[str], hint: str | None = None, outputs: int | list[str] = 1,
           domain: str | None = None, **attrs) -> str | list[str]:
        if isinstance(outputs, int):
            out_names = [self.name(hint or op_type.lower()) for _ in range(outputs)]
        else:
            out_names = outputs
        self.nodes.append(helper.make_node(op_type, inputs, out_names, name=self.name(op_type), domain=domain, **attrs))
        return out_names[0] if len(out_names) == 1 else out_names
