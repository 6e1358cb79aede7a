"""The `completer` command line, run as a real process on the committed model: its answers,
and a clear message with a non-zero exit code for every input it cannot serve."""
from __future__ import annotations

import json
import re
import shutil
import os
import shlex
import socket
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest

from completer.types import SKIPPED_OUTSIDE
from lsp_support import BESIDE_OTHER_FILE, BESIDE_OTHER_FILE_CURSOR, FROM_OTHER_FILE, OTHER_FILE, REPO

SOURCE = '''import os


def read_config(path):
    with open(path) as handle:
        return handle.read()
'''


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "completer", *args], capture_output=True, text=True, check=False,
                          timeout=timeout, stdin=subprocess.DEVNULL)


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "config.py"
    path.write_text(SOURCE)
    return path


def test_complete_prints_whole_lines_starting_with_the_typed_text(source: Path):
    typed = "    with open("
    done = run("complete", f"{source}:5:{len(typed) + 1}", "--json")
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert payload["suggestions"] and payload["skipped"] == "" and payload["out_of_time"] is False
    for suggestion in payload["suggestions"]:
        assert suggestion["line"].startswith(typed) and suggestion["line"] == typed + suggestion["text"]
    plain = run("complete", f"{source}:5:{len(typed) + 1}")
    assert plain.returncode == 0
    for row in plain.stdout.splitlines():  # "  -1.234  <line>", or " (above)  <line>" for a line further up
        assert re.fullmatch(r" *(?:-?\d+\.\d{3}|\(above\))  (.*)", row)[1].startswith(typed), row
    assert f"({len(plain.stdout.splitlines())} suggestions in" in plain.stderr
    one = run("complete", f"{source}:5:{len(typed) + 1}", "--suggestions", "1")
    assert len(one.stdout.splitlines()) == 1 and "(1 suggestion in " in one.stderr, one.stderr
    refused = run("complete", f"{source}:5:{len(typed) + 1}", "--search-budget-ms", "-1")
    assert refused.returncode == 2 and "completer: --search-budget-ms must be between" in refused.stderr


def test_complete_searches_the_files_given_with_open(tmp_path: Path):
    """--open names another file open beside the one completed: its registration line comes back only then;
    an --open file that cannot be read is refused by name."""
    install, registry = tmp_path / "install.py", tmp_path / "registry.py"
    install.write_text(BESIDE_OTHER_FILE + "\n")
    registry.write_text(OTHER_FILE)
    line, column = BESIDE_OTHER_FILE_CURSOR
    position = f"{install}:{line + 1}:{column + 1}"
    lines = {name: [s["line"] for s in json.loads(run("complete", position, "--json", *extra).stdout)["suggestions"]]
             for name, extra in (("alone", ()), ("beside", ("--open", str(registry))))}
    assert FROM_OTHER_FILE in lines["beside"] and FROM_OTHER_FILE not in lines["alone"]
    missing = run("complete", position, "--open", str(tmp_path / "gone.py"))
    assert missing.returncode != 0 and "cannot read" in missing.stderr and "gone.py" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_demo_and_info_run_on_the_embedded_model():
    demo = run("demo")
    assert demo.returncode == 0, demo.stderr
    assert "model python-small" in demo.stdout and "actual:" in demo.stdout
    info = run("info")
    assert info.returncode == 0, info.stderr
    details = json.loads(info.stdout)
    assert details["model"] == "python-small" and "CPUExecutionProvider" in details["providers"]
    assert details["runtime_bundle_bytes"] <= 25 * 1024 * 1024


