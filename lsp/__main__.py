"""`python -m lsp` runs the language server (stdio by default, `--tcp --port N` for TCP)."""
from __future__ import annotations

import sys

from lsp.server import main

if __name__ == "__main__":
    sys.exit(main())
