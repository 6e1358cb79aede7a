"""`python -m lsp` runs the language server (stdio by default, `--tcp --port N` for TCP): on the shared engine,
through the user's session host (lsp/relay.py), else in this process."""
from __future__ import annotations

import sys

from lsp.relay import serve_through_host

if __name__ == "__main__":
    code = serve_through_host(sys.argv[1:])
    if code is None:
        from lsp.server import main

        code = main()
    sys.exit(code)
