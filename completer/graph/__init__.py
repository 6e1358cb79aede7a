"""The ONNX graph the engine runs: a decoder with the shared-prefix KV layout and the beam step inside,
built by hand from a small architecture description (architecture.py). Needs `onnx` (the `convert` or
`export` extra); the engine itself never imports this package."""
from .architecture import Architecture, own_architecture, own_weights, rotary_tables
from .beam_step import beam_step, beam_step_model, line_end_mask
from .builder import GraphBuilder
from .decoder import decoder_model, own_decoder
from .save import optimize, quantize, save

__all__ = ["Architecture", "GraphBuilder", "beam_step", "beam_step_model", "decoder_model", "line_end_mask",
           "optimize", "own_decoder", "own_architecture", "own_weights", "quantize", "rotary_tables", "save"]
