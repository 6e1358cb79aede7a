"""Print where pip put the `completer` command of the package this interpreter imports, for scripts/demo.sh to end
with. It is beside the interpreter in a venv, but in the user base (`~/.local/bin`) where pip fell back to a user
install (a system Python whose site-packages the user cannot write), so the interpreter's folder is no guide."""
from __future__ import annotations

import importlib.metadata
import os
import sys


def command_path() -> str:
    """The console script that the installed distribution's RECORD lists, else the interpreter's folder's."""
    dist = importlib.metadata.distribution("completer")
    for file in dist.files or []:
        if file.name in ("completer", "completer.exe") and file.parent.name in ("bin", "Scripts"):
            return os.path.normpath(dist.locate_file(file))
    return os.path.join(os.path.dirname(sys.executable), "completer")


if __name__ == "__main__":
    print(f"The completer command is {command_path()}")
