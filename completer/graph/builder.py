"""A thin accumulator of ONNX nodes and initializers with unique names, for graphs built by hand."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from onnx import helper, numpy_helper

OPSET = 17
IR_VERSION = 8  # readable by onnxruntime releases well before the one we pin
NEG_INF = np.float32(-np.inf)


@dataclass
class GraphBuilder:
    nodes: list = field(default_factory=list)
    initializers: list = field(default_factory=list)
    counter: int = 0
    int8: bool = False  # weight MatMuls and embedding tables written in INT8 as they are built (int8.py)

    def name(self, hint: str) -> str:
        self.counter += 1
        return f"{hint}_{self.counter}"

    def const(self, hint: str, value: np.ndarray) -> str:
        name = self.name(hint)
        self.initializers.append(numpy_helper.from_array(np.asarray(value), name))
        return name

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
