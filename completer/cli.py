"""`completer`: complete a file position, demo the model, describe it, or serve LSP."""
from __future__ import annotations

import argparse
import codecs
import json
import os
import re
import sys
from importlib import resources
from pathlib import Path
from typing import Any, NoReturn

from .interrupts import die_of_signal, interrupts_held
from .std_streams import OutputError, check_stdout_writes, drop_stdout, hold_closed_fds
from .syntax import PYTHON_NAME, language_of_path
from .text import split_lines
from .types import CompletionResult, EngineSettings, ModelError, Suggestion

DEMO_LINES = 12


class UsageError(Exception):
    """A mistake in the command (a malformed position, a file that cannot be read, an unknown option): one line on
    stderr and status 2, as argparse gives its own, apart from 1's "the engine will not complete there"."""


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors `main` reports: in the JSON too where `complete --json` asks for it."""

    def error(self, message: str) -> NoReturn:
        """Print the usage, as argparse does, and leave the one line that says what was wrong to `main`."""
        self.print_usage(sys.stderr)
        raise UsageError(f"{self.prog}: error: {message}")


def demo_positions(lines: list[str]) -> list[tuple[int, int]]:
    """Code lines of the sample, cursor alternately after the indentation and mid-line."""
    positions = []
    for index, line in enumerate(lines[5:], start=5):
        code = line.strip()
        if not code or code.startswith(("#", '"')):
            continue
        indent = len(line) - len(line.lstrip())
        mid = indent + max(1, len(code) // 2)
        positions.append((index, indent if len(positions) % 2 == 0 else mid))
    step = max(1, len(positions) // DEMO_LINES)
    return positions[::step][:DEMO_LINES]


def _model_path(named: str | None) -> str | None:
    """The bundle --model names: a model another tool keeps (ollama:NAME, a GGUF file, a Hugging Face id in the
    local cache, ...) is converted the first time, into the same place the server converts it to. `~` is expanded
    as in the modelPath setting, for a shell that left it (`--model=~/...`, or quoted)."""
    from .converted import convert_here, source_of

    named = os.path.expanduser(named) if named else named
    source = source_of(named)
    return named if source is None else str(convert_here(source))


OPTION_OF_SETTING = {"beams": "--beams", "max_suggestions": "--suggestions", "max_tokens": "--max-tokens",
                     "threads": "--threads", "search_budget_ms": "--search-budget-ms"}


def _settings(args: argparse.Namespace) -> EngineSettings:
    settings = EngineSettings(model_path=_model_path(args.model), threads=args.threads, device=args.device)
    if getattr(args, "beams", None) is not None:
        settings.beams = args.beams
    if getattr(args, "max_tokens", None) is not None:
        settings.max_tokens = args.max_tokens
    if getattr(args, "search_budget_ms", None) is not None:
        settings.search_budget_ms = args.search_budget_ms
    if getattr(args, "suggestions", None) is not None:
        settings.max_suggestions = args.suggestions
    try:
        settings.validate()
    except ValueError as exc:  # named by the setting; said here by the option the user gave
        field, _, rest = str(exc).partition(" ")
        raise UsageError(f"{OPTION_OF_SETTING.get(field, field)} {rest}") from None
    return settings


def _engine(args: argparse.Namespace):
    settings = _settings(args)
    with interrupts_held():  # numpy's and onnxruntime's modules, whose initialisation makes a Ctrl-C an ImportError
        from .engine import Engine
    return Engine(settings)


MAX_FILE_BYTES = 64 * 1024 * 1024  # far above any source file; /dev/zero or a log would otherwise fill the memory


SKIPPED_NUL_BYTES = "the file looks binary (it holds NUL bytes)"
"""Why a file with NUL bytes, which source text never holds, is not completed: the engine's own check only sees
the text before the cursor."""


STDIN_NAME = "-"
"""The file name that stands for stdin, as in most commands (after `--`, which keeps argparse from taking -:3:5
for an option); on any system, where /dev/stdin is there only on some."""
STDIN_PATHS = (STDIN_NAME, "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0")


def _read_bytes(path: Path, stdin_closed: bool = False) -> bytes:
    """The file's bytes, or a one-line refusal: unreadable, or over MAX_FILE_BYTES; or stdin, which the command
    was started without (its fd then holds /dev/null, which would read as an empty file)."""
    if stdin_closed and str(path) in STDIN_PATHS:
        raise UsageError(f"cannot read {_named(path)}: stdin is closed")
    try:
        if str(path) == STDIN_NAME:
            data = sys.stdin.buffer.read(MAX_FILE_BYTES + 1)
        else:
            with open(path, "rb") as handle:
                data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"cannot read {_named(path)}: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise UsageError(f"cannot read {_named(path)}: larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB")
    return data


def _named(path: Path) -> str:
    """`path` as a message names it: stdin for "-"."""
    return "stdin" if str(path) == STDIN_NAME else str(path)


def _text(data: bytes) -> str | None:
    """A file's text as an editor reads it: UTF-8 without the byte-order mark some Windows editors write, which an
    editor never shows and which would put every column of line 1 one off; or UTF-16, where its mark says so. None for a
    file with NUL bytes (which source text never holds), in the bytes or in UTF-16's text."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        text = data.decode("utf-16", errors="replace")
    elif b"\x00" in data:
        return None
    else:
        text = data.decode("utf-8-sig", errors="replace")
    return None if "\x00" in text else text


