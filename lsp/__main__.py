"""`python -m lsp` runs the language server (stdio by default, `--tcp --port N` for TCP): on the shared engine,
through the user's session host (lsp/relay.py), else in this process. A Ctrl-C before it serves (while its modules
load, or the session host starts) ends it as the signal does, not with a traceback."""
from __future__ import annotations

import sys


def run(argv: list[str] | None = None, prog: str = "python -m lsp") -> int:
    """The server's exit status; also `completer serve`'s, with its `prog`."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        from lsp.relay import serve_through_host

        code = serve_through_host(argv, prog=prog)
        if code is None:
            from lsp.server import main

            code = main(argv, prog=prog)
    except KeyboardInterrupt:
        from completer.interrupts import die_of_signal

        return die_of_signal()
    return code or 0


if __name__ == "__main__":
    sys.exit(run())
