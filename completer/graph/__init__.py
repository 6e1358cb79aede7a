"""The ONNX graph the engine runs: a decoder whose calls hold several searches, each over its own shared
prefix KV, with each row's best next tokens computed inside, built by hand from a small architecture description
(architecture.py). Needs `onnx` (the `convert` or `export` extra); the engine itself never imports this package."""
from .architecture import Architecture, own_architecture, own_weights, rotary_tables
from .beam_step import row_candidates, row_candidates_model
from .builder import GraphBuilder
from .decoder import DEFAULT_SLOTS, decoder_model, kv_layout, own_decoder
from .save import fuse_saved, optimize, quantize, save

__all__ = ["Architecture", "DEFAULT_SLOTS", "GraphBuilder", "decoder_model", "fuse_saved", "kv_layout", "optimize",
           "own_decoder", "own_architecture", "own_weights", "quantize", "rotary_tables", "row_candidates",
           "row_candidates_model", "save"]
