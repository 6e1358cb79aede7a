"""Language server for the offline whole-line completer (pygls 2.x).

The server process only speaks LSP and tracks documents; inference runs in a separate worker
process (see `lsp.worker`) so a slow or crashing model never blocks the editor's requests.
"""
from __future__ import annotations

import completer  # noqa: F401  (first: it turns onnxruntime's telemetry off before anything imports onnxruntime)

__version__ = "0.1.0"