def test_unservable_positions_and_files_get_a_clear_message(source: Path, tmp_path: Path):
    cases = {
        "config.py:3": (f"{source}:3", "FILE:LINE:COL"),
        "zero column": (f"{source}:3:0", "1-based"),
        "missing file": (f"{tmp_path / 'nope.py'}:1:1", "cannot read"),
        "past the end": (f"{source}:99:1", SKIPPED_OUTSIDE),
    }
    blob = tmp_path / "blob.bin"
    blob.write_bytes(bytes(range(256)) * 64)
    cases["binary file"] = (f"{blob}:1:1000", "looks binary")
    onnx_head = tmp_path / "model_head.onnx"  # mostly printable at its start: the engine's own check passed it
    onnx_head.write_bytes((REPO / "models" / "python-small" / "model.onnx").read_bytes()[:4096])
    cases["binary file, printable near the cursor"] = (f"{onnx_head}:5:10", "looks binary")
    cases["endless device"] = ("/dev/zero:1:1", "larger than 64 MiB")
    for name, (position, message) in cases.items():
        if name == "past the end" or name.startswith("binary"):  # --json says why too, and exits 1 as well
            done = run("complete", position, "--json")
            assert done.returncode == 1 and message in json.loads(done.stdout)["skipped"], (name, done.stderr)
        done = run("complete", position)
        assert done.returncode != 0, name
        assert message in done.stderr, (name, done.stderr)
        assert "Traceback" not in done.stderr, name


def test_a_file_the_model_is_not_made_for_and_a_column_past_the_line_are_noted(source: Path, tmp_path: Path):
    """The CLI answers as asked, but says on stderr what the language server would do otherwise (no suggestions
    in a language the model does not write) and where a column past its line's end was taken (the line's end)."""
    script = tmp_path / "app.js"
    script.write_text("const total = 1;\nconst b = \n")
    done = run("complete", f"{script}:2:11", "--json")
    assert done.returncode == 0 and not json.loads(done.stdout)["skipped"]  # stdout: JSON alone
    assert "completer: note: python-small writes python, and app.js is javascript: these lines are guesses" \
        in done.stderr, done.stderr
    lone_returns = tmp_path / "cr.py"  # a lone \r ends a line, for the engine and so for the note
    lone_returns.write_text("import os\rx = os.pa\n", newline="")
    done = run("complete", f"{lone_returns}:2:9")
    assert done.returncode == 0 and "past the end" not in done.stderr, done.stderr
    done = run("complete", f"{source}:3:200")
    assert done.returncode == 0 and "note:" not in done.stderr
    width = len(SOURCE.split("\n")[2])
    assert f"completer: column 200 is past the end of line 3 ({width} characters): completing at its end" \
        in done.stderr, done.stderr


def test_a_reader_that_goes_away_ends_the_output_without_a_traceback(source: Path):
    """Written as it goes (unbuffered) or at the end (a pipe's buffer, flushed by main): either way no
    BrokenPipeError, and the status a process killed by SIGPIPE has, which is not 1's "no suggestions"."""
    python = shlex.quote(sys.executable)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONUNBUFFERED"}
    for command in (f"{python} -m completer demo | head -1", f"{python} -m completer complete --json {source}:3:5 | true"):
        done = subprocess.run(["bash", "-c", command + "; echo status=${PIPESTATUS[0]}"], capture_output=True,
                              text=True, timeout=120, stdin=subprocess.DEVNULL, env=env)
        assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, (command, done.stderr)
        assert done.stdout.splitlines()[-1] in ("status=0", "status=141"), (command, done.stdout)
    assert done.stdout.splitlines()[-1] == "status=141"  # `true` read nothing of the JSON


def test_out_of_range_options_are_refused(source: Path):
    """Each refused by the option's own name, not the setting's (max_suggestions for --suggestions)."""
    for option, value in (("--beams", "-1"), ("--beams", "17"), ("--max-tokens", "0"), ("--suggestions", "0"),
                          ("--threads", "-1")):
        done = run("complete", f"{source}:5:9", option, value)
        assert done.returncode == 2 and f"completer: {option} must be between" in done.stderr, (option, done.stderr)
    done = run("complete", f"{source}:5:9", "--beams", "0", "--json")  # 0: the model's default
    assert done.returncode == 0 and "suggestions" in json.loads(done.stdout), done.stderr