def _read(path: Path, stdin_closed: bool = False) -> str:
    """An --open file's text, or a one-line refusal (_read_bytes's, or binary: NUL bytes)."""
    text = _text(_read_bytes(path, stdin_closed))
    if text is None:
        raise UsageError(f"cannot complete in {_named(path)}: it looks binary (it holds NUL bytes)")
    return text


def cmd_complete(args: argparse.Namespace) -> int:
    match = re.fullmatch(r"(.+):([0-9]+):([0-9]+)", args.position)
    if not match:
        raise UsageError(f"position must be FILE:LINE:COL (1-based line and column), not {args.position}")
    path, line, col = Path(match[1]), int(match[2]), int(match[3])
    if line < 1 or col < 1:
        raise UsageError(f"LINE and COL are 1-based: {args.position}")
    stdin_closed = getattr(args, "stdin_closed", False)
    text = _text(_read_bytes(path, stdin_closed))
    others = [_read(Path(other), stdin_closed) for other in args.open or ()]
    if text is None:  # as every position the engine will not complete: the reason, in the JSON too, and 1
        return _report(args, CompletionResult(skipped=SKIPPED_NUL_BYTES))
    engine = _engine(args)
    uri = path.resolve().as_uri()
    language = language_of_path(path.name, PYTHON_NAME)
    _note_unwritten_language(engine, path, language)
    _note_past_the_line(text, line, col)
    engine.open(uri, text, language)  # the filters follow its language's rules
    return _report(args, engine.complete(uri, line - 1, col - 1, others=others))


def _payload(result: CompletionResult, error: str = "") -> dict[str, Any]:
    """`complete --json`'s one object: the same keys whether it answered, skipped the position or was refused."""
    return {"suggestions": [{"line": s.line, "text": s.text, "score": s.score, "source": s.source}
                            for s in result.suggestions],
            "latency_ms": round(result.latency_ms, 2), "skipped": result.skipped,
            "out_of_time": result.out_of_time, "error": error}


def _report(args: argparse.Namespace, result: CompletionResult) -> int:
    """Print `result` as `complete` does (JSON, or lines and a timing on stderr); 1 when it was skipped."""
    if args.json:
        print(json.dumps(_payload(result)))
    elif not result.skipped:
        for s in result.suggestions:
            print(f"{score_label(s, 3):>8}  {s.line}")
        cut = ", search budget ran out" if result.out_of_time else ""
        count = len(result.suggestions)
        print(f"({count} suggestion{'' if count == 1 else 's'} in {result.latency_ms:.1f} ms{cut})", file=sys.stderr)
    if result.skipped:
        print(f"completer: no suggestions at {args.position}: {result.skipped}", file=sys.stderr)
        return 1
    return 0


