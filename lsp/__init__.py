"""Language server for the offline whole-line completer (pygls 2.x).

The server process only speaks LSP and tracks documents; inference runs in a separate worker
process (see `lsp.worker`) so a slow or crashing model never blocks the editor's requests.
"""
from __future__ import annotations

__version__ = "0.1.0"
