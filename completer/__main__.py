"""`python -m completer`, and the `completer` command: a Ctrl-C while the command line's own modules load ends it as
the signal does, as it does later (completer/cli.py), not with a traceback."""
import sys


def run() -> int:
    """The command's exit status."""
    try:
        from .cli import main
    except KeyboardInterrupt:
        from .interrupts import die_of_signal

        return die_of_signal()
    return main()


if __name__ == "__main__":
    sys.exit(run())