def _note_unwritten_language(engine, path: Path, language: str) -> None:
    """Say so on stderr when the model is not made for the file's language: it still answers here, as asked,
    but the language server gives no suggestions there unless enabledLanguages lists the language."""
    languages = engine.bundle.languages
    if "*" not in languages and language not in languages:
        print(f"completer: note: {engine.bundle.name} writes {', '.join(languages)}, and {path.name} is "
              f"{language or 'in a language it does not know'}: these lines are guesses (the language server "
              f"answers there only if enabledLanguages lists it)", file=sys.stderr)


def _note_past_the_line(text: str, line: int, col: int) -> None:
    """A column past its line's end is completed at the line's end, as LSP clamps it: say so on stderr."""
    lines = split_lines(text)  # the engine's lines: \r\n, \n and a lone \r each end one
    if line <= len(lines) and col - 1 > len(current := lines[line - 1]):
        print(f"completer: column {col} is past the end of line {line} ({len(current)} characters): completing "
              f"at its end", file=sys.stderr)


def score_label(suggestion: Suggestion, digits: int) -> str:
    """The model's score, or where a line not from the model came from."""
    return f"{suggestion.score:.{digits}f}" if suggestion.score is not None else "(above)"


def cmd_demo(args: argparse.Namespace) -> int:
    engine = _engine(args)
    text = resources.files("completer").joinpath("samples/sample.py").read_text()
    lines = text.split("\n")
    uri = "file:///demo/sample.py"
    engine.open(uri, text)
    info = engine.info()
    positions = demo_positions(lines)
    print(f"model {info['model']} on {', '.join(info['providers'])}; completing {len(positions)} lines of sample.py\n")
    for line, col in positions:
        result = engine.complete(uri, line, col)
        typed = lines[line][:col]
        print(f"line {line + 1:>2} typed {typed!r}  ({result.latency_ms:.1f} ms)")
        print(f"   actual: {lines[line]}")
        for s in result.suggestions:
            marker = "=" if s.line == lines[line] else " "
            print(f" {marker} {score_label(s, 2):>7}: {s.line}")
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    engine = _engine(args)
    import onnxruntime  # loaded, as _engine holds Ctrl-C off while it loads
    info = engine.info()
    info["onnxruntime"] = onnxruntime.__version__
    info["available_providers"] = onnxruntime.get_available_providers()
    print(json.dumps(info, indent=1, default=str))
    return 0


def cmd_convert(args: argparse.Namespace) -> int:
    from .convert import main as convert_main

    return convert_main(args)


def cmd_models(args: argparse.Namespace) -> int:
    from .local_models import main as models_main

    return models_main(args)


def cmd_serve(argv: list[str]) -> int:
    """The language server, as `python -m lsp` runs it (a Ctrl-C before it serves ends the command as the signal
    does, not with a traceback)."""
    from lsp.__main__ import run

    return run(argv, prog="completer serve")


