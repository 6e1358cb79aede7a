"""Command-line arguments, shared by `python -m lsp` and `completer serve`."""
from __future__ import annotations

import argparse
import contextlib
import functools
import io
import sys

from completer.std_streams import drop_stdout
from lsp import __version__
from lsp.logs import LEVELS

DEFAULT_PORT = 2087


@functools.lru_cache(maxsize=4)
def build_parser(prog: str = "python -m lsp") -> argparse.ArgumentParser:
    """The server's parser, built once per name (the session host builds them before it forks)."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Offline whole-line code completion language server (LSP over stdio by default).",
    )
    transport = parser.add_mutually_exclusive_group()
    transport.add_argument("--stdio", action="store_true", help="speak LSP on stdin/stdout (the default)")
    transport.add_argument("--tcp", action="store_true", help="listen for one client on 127.0.0.1:PORT instead")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"TCP port (default {DEFAULT_PORT})")
    parser.add_argument("--log-level", type=str.upper, choices=LEVELS, default="INFO",
                        help="minimum level for the log file and window/logMessage (default INFO)")
    parser.add_argument("--log-file", default=None,
                        help="log file (default: lsp.log in the user log dir, or in $COMPLETER_LOG_DIR)")
    parser.add_argument("--standalone", action="store_true",
                        help="run a private inference worker instead of the user's shared engine (also: "
                             "COMPLETER_STANDALONE=1)")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return parser


def parse_args(argv: list[str] | None = None, prog: str = "python -m lsp") -> argparse.Namespace:
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):  # --help's and --version's text, written out below
            args = build_parser(prog).parse_args(argv)
    except SystemExit as done:
        if done.code == 0:
            _write_printed(printed.getvalue(), prog)
        raise
    if not 0 <= args.port <= 65535:
        build_parser(prog).error("--port must be between 0 and 65535")
    return args


def _write_printed(text: str, prog: str) -> None:
    """Write what --help or --version printed, which argparse would have written ignoring a stdout that takes none
    of it (a full disk), with status 0: that is one line and status 2, as for `completer --help`; a reader gone, 141."""
    stream = sys.stdout or sys.stderr  # stdout closed: stderr, as argparse then writes
    try:
        stream.write(text)
        stream.flush()
    except BrokenPipeError:  # the reader has gone (`| true`): as SIGPIPE would end it, as `completer` does
        drop_stdout()
        raise SystemExit(128 + 13) from None
    except OSError as exc:
        drop_stdout()
        print(f"{prog}: cannot write the output: {exc.strerror or exc}", file=sys.stderr)
        raise SystemExit(2) from None