def test_corrupt_model_is_refused_naming_the_file(model_dir: Path, source: Path, tmp_path: Path):
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    for name in ("model.onnx", "tokenizer.json", "manifest.json"):
        shutil.copyfile(model_dir / name, bundle / name)
    data = bytearray((bundle / "model.onnx").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (bundle / "model.onnx").write_bytes(bytes(data))
    done = run("complete", f"{source}:5:9", "--model", str(bundle))
    assert done.returncode == 2
    assert "model error" in done.stderr and "model.onnx" in done.stderr and "Traceback" not in done.stderr
    done = run("info", "--model", str(tmp_path / "nowhere"))
    assert done.returncode == 2 and "not found" in done.stderr


def test_a_model_path_starting_with_a_tilde_is_in_the_home_folder(model_dir: Path, tmp_path: Path):
    """`--model=~/...` (which the shell leaves alone) names the bundle in the home folder, as the modelPath
    setting does."""
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "small").symlink_to(model_dir)
    done = subprocess.run([sys.executable, "-m", "completer", "info", "--model=~/models/small"], capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL, env={**os.environ, "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["model_path"] == str(tmp_path / "models" / "small")


def test_a_mistake_in_the_command_exits_2_with_one_line_and_json_when_asked(source: Path, tmp_path: Path):
    """1 means "the engine will not complete there" (the reason in `skipped`); a mistake in the command (a
    malformed position, a file that cannot be read, an option out of range, an unknown option, a missing model)
    exits 2 with one "completer: ..." line, and with --json stdout is still one JSON object of the same shape,
    whose `error` says what was wrong, so a script reading it never parses an empty output."""
    (tmp_path / "a folder.py").mkdir()
    cases = {
        "no line and column": ((f"{source}:12",), "FILE:LINE:COL"),
        "line 0": ((f"{source}:0:0",), "1-based"),
        "a negative line": ((f"{source}:-1:3",), "FILE:LINE:COL"),
        "a missing file": ((f"{tmp_path / 'gone.py'}:1:1",), "cannot read"),
        "a folder": ((f"{tmp_path / 'a folder.py'}:1:1",), "Is a directory"),
        "an unreadable --open": ((f"{source}:5:9", "--open", str(tmp_path)), "cannot read"),
        "a setting out of range": ((f"{source}:5:9", "--beams", "17"), "must be between"),
        "a missing model": ((f"{source}:5:9", "--model", str(tmp_path / "nowhere")), "not found"),
        "an unknown option": ((f"{source}:5:9", "--beems", "2"), "unrecognized arguments: --beems"),
        "a file named as an option": (("-:1:1",), "starts with '-' reads as an option"),
    }
    for name, (arguments, message) in cases.items():
        done = run("complete", *arguments)
        assert done.returncode == 2 and "Traceback" not in done.stderr, (name, done.returncode, done.stderr)
        assert any(line.startswith("completer") and message in line for line in done.stderr.splitlines()), \
            (name, done.stderr)
        answered = run("complete", *arguments, "--json")
        assert answered.returncode == 2, (name, answered.stderr)
        payload = json.loads(answered.stdout)
        assert message in payload["error"] and payload["suggestions"] == [], (name, payload)
        assert not payload["error"].startswith(("completer", "error")), (name, payload)  # the field names it
        assert set(payload) == {"suggestions", "latency_ms", "skipped", "out_of_time", "error"}, name
    done = run("complete", f"{source}:5:9", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["error"] == ""
    piped = subprocess.run([sys.executable, "-m", "completer", "complete", "/dev/stdin:5:9", "--json"],
                           input=SOURCE, capture_output=True, text=True, timeout=120)  # as the hint says
    assert piped.returncode == 0 and json.loads(piped.stdout)["suggestions"] == json.loads(done.stdout)["suggestions"]


def test_suggestions_the_output_encoding_cannot_write_are_printed_escaped(tmp_path: Path):
    """stdout in an encoding without the line's characters (a file on Windows is written in its ANSI code page):
    the suggestions are still printed, the character escaped, not lost to a UnicodeEncodeError."""
    script = tmp_path / "greet.py"
    script.write_text('greeting = "h\u00e9llo"\nprint(greeting)\nother = "h\u00e9\n')
    done = subprocess.run([sys.executable, "-m", "completer", "complete", f"{script}:3:12"], capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL,
                          env={**os.environ, "PYTHONIOENCODING": "ascii"})
    assert done.returncode == 0 and "Traceback" not in done.stderr and "codec" not in done.stderr, done.stderr
    assert any('other = "h\\xe9' in row for row in done.stdout.splitlines()), done.stdout


def test_each_commands_help_describes_every_option_and_names_only_options_it_has():
    """`completer X --help`: no option shown bare (what --suggestions counts, what --beams 0 means), and no `--name`
    in a description that the command does not take."""
    from completer.cli import build_parser

    commands = build_parser()._subparsers._group_actions[0].choices
    for name, parser in commands.items():
        if name == "serve":  # lsp/cli.py's parser, which `completer serve` hands its arguments to
            continue
        taken = {flag for action in parser._actions for flag in action.option_strings}
        for action in parser._actions:
            assert action.help, (name, action.dest)
        named = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", parser.format_help().split("options:")[1]))
        assert named <= taken, (name, named - taken)
    assert "exit status: 0" in commands["complete"].format_help()


def _bash(command: str, **env: str) -> subprocess.CompletedProcess:
    """`command` run by bash, where `>&-`, `<&-` and `> /dev/full` say what the standard streams are."""
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, env={**os.environ, **env})


def test_an_output_that_cannot_be_written_is_one_line_and_status_2(source: Path, tmp_path: Path):
    """A full stdout (a full disk, /dev/full) or a closed one: one line that says so and status 2, not a traceback
    (nor --help's status 0 with its text lost); a convert's bundle, its product, is still made with stdout closed."""
    completer = f"{shlex.quote(sys.executable)} -m completer"
    for command, says in ((f"complete {source}:5:9 > /dev/full", "cannot write the output: No space left on device"),
                          (f"complete {tmp_path / 'gone.py'}:1:1 --json > /dev/full", "cannot read"),
                          ("info > /dev/full", "cannot write the output: No space left on device"),
                          ("--help > /dev/full", "cannot write the output: No space left on device"),
                          (f"complete {source}:5:9 >&-", "stdout is closed")):
        done = _bash(f"{completer} {command}")
        lines = done.stderr.splitlines()
        assert done.returncode == 2 and "Traceback" not in done.stderr, (command, done.returncode, done.stderr)
        assert lines[-1].startswith("completer: ") and says in lines[-1], (command, done.stderr)
        assert len([line for line in lines if line.startswith("completer")]) == 1, (command, done.stderr)


def test_closed_stdin_and_stderr_are_said_or_left_alone(source: Path, tmp_path: Path):
    """/dev/stdin when stdin is closed is refused as such (not read as an empty file); with stderr closed the
    reason does not land in stdout, whose JSON stays one object."""
    completer = f"{shlex.quote(sys.executable)} -m completer"
    done = _bash(f"{completer} complete /dev/stdin:1:1 --json <&-")
    assert done.returncode == 2 and json.loads(done.stdout)["error"] == "cannot read /dev/stdin: stdin is closed"
    done = _bash(f"{completer} complete {tmp_path / 'gone.py'}:1:1 --json 2>&-")
    assert done.returncode == 2 and "cannot read" in json.loads(done.stdout)["error"], done.stdout


def test_serve_without_stdio_says_so_and_writes_no_frames_into_its_log(tmp_path: Path):
    """`completer serve` with stdin or stdout closed has no client: one line and status 1. Before, the log file
    took the closed stdout's number and the server wrote its LSP frames into it, or a closed stdin was a traceback."""
    for streams, says in (("<&-", "stdin is closed"), (">&- < /dev/null", "stdout is closed")):
        done = _bash(f"timeout 60 {shlex.quote(sys.executable)} -m completer serve {streams}",
                     COMPLETER_LOG_DIR=str(tmp_path))
        assert done.returncode == 1 and "Traceback" not in done.stderr, (streams, done.returncode, done.stderr)
        assert done.stderr.startswith(f"completer serve: {says}: there is no client"), (streams, done.stderr)
        log = tmp_path / "lsp.log"
        assert not log.exists() or "Content-Length" not in log.read_text(), (streams, log.read_text())


def test_ctrl_c_ends_the_command_by_the_signal_with_the_json_saying_so():
    """SIGINT while the command waits (here for stdin): no traceback, the JSON a script reads says `interrupted`, and
    the process dies of SIGINT, as a shell expects of Ctrl-C: bash goes on with its loop when a child merely exits
    130, so `for f in *.py; do completer complete ...; done` could not be stopped."""
    import signal
    import time

    read, write = os.pipe()
    with subprocess.Popen([sys.executable, "-m", "completer", "complete", "/dev/stdin:1:1", "--json"], stdin=read,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)) as process:
        os.close(read)
        deadline = time.monotonic() + 60
        while "pipe_read" not in Path(f"/proc/{process.pid}/wchan").read_text() and time.monotonic() < deadline:
            time.sleep(0.05)  # reading stdin, past its imports: in main's hands
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
        os.close(write)
    assert process.returncode == -signal.SIGINT and "Traceback" not in err, (process.returncode, err)
    assert json.loads(out)["error"] == "interrupted"


def test_python_unbuffered_output_is_written_as_it_goes(tmp_path: Path):
    """Under PYTHONUNBUFFERED (python -u) each line reaches the reader when printed, as it did before stdout's
    writes were checked (completer/std_streams.py), not all at exit: demo's first read holds its heading alone, the
    lines it completes coming after their searches. And --help into a full stdout is refused as when buffered."""
    with subprocess.Popen([sys.executable, "-m", "completer", "demo", "--beams", "16"], stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"}) as process:
        first = os.read(process.stdout.fileno(), 1 << 16).decode()
        process.communicate(timeout=120)
    assert first.startswith("model ") and "typed" not in first, first
    done = _bash(f"{shlex.quote(sys.executable)} -m completer --help > /dev/full", PYTHONUNBUFFERED="1")
    assert done.returncode == 2 and "cannot write the output" in done.stderr, (done.returncode, done.stderr)


def test_version_is_printed_as_the_servers():
    """`completer --version`, as `completer serve --version` has always answered, not "arguments are required"."""
    done = run("--version")
    served = run("serve", "--version")
    assert done.returncode == 0 and served.returncode == 0, (done.stderr, served.stderr)
    assert done.stdout.split() == ["completer", served.stdout.split()[-1]], (done.stdout, served.stdout)


INTERRUPTED_AT_IMPORT = '''
import builtins, os, runpy, signal, sys
real, fired = builtins.__import__, []
def interrupting(name, globals=None, locals=None, fromlist=(), level=0):
    if not fired and ({condition}):
        fired.append(name)
        os.kill(os.getpid(), signal.SIGINT)
    return real(name, globals, locals, fromlist, level)
builtins.__import__ = interrupting
sys.argv[0] = {module!r}
runpy.run_module({module!r}, run_name="__main__", alter_sys=True)
'''
"""`python -m MODULE ARGS` with Ctrl-C (SIGINT) pressed as an import that `condition` picks is made: a moment of
its start found without a race against the clock."""

IN_ONNXRUNTIMES_INIT = 'name.endswith("_multiarray_umath") and "onnxruntime.capi._pybind_state" in sys.modules'
"""Inside onnxruntime's extension module's initialisation, which imports numpy's core by name: an exception raised
there (KeyboardInterrupt) comes out of `import onnxruntime` as an ImportError."""


def interrupted_at_import(condition: str, *args: str, module: str = "completer",
                          **env: str) -> subprocess.CompletedProcess:
    """Run `python -m module args`, a SIGINT sent to it as `condition` holds of an import's `name`; SIGINT's default
    action restored (a background shell leaves it ignored), so that Python raises KeyboardInterrupt."""
    import signal

    code = INTERRUPTED_AT_IMPORT.format(condition=condition, module=module)
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL, env={**os.environ, **env},
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


@pytest.mark.skipif(os.name != "posix", reason="SIGINT sent to a process")
@pytest.mark.parametrize("command", [["info"], ["demo"], ["complete", "{source}:3:1", "--json"]])
def test_ctrl_c_while_onnxruntime_loads_ends_the_command_by_the_signal_without_a_traceback(source: Path, command):
    """Ctrl-C in the second or so onnxruntime takes to load (longer from a cold disk) raised in its extension
    module's initialisation, which turned it into "ImportError: import numpy failed" and a traceback, status 1:
    now it is held off until the module has loaded, and ends the command as Ctrl-C does elsewhere."""
    import signal

    done = interrupted_at_import(IN_ONNXRUNTIMES_INIT, *[word.format(source=source) for word in command])
    assert done.returncode == -signal.SIGINT and "Traceback" not in done.stderr, (done.returncode, done.stderr)
    assert "Error" not in done.stderr, done.stderr
    if "--json" in command:
        assert json.loads(done.stdout)["error"] == "interrupted"


@pytest.mark.skipif(os.name != "posix", reason="SIGINT sent to a process")
def test_ctrl_c_while_the_converter_loads_onnxruntime_stops_it_as_ctrl_c_does(tmp_path: Path):
    """The same in `convert`: it said "import numpy failed (a module the converter needs would not load; upgrading
    the convert extra may help ...)" after a traceback, and exited 2, not as interrupted."""
    import signal

    from hf_models import checkpoint

    checkpoint(tmp_path / "src", "qwen2")
    done = interrupted_at_import(IN_ONNXRUNTIMES_INIT, "convert", str(tmp_path / "src"), "--out",
                                 str(tmp_path / "bundle"))
    assert done.returncode == -signal.SIGINT and "Traceback" not in done.stderr, (done.returncode, done.stderr)
    assert done.stderr == "completer convert: stopped; nothing was written\n", done.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["src"]


@pytest.mark.skipif(os.name != "posix", reason="SIGINT sent to a process")
@pytest.mark.parametrize("module,args,condition", [
    ("completer", ["info"], 'name == "syntax"'),  # completer/cli.py's own imports
    ("completer", ["serve"], 'name == "lsp.server"'),
    ("lsp", [], 'name == "lsp.server"'),
])
def test_ctrl_c_before_the_command_has_started_ends_it_without_a_traceback(module: str, args: list[str],
                                                                          condition: str, tmp_path: Path):
    """Ctrl-C while the command line's modules load, or the server's (a second, the first time: `completer serve`
    run in a terminal to see what it does, then stopped): a KeyboardInterrupt traceback; now the signal's end."""
    import signal

    done = interrupted_at_import(condition, *args, module=module, COMPLETER_SESSION_HOST="0",
                                 COMPLETER_LOG_DIR=str(tmp_path))
    assert done.returncode == -signal.SIGINT and done.stderr == "", (done.returncode, done.stderr)


def test_a_file_named_dash_is_stdin_as_in_most_commands(source: Path):
    """`completer complete -- -:5:9 < file.py` said "cannot read -: No such file or directory": "-" is stdin here too,
    as the hint for `complete -:5:9` (which argparse takes for an option) says; a closed stdin is refused as such."""
    done = run("complete", f"{source}:5:9", "--json")
    piped = subprocess.run([sys.executable, "-m", "completer", "complete", "--json", "--", "-:5:9"], input=SOURCE,
                           capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0, piped.stderr
    assert json.loads(piped.stdout)["suggestions"] == json.loads(done.stdout)["suggestions"] != []
    hinted = run("complete", "-:5:9")
    assert hinted.returncode == 2 and "-- -:LINE:COL" in hinted.stderr, hinted.stderr
    closed = _bash(f"{shlex.quote(sys.executable)} -m completer complete --json -- -:1:1 <&-")
    assert closed.returncode == 2 and json.loads(closed.stdout)["error"] == "cannot read stdin: stdin is closed"
    beside = subprocess.run([sys.executable, "-m", "completer", "complete", f"{source}:5:9", "--open", "-"],
                            input="x\0y", capture_output=True, text=True, timeout=120)
    assert beside.returncode == 2 and "cannot complete in stdin: it looks binary" in beside.stderr, beside.stderr


def test_a_missing_bundle_that_comes_from_completer_model_says_so(tmp_path: Path):
    """COMPLETER_MODEL, set long ago in a profile, names the default bundle: "model bundle not found: /x is not a
    directory" left the user to guess where /x came from, with no --model given."""
    done = subprocess.run([sys.executable, "-m", "completer", "info"], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, env={**os.environ, "COMPLETER_MODEL": str(tmp_path / "gone")})
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert str(tmp_path / "gone") in done.stderr and "COMPLETER_MODEL" in done.stderr, done.stderr


def test_a_file_with_a_byte_order_mark_is_read_as_an_editor_reads_it(source: Path, tmp_path: Path):
    """UTF-8 with a byte-order mark (Visual Studio's, Notepad's "UTF-8 with BOM") kept the mark as a character: every
    column of line 1 was one off, and suggestions there began with U+FEFF; UTF-16 (PowerShell's `>`) was refused as
    binary. Both are now read as the editor shows them: the same suggestions as the plain UTF-8 file's."""
    text = SOURCE.replace("import os", "import json")
    plain = tmp_path / "plain.py"
    plain.write_text(text)
    expected = json.loads(run("complete", f"{plain}:1:8", "--json").stdout)["suggestions"]
    assert expected and all(s["line"].startswith("import ") for s in expected), expected
    for name, encoding in (("bom.py", "utf-8-sig"), ("wide.py", "utf-16")):
        (tmp_path / name).write_bytes(text.encode(encoding))
        done = run("complete", f"{tmp_path / name}:1:8", "--json")
        assert done.returncode == 0 and json.loads(done.stdout)["suggestions"] == expected, (name, done.stdout)
        beside = run("complete", f"{source}:5:9", "--open", str(tmp_path / name))
        assert beside.returncode == 0, (name, beside.stderr)


def test_the_servers_help_and_version_into_a_full_stdout_are_said_and_status_2():
    """`completer serve --help > /dev/full` (and python -m lsp's, and --version): argparse ignores the failed write,
    and the text was lost with status 0; now one line says so, with status 2, as for `completer --help`. Written
    out, the text is as before."""
    python = shlex.quote(sys.executable)
    for command, prog in (("-m completer serve", "completer serve"), ("-m lsp", "python -m lsp")):
        for flag in ("--help", "--version"):
            done = _bash(f"{python} {command} {flag} > /dev/full", COMPLETER_SESSION_HOST="0")
            assert done.returncode == 2, (command, flag, done.returncode, done.stderr)
            assert done.stderr == f"{prog}: cannot write the output: No space left on device\n", done.stderr
        shown = _bash(f"{python} {command} --help")
        assert shown.returncode == 0 and shown.stdout.startswith(f"usage: {prog} ") and shown.stderr == ""


def test_json_asked_for_by_a_prefix_still_holds_the_error(tmp_path: Path):
    """argparse takes --js for --json, and answered in JSON, but a mistake (a missing file) then left stdout empty:
    the object that says what was wrong is printed for the prefix too; words after -- are no options."""
    done = run("complete", f"{tmp_path / 'gone.py'}:1:1", "--js")
    assert done.returncode == 2 and json.loads(done.stdout)["error"].startswith("cannot read"), done.stdout
    after = run("complete", "--", f"{tmp_path / 'gone.py'}:1:1", "--json")
    assert after.returncode == 2 and after.stdout == "", after.stdout


INTERRUPTING_WORKER = '''
import builtins, os, signal, sys
if "--source" in sys.argv:  # the inference worker's command line (lsp/worker_client.py)
    real, fired = builtins.__import__, []
    def interrupting(name, globals=None, locals=None, fromlist=(), level=0):
        if not fired and name == "lsp.engine_socket":
            fired.append(name)
            os.killpg(os.getpgrp(), signal.SIGINT)
        return real(name, globals, locals, fromlist, level)
    builtins.__import__ = interrupting
'''
"""A sitecustomize that presses Ctrl-C in the terminal (SIGINT to the process group) as the worker loads its
modules."""


@pytest.mark.skipif(os.name != "posix", reason="process groups")
def test_ctrl_c_in_the_terminal_of_a_server_whose_worker_is_loading_prints_no_traceback(tmp_path: Path):
    """`completer serve` run in a terminal, stopped with Ctrl-C in its first second or two: its private worker, in
    the terminal's process group, got the SIGINT too, and printed a KeyboardInterrupt traceback there. The worker
    now ignores it (its server ends it): the server ends as it does on Ctrl-C, and nothing else is said."""
    import signal
    import time

    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(INTERRUPTING_WORKER)
    env = {**os.environ, "COMPLETER_STANDALONE": "1", "COMPLETER_LOG_DIR": str(tmp_path),
           "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(REPO), os.environ.get("PYTHONPATH", "")])}
    messages = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
                 "params": {"processId": None, "rootUri": None, "capabilities": {}}},
                {"jsonrpc": "2.0", "method": "initialized", "params": {}}]  # which starts the worker
    with subprocess.Popen([sys.executable, "-m", "completer", "serve"], stdin=subprocess.PIPE,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, start_new_session=True,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)) as server:
        for message in map(str.encode, map(json.dumps, messages)):
            server.stdin.write(b"Content-Length: %d\r\n\r\n%s" % (len(message), message))
        server.stdin.flush()
        server.wait(60)  # ended by the Ctrl-C, its stdin still open
        err = server.stderr.read().decode()
    log = (tmp_path / "lsp.log").read_text()
    assert "started inference worker" in log and "Traceback" not in err, err
    assert server.returncode == 1, (server.returncode, err)  # LSP's, for an exit without shutdown
    deadline = time.monotonic() + 10
    while subprocess.run(["pgrep", "-g", str(server.pid)], capture_output=True).returncode == 0:
        assert time.monotonic() < deadline, "the worker outlived its server"
        time.sleep(0.1)


@pytest.mark.skipif(os.name != "posix", reason="SIGINT sent to a process")
@pytest.mark.parametrize("transport", ["stdio", "tcp"])
def test_ctrl_c_stops_a_serving_server_at_once(tmp_path: Path, transport: str):
    """`completer serve` in a terminal, serving, then Ctrl-C: over TCP with a client connected it printed asyncio's
    CancelledError traceback (Python 3.11's start_server asks the cancelled task for its exception). Over either
    transport it ends at once, with LSP's code for an exit without shutdown, and says nothing."""
    import signal
    import time

    env = {**os.environ, "COMPLETER_STANDALONE": "1", "COMPLETER_LOG_DIR": str(tmp_path)}
    initialize = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                             "params": {"processId": None, "rootUri": None, "capabilities": {}}}).encode()
    framed = b"Content-Length: %d\r\n\r\n%s" % (len(initialize), initialize)
    command = [sys.executable, "-m", "completer", "serve", *(["--tcp", "--port", "0"] if transport == "tcp" else [])]
    with subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)) as server:
        if transport == "tcp":
            port = int(re.search(rb":(\d+) for one client", server.stderr.readline())[1])
            client = socket.create_connection(("127.0.0.1", port))
            client.sendall(framed)
            client.settimeout(60)
            read = partial(client.recv, 65536)
        else:
            server.stdin.write(framed)
            server.stdin.flush()
            read = partial(os.read, server.stdout.fileno(), 65536)
        said = b""
        while b'"id": 1' not in said:  # initialize answered: serving
            chunk = read()
            assert chunk, said
            said += chunk
        deadline = time.monotonic() + 60
        while "ready in" not in (tmp_path / "lsp.log").read_text():  # its worker started
            assert time.monotonic() < deadline, (tmp_path / "lsp.log").read_text()
            time.sleep(0.05)
        server.send_signal(signal.SIGINT)
        try:
            server.wait(15)  # stdin still open
        finally:
            server.stdin.close()
        err = server.stderr.read().decode()
    assert server.returncode == 1 and "Traceback" not in err, (server.returncode, err)