def build_parser() -> argparse.ArgumentParser:
    from lsp import __version__

    parser = _Parser(prog="completer", description="Offline whole-line code completion.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}",
                        help="print the version (the server's, as `completer serve --version` does) and exit")
    sub = parser.add_subparsers(dest="command", required=True)
    common = _Parser(add_help=False)
    common.add_argument("--model", default=None,
                        help="model bundle dir (default: the embedded model); or a model another tool keeps, as "
                             "`completer convert` names it (ollama:NAME, ORG/NAME, a GGUF file), converted the "
                             "first time into the user's cache")
    common.add_argument("--threads", type=int, default=0, metavar="N",
                        help="onnxruntime intra-op threads, 0 to 256 (0: its default)")
    common.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"),
                        help="where the model runs (auto: CUDA where onnxruntime has it, else the CPU)")
    complete = sub.add_parser("complete", parents=[common], help="complete the line at FILE:LINE:COL",
                              epilog="exit status: 0 suggestions printed (maybe none), 1 the engine does not complete "
                                     "there (past the end, a binary file, a line over 4,096 characters: the reason "
                                     "on stderr, and in the JSON's skipped), 2 a mistake in the command (the reason "
                                     "on stderr, and in the JSON's error) or an output that cannot be written")
    complete.add_argument("position", metavar="FILE:LINE:COL", help="the file (-, after --: stdin), and the cursor's "
                                                                     "1-based line and column (in characters) in it")
    complete.add_argument("--beams", type=int, default=None, metavar="N",
                          help="beam width, 1 to 16 (default, or 0: the model's, else 4)")
    complete.add_argument("--max-tokens", type=int, default=None, metavar="N",
                          help="tokens a suggestion may have at most, 1 to 256 (default 24)")
    complete.add_argument("--suggestions", type=int, default=None, metavar="N",
                          help="suggestions printed at most, 1 to 16 (default 3)")
    complete.add_argument("--search-budget-ms", type=int, default=None, metavar="MS",
                          help="stop the beam search this long after it starts, 0 to 60000 (0, the default: no limit)")
    complete.add_argument("--open", action="append", metavar="OTHER_FILE",
                          help="another file open beside FILE, whose head the document's repeats also search "
                               f"(repeatable, most recently edited first; the first {EngineSettings.open_files} "
                               "are searched, as the server's openFiles setting's default)")
    complete.add_argument("--json", action="store_true", help="print JSON")
    complete.set_defaults(func=cmd_complete)
    demo = sub.add_parser("demo", parents=[common], help="complete lines of a bundled sample file")
    demo.add_argument("--beams", type=int, default=None, metavar="N",
                      help="beam width, 1 to 16 (default, or 0: the model's, else 4)")
    demo.set_defaults(func=cmd_demo)
    info = sub.add_parser("info", parents=[common], help="model, providers, threads, sizes, paths")
    info.set_defaults(func=cmd_info)
    convert = sub.add_parser("convert", help="turn a local Hugging Face checkpoint, GGUF file, or Ollama or Tabby "
                                                "model into a bundle")
    convert.add_argument("source", metavar="SOURCE",
                         help="folder with config.json, *.safetensors, tokenizer.json; a GGUF file (llama.cpp, "
                              "LM Studio); ollama:NAME[:TAG] or tabby:ORG/NAME of a model Ollama or Tabby "
                              "downloaded; or ORG/NAME of a model in the "
                              "local Hugging Face cache, ORG/NAME:QUANT picking a file of a GGUF repository as "
                              "llama.cpp's -hf does (`completer models` lists them all; nothing is downloaded)")
    convert.add_argument("--revision", default="main",
                         help="with ORG/NAME: the cached branch, tag or commit to read (default main)")
    convert.add_argument("--out", required=True, metavar="BUNDLE", help="the bundle folder to write")
    weights = convert.add_mutually_exclusive_group()
    weights.add_argument("--int8", action="store_true", help="dynamic INT8 weight matmuls (the default)")
    weights.add_argument("--fp32", action="store_true", help="keep fp32 weights (larger, slower, exact)")
    convert.add_argument("--context", type=int, default=None,
                         help="context window in tokens (default: the smaller of the model's and 2,048)")
    convert.add_argument("--default-context", type=int, default=None, metavar="N",
                         help="the window the engine reads unless the user sets contextTokens (default: the smaller "
                              "of --context and 1,024, which a small CPU prefills in about a second)")
    convert.add_argument("--default-beams", type=int, default=None, metavar="N",
                         help="the beam width unless the user sets beams (default 4)")
    convert.add_argument("--languages", default=None, metavar="LANG[,LANG...]",
                         help="the LSP language ids the model writes, which get suggestions unless the user sets "
                              "enabledLanguages (default: every language; python for a model trained on Python "
                              "alone)")
    convert.add_argument("--name", default=None, help="the bundle's name (default: the --out folder's name)")
    convert.add_argument("--force", action="store_true", help="replace --out if it is a bundle")
    fim = convert.add_mutually_exclusive_group()
    fim.add_argument("--fim", action="store_true",
                     help="fill-in-the-middle even where the model's names say it is a general model (Qwen2.5, not "
                          "Qwen2.5-Coder), whose tokenizer has the markers without training to fill in")
    fim.add_argument("--no-fim", action="store_true",
                     help="no fill-in-the-middle even if the tokenizer has FIM markers (a model not trained for it)")
    convert.add_argument("--progress", action="store_true",
                         help="say each step on stderr even when it is not a terminal (as the VS Code command shows "
                              "it)")
    convert.add_argument("--batch-slots", type=int, default=1, metavar="N",
                         help="searches one model call holds (default 1); N > 1 lets N windows' or documents' "
                              "searches share each call, at some cost to a search alone")
    convert.set_defaults(func=cmd_convert)
    models = sub.add_parser("models", help="the models other tools downloaded here (the Hugging Face cache, Ollama, "
                                           "Tabby, LM Studio, llama.cpp), and which convert")
    models.add_argument("--json", action="store_true", help="print JSON")
    models.set_defaults(func=cmd_models)
    sub.add_parser("serve", help="run the language server (stdio; --tcp --port N for loopback TCP)", add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "serve":
        return cmd_serve(argv[1:])
    closed = hold_closed_fds()
    wants_json = _wants_json(argv)
    if 1 in closed:
        if argv[:1] != ["convert"]:  # whose product is the bundle, not what it prints
            return _refuse("completer: stdout is closed: there is nowhere to print the output", False)
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (the process's own, for its lifetime)
    check_stdout_writes()  # a line the terminal's encoding lacks is shown escaped, not lost
    try:
        try:
            args = build_parser().parse_args(argv)
        except UsageError as exc:
            return _refuse(str(exc) + _dash_hint(argv), wants_json)
        except SystemExit as done:  # --help: written out here, where a full stdout is caught, not at exit
            sys.stdout.flush()
            return done.code if isinstance(done.code, int) else 0
        args.stdin_closed = 0 in closed
        code = args.func(args)
        sys.stdout.flush()  # here, where a reader gone away (`| head`) is caught, not at exit
        return code
    except UsageError as exc:
        return _refuse(f"completer: {exc}", wants_json)
    except ModelError as exc:
        return _refuse(f"completer: model error: {exc}", wants_json)
    except OutputError as exc:  # `> /dev/full`: said, with no JSON, which would not be written either
        drop_stdout()
        return _refuse(f"completer: {exc.strerror}", False)
    except ValueError as exc:
        return _refuse(f"completer: {exc}", wants_json)
    except KeyboardInterrupt:
        return _interrupted(wants_json)
    except BrokenPipeError:  # `completer demo | head`: the reader has gone, and with it the point of going on
        drop_stdout()
        return 128 + 13  # as a process killed by SIGPIPE, which shells know; 1 means "no suggestions" here


def _before_dashes(argv: list[str]) -> list[str]:
    """The command's words that argparse may take for options: those before `--`."""
    return argv[1:argv.index("--")] if "--" in argv else argv[1:]


def _wants_json(argv: list[str]) -> bool:
    """Whether `complete` was asked for JSON, by --json or a prefix argparse takes for it (--js): known before the
    arguments are parsed, for the object that says why they could not be."""
    return argv[:1] == ["complete"] and any(len(word) > 2 and "--json".startswith(word)
                                            for word in _before_dashes(argv))


def _interrupted(wants_json: bool) -> int:
    """Ctrl-C: the JSON a script reads says so; then die of SIGINT, as convert does, so that a shell's loop running
    the command stops too (bash goes on when its child merely exits 130)."""
    if wants_json:
        _refuse("completer: interrupted", True, quiet=True)
    return die_of_signal()


def _dash_hint(argv: list[str]) -> str:
    """Why argparse missed a FILE:LINE:COL that starts with "-" (`-:3:5`, `-notes.py:3:5`): it took it for an
    option, and said only that the position was missing."""
    if argv[:1] == ["complete"] and any(re.fullmatch(r"-.*:[0-9]+:[0-9]+", word) for word in _before_dashes(argv)):
        return (" (a FILE:LINE:COL that starts with '-' reads as an option: write ./-NAME:LINE:COL, or "
                "-- -:LINE:COL, after any options, to complete what stdin holds)")
    return ""


def _refuse(line: str, wants_json: bool, quiet: bool = False) -> int:
    """Say `line` on stderr (unless `quiet`) and, for `complete --json`, put it in the JSON a script reads (without
    the program's name and argparse's "error: ", which the field's name says); status 2."""
    if not quiet:
        print(line, file=sys.stderr)
    if wants_json:
        try:
            print(json.dumps(_payload(CompletionResult(), error=re.sub(r"^completer( \w+)?: (error: )?", "", line))))
            sys.stdout.flush()
        except (OSError, OutputError):  # a reader gone, or no room: the line on stderr has said it
            drop_stdout()
    return 2


if __name__ == "__main__":
    sys.exit(main())
