"""`python -m lsp` runs the language server (stdio by default, `--tcp --port N` for TCP): on the shared engine,
through the user's session host (lsp/relay.py), else in this process. A Ctrl-C before it serves (while its modules
load, or the session host starts) ends it as the signal does, not with a traceback."""
from __future__ import annotations

import sys


def run() -> int:
    """The server's exit status."""
    try:
        from lsp.relay import serve_through_host

        code = serve_through_host(sys.argv[1:])
        if code is None:
            from lsp.server import main

            code = main()
    except KeyboardInterrupt:
        from completer.interrupts import die_of_signal

        return die_of_signal()
    return code


if __name__ == "__main__":
    sys.exit(run())
