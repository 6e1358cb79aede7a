"""Offline whole-line code completion engine: bundle loading, per-document KV cache, beam search."""
import os

# onnxruntime's official Linux and macOS builds collect telemetry from the moment it is imported (a device id and
# a store of events under ~/.cache/Microsoft, sent to Microsoft over HTTPS); this variable, read at that import,
# turns it off for this process and the processes it starts. Every process of ours imports this package (or lsp,
# which imports it) before onnxruntime: nothing leaves the machine unless the user configures a remote backend.
os.environ["ORT_DISABLE_TELEMETRY"] = "1"
