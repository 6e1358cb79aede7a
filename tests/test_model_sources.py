"""A modelPath that names a model another tool keeps (lsp/model_sources.py): the real server converts it once,
in a process of its own, into the user's cache, answers with the model it had meanwhile, then loads the bundle;
a server started later loads that bundle at once. Built here, as each tool lays its files out; nothing is
downloaded."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("transformers")  # the test extra installs it; CI fails on a skip (scripts/test.sh)
pytest.importorskip("gguf")

from gguf_files import write_gguf  # noqa: E402
from hf_models import checkpoint  # noqa: E402
from lsp_support import SERVER_CMD, server_env  # noqa: E402
from test_hf_cache import _cache_entry  # noqa: E402

from completer.converted import bundle_for, source_of  # noqa: E402
from lsp.rawclient import RawClient  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> Path:
    """A Hugging Face cache holding acme/tiny-coder, the same model as a GGUF file, and an empty Ollama store."""
    root = tmp_path_factory.mktemp("sources")
    checkpoint(root / "tiny", "qwen2", tied=True)
    _cache_entry(root / "hub", "acme/tiny-coder", root / "tiny")
    write_gguf(root / "tiny", root / "tiny-coder-q8_0.gguf", "qwen2", quantized=True)
    (root / "ollama").mkdir()
    return root


@pytest.fixture
def environment(stores, tmp_path, monkeypatch) -> dict[str, str]:
    extra = {"HF_HUB_CACHE": str(stores / "hub"), "OLLAMA_MODELS": str(stores / "ollama"),
             "COMPLETER_CONVERTED_DIR": str(tmp_path / "converted")}
    for key, value in extra.items():
        monkeypatch.setenv(key, value)
    return server_env(**extra)


def _info(client: RawClient) -> dict:
    return client.request("completer/info")["result"]


def _wait_for_model(client: RawClient, prefix: str, timeout: float = 60.0) -> list[dict]:
    """completer/info until the loaded model's name starts with `prefix`; every answer seen on the way."""
    seen, deadline = [], time.monotonic() + timeout
    while True:
        seen.append(_info(client))
        if (seen[-1].get("model") or "").startswith(prefix):
            return seen
        assert time.monotonic() < deadline, f"no model {prefix}*: {seen[-1].get('model')}, {seen[-1]}"
        time.sleep(0.2)


def test_what_names_a_model_to_convert_and_what_does_not(stores, environment, tmp_path):
    bundle = REPO / "models" / "python-base"
    assert [source_of(name) for name in (None, "", "python-base", str(bundle), "acme/not-cached", "acme/x:../y",
                                         str(tmp_path / "nothing-here"))] == [None] * 7
    for name in ("acme/tiny-coder", "acme/tiny-coder:Q8_0", "ollama:qwen2.5-coder:1.5b", "tabby:TabbyML/X",
                 str(stores / "tiny-coder-q8_0.gguf"), str(stores / "tiny")):
        assert source_of(name) == name
    gguf_file = stores / "tiny-coder-q8_0.gguf"
    first = bundle_for(str(gguf_file))
    assert first.parent == tmp_path / "converted" and first.name.startswith("tiny-coder-q8_0.gguf-")
    assert bundle_for(str(gguf_file)) == first  # the same files: the same bundle
    os.utime(gguf_file, ns=(time.time_ns(), time.time_ns()))  # the tool replaced it: converted again
    assert bundle_for(str(gguf_file)) != first
    assert bundle_for("acme/tiny-coder").name.startswith("acme-tiny-coder-")


def test_a_cached_model_is_converted_once_answered_for_meanwhile_then_loaded(stores, environment, tmp_path):
    uri = "file:///work/main.py"
    with RawClient(SERVER_CMD, env=environment) as client:
        client.initialize({"modelPath": "acme/tiny-coder"})
        seen = _wait_for_model(client, "acme-tiny-coder-")
        client.wait_for(lambda m: m.get("method") == "window/showMessage" and "converting it once" in
                        m["params"]["message"])
        client.wait_for(lambda m: m.get("method") == "window/showMessage" and "converted, and now answering" in
                        m["params"]["message"])
        during = [info for info in seen if info.get("model_conversion")]
        assert all(info["model"] == "python-small" and info["model_conversion"]["source"] == "acme/tiny-coder"
                   for info in during)  # the embedded model answered while it converted
        last = seen[-1]
        assert last["model_conversion"] is None and last["model_error"] is None
        assert last["server"]["settings"]["modelPath"] == "acme/tiny-coder"  # the user's setting, as set
        client.open(uri, "import os\n\n\ndef main(argv):\n    return 0\n")
        assert "result" in client.completion(uri, 3, len("def main("))
    bundles = [path for path in (tmp_path / "converted").iterdir() if not path.name.endswith(".lock")]
    assert [path.name for path in bundles] == [last["model"]] and (bundles[0] / "manifest.json").is_file()
    command = json.loads((bundles[0] / "manifest.json").read_text())["conversion"]["command"]
    assert f"--out {bundles[0]} " in command and ".work" not in (bundles[0] / "MODEL.md").read_text()
    made = (bundles[0] / "manifest.json").stat().st_mtime_ns

    with RawClient(SERVER_CMD, env=environment) as client:  # a later session: loaded at once, not converted
        client.initialize({"modelPath": "acme/tiny-coder"})
        seen = _wait_for_model(client, "acme-tiny-coder-")
        assert not any(info.get("model_conversion") for info in seen)
    assert (bundles[0] / "manifest.json").stat().st_mtime_ns == made


def test_a_model_that_cannot_be_converted_says_why_and_the_loaded_model_keeps_answering(environment):
    uri = "file:///work/main.py"
    with RawClient(SERVER_CMD, env=environment) as client:
        client.initialize({"modelPath": "ollama:nothing:latest"})
        shown = client.wait_for(lambda m: m.get("method") == "window/showMessage" and "cannot convert" in
                                m["params"]["message"], timeout=60)
        assert "ollama:nothing:latest" in shown["params"]["message"] and "nothing" in shown["params"]["message"]
        assert not any("converting it once" in m["params"]["message"] for m in client.notifications
                       if m.get("method") == "window/showMessage")  # nothing was found to convert
        info = _info(client)
        assert info["model"] == "python-small" and info["model_conversion"]["state"] == "failed"
        assert "nothing" in info["model_conversion"]["error"]
        client.open(uri, "import os\n\n\ndef main(argv):\n    return 0\n")
        assert "result" in client.completion(uri, 3, len("def main("))
        client.notify("workspace/didChangeConfiguration", {"settings": {"completer": {"beams": 2}}})
        time.sleep(1)  # an unrelated setting does not try the failed conversion again
        assert sum("cannot convert" in m["params"]["message"] for m in client.notifications
                   if m.get("method") == "window/showMessage") == 1


def test_a_model_path_changed_during_a_conversion_stops_it_and_leaves_nothing_half_written(stores, environment,
                                                                                        tmp_path):
    with RawClient(SERVER_CMD, env=environment) as client:
        client.initialize({"modelPath": str(stores / "tiny-coder-q8_0.gguf")})
        client.wait_for(lambda m: m.get("method") == "window/showMessage" and "converting it once" in
                        m["params"]["message"])
        client.notify("workspace/didChangeConfiguration", {"settings": {"completer": {"modelPath": "python-base"}}})
        _wait_for_model(client, "python-base")
        deadline = time.monotonic() + 30
        while _info(client)["model_conversion"] is not None or any(
                path.name.endswith(".work") for path in (tmp_path / "converted").iterdir()):
            assert time.monotonic() < deadline, list((tmp_path / "converted").iterdir())
            time.sleep(0.2)
        time.sleep(1)
        assert _info(client)["model"] == "python-base"


def _shown(client: RawClient, text: str) -> list[str]:
    return [m["params"]["message"] for m in client.notifications
            if m.get("method") == "window/showMessage" and text in m["params"]["message"]]


def test_what_answers_meanwhile_is_the_model_last_loaded_never_a_path_that_was_refused(stores, environment):
    gguf_file = str(stores / "tiny-coder-q8_0.gguf")
    with RawClient(SERVER_CMD, env=environment) as client:
        client.initialize({"modelPath": "python-base"})
        _wait_for_model(client, "python-base")
        client.notify("workspace/didChangeConfiguration", {"settings": {"completer": {"modelPath": "/nowhere/b"}}})
        client.wait_for(lambda m: m.get("method") == "window/showMessage" and "/nowhere/b" in m["params"]["message"])
        client.notify("workspace/didChangeConfiguration", {"settings": {"completer": {"modelPath": gguf_file}}})
        seen = _wait_for_model(client, "tiny-coder-q8_0.gguf-")
        assert {info["model"] for info in seen} <= {"python-base", seen[-1]["model"]}
        assert len(_shown(client, "/nowhere/b")) == 1  # the refused path is never named again
        client.notify("workspace/didChangeConfiguration", {"settings": {"completer": {"modelPath": "acme/tiny-coder"}}})
        during = _wait_for_model(client, "acme-tiny-coder-")
        assert {info["model"] for info in during} <= {seen[-1]["model"], during[-1]["model"]}  # no step back


def test_a_model_path_the_system_cannot_resolve_falls_back_with_a_message(environment):
    uri = "file:///work/main.py"
    with RawClient(SERVER_CMD, env=environment) as client:
        client.initialize({"modelPath": "/tmp/" + "a" * 300 + ".gguf"})  # a name too long for the system
        _wait_for_model(client, "python-small")
        client.open(uri, "import os\n\n\ndef main(argv):\n    return 0\n")
        assert "result" in client.completion(uri, 3, len("def main("))
        for name in ("ollama:" + "x" * 300, "~no-such-user-here/other.gguf", "/tmp/" + "b" * 300):
            client.notify("workspace/didChangeConfiguration", {"settings": {"completer": {"modelPath": name}}})
        time.sleep(1)
        assert "result" in client.completion(uri, 3, len("def main("))


def test_every_spelling_of_a_file_is_one_bundle(stores, environment, monkeypatch):
    monkeypatch.chdir(stores)
    monkeypatch.setenv("HOME", str(stores.parent))
    spellings = ["tiny-coder-q8_0.gguf", "./tiny-coder-q8_0.gguf", str(stores / "tiny-coder-q8_0.gguf"),
                 f"~/{stores.name}/tiny-coder-q8_0.gguf"]
    assert len({bundle_for(name) for name in spellings}) == 1


def test_two_windows_converting_one_model_take_turns_and_what_a_killed_converter_left_is_cleared(stores,
                                                                                                 environment):
    import asyncio

    from lsp.model_sources import Conversion

    bundle = bundle_for("acme/tiny-coder")
    left = bundle.parent / f".{bundle.name}.work" / ".half-written"
    left.mkdir(parents=True)  # as a converter killed mid-way leaves its work folder

    async def both() -> list[str | None]:
        return await asyncio.gather(*(Conversion("acme/tiny-coder", bundle).run() for _ in range(2)))

    assert asyncio.run(both()) == [None, None]
    assert (bundle / "manifest.json").is_file() and not left.parent.exists()


def test_a_conversion_whose_server_is_killed_stops_and_removes_what_it_began(stores, environment, tmp_path):
    import signal

    with RawClient(SERVER_CMD, env=environment) as client:
        client.initialize({"modelPath": str(stores / "tiny")})
        client.wait_for(lambda m: m.get("method") == "window/showMessage" and "converting it once" in
                        m["params"]["message"])
        os.kill(client.proc.pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    work = [path for path in (tmp_path / "converted").glob(".*.work")]
    while any(any(folder.iterdir()) for folder in work if folder.exists()) or _converters(tmp_path):
        assert time.monotonic() < deadline, ([str(path) for folder in work for path in folder.rglob("*")],
                                             _converters(tmp_path))  # what was left, and who still runs
        time.sleep(0.2)


def _converters(tmp_path: Path) -> list[int]:
    """The pids of `completer convert` processes writing under tmp_path."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if "convert" in command and str(tmp_path) in command:
            found.append(int(entry.name))
    return found


def test_the_remote_backend_stops_a_conversion_and_a_failed_one_is_tried_again_when_named_again(stores,
                                                                                             environment):
    remote = {"backend": "openai", "endpoint": "http://127.0.0.1:9/v1", "modelPath": None}
    with RawClient(SERVER_CMD, env=environment) as client:
        client.initialize({"modelPath": str(stores / "tiny")})
        client.wait_for(lambda m: m.get("method") == "window/showMessage" and "converting it once" in
                        m["params"]["message"])
        client.notify("workspace/didChangeConfiguration", {"settings": {"completer": remote}})
        deadline = time.monotonic() + 20
        while _info(client).get("model_conversion") is not None:
            assert time.monotonic() < deadline, "the conversion went on for a backend that has no local model"
            time.sleep(0.2)
        client.notify("workspace/didChangeConfiguration", {"settings": {"completer": {
            "backend": "local", "modelPath": "ollama:nothing:latest"}}})
        client.wait_for(lambda m: m.get("method") == "window/showMessage" and "cannot convert" in
                        m["params"]["message"], timeout=60)
        client.notify("workspace/didChangeConfiguration", {"settings": {"completer": remote}})
        client.notify("workspace/didChangeConfiguration", {"settings": {"completer": {
            "backend": "local", "modelPath": "ollama:nothing:latest"}}})
        deadline = time.monotonic() + 60
        while len(_shown(client, "cannot convert")) < 2:  # named again: tried again
            assert time.monotonic() < deadline, _shown(client, "cannot convert")
            time.sleep(0.2)


def _cli(environment: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "completer", *args], env=environment, capture_output=True,
                          text=True, timeout=300)


def test_the_cli_converts_a_named_model_once_into_the_bundle_the_server_loads(stores, environment, tmp_path):
    source = tmp_path / "main.py"
    source.write_text("import os\n\n\ndef main(argv):\n    return 0\n")
    first = _cli(environment, "complete", f"{source}:4:10", "--model", "acme/tiny-coder", "--json")
    assert first.returncode in (0, 1), first.stderr  # 1: no line from a random model, said on stderr
    assert "converting it once" in first.stderr and "Traceback" not in first.stderr
    assert "suggestions" in json.loads(first.stdout)  # the converter's own lines go to stderr, not into the JSON
    bundle = bundle_for("acme/tiny-coder")
    assert (bundle / "manifest.json").is_file()
    assert [path.name for path in (tmp_path / "converted").iterdir() if not path.name.startswith(".")] == [bundle.name]

    again = _cli(environment, "info", "--model", "acme/tiny-coder")  # used at once: not converted again
    assert again.returncode == 0 and "converting" not in again.stderr
    assert json.loads(again.stdout)["model"] == bundle.name
    with RawClient(SERVER_CMD, env=environment) as client:  # the server loads what the CLI made
        client.initialize({"modelPath": "acme/tiny-coder"})
        assert not any(info.get("model_conversion") for info in _wait_for_model(client, bundle.name))


def test_a_converted_bundle_damaged_since_is_converted_again_by_the_cli_and_the_server(stores, environment, tmp_path):
    """A bundle in the user's cache whose weights were truncated or removed since (a full disk, a cleaner of caches)
    was still taken for the bundle of its model: the loader refused it by its checksums, the CLI exited 2 and the
    server fell back to the default model, every time, until the user found and deleted the folder. Being a cache, it
    is now made again."""
    source = tmp_path / "main.py"
    source.write_text("import os\n\n\ndef main(argv):\n    return 0\n")
    bundle = bundle_for("acme/tiny-coder")
    assert _cli(environment, "info", "--model", "acme/tiny-coder").returncode == 0
    os.truncate(bundle / "model.onnx.data", 1000)
    again = _cli(environment, "complete", f"{source}:4:10", "--model", "acme/tiny-coder", "--json")
    assert again.returncode in (0, 1) and "converting it once" in again.stderr, again.stderr
    assert json.loads(again.stdout)["error"] == ""
    (bundle / "model.onnx.data").unlink()
    with RawClient(SERVER_CMD, env=environment) as client:
        client.initialize({"modelPath": "acme/tiny-coder"})
        seen = _wait_for_model(client, bundle.name)
        assert any(info.get("model_conversion") for info in seen) and seen[-1]["model_error"] is None
        assert not _shown(client, "cannot load")
    assert sorted(path.name for path in (tmp_path / "converted").iterdir()) == [f".{bundle.name}.lock", bundle.name]


def test_a_converted_bundle_damaged_under_a_running_worker_is_converted_again_not_given_up(stores, environment):
    """The bundle the worker answers from, truncated under it (a full disk, a cleaner of caches: its memory map then
    kills it, SIGBUS; killed here): the replacement was handed that bundle again, as the model to answer with while
    the damaged one converted again, and could not load it; the server then fell back to the default model for good,
    modelPath set aside and the conversion it had just started stopped. Now the default model answers while the
    bundle is made again, and then the bundle does, modelPath as the user set it."""
    import signal

    bundle = bundle_for("acme/tiny-coder")
    with RawClient(SERVER_CMD, env=environment) as client:
        client.initialize({"modelPath": "acme/tiny-coder"})
        info = _wait_for_model(client, bundle.name)[-1]
        os.truncate(bundle / "model.onnx.data", 1000)
        os.kill(info["server"]["worker_pid"], signal.SIGKILL)
        deadline = time.monotonic() + 120
        while (info := _info(client))["server"]["worker_restarts"] < 1 or info.get("model_conversion") \
                or info.get("model") != bundle.name:
            assert time.monotonic() < deadline and info["server"]["settings"]["modelPath"] == "acme/tiny-coder", info
            time.sleep(0.2)
        assert info["model_error"] is None and not _shown(client, "using the default")
        assert _shown(client, "converted, and now answering")


def test_the_cli_says_in_one_line_why_a_named_model_cannot_be_converted(environment, tmp_path):
    failed = _cli(environment, "info", "--model", "ollama:nothing:latest")
    assert failed.returncode == 2 and "Traceback" not in failed.stderr
    said = failed.stderr.strip().splitlines()[-1]
    assert said.startswith("completer: model error: cannot convert ollama:nothing:latest: Ollama has no model")
    assert failed.stderr.count("Ollama has no model") == 1  # the converter's reason, said once
    assert not [path for path in (tmp_path / "converted").iterdir() if not path.name.endswith(".lock")]
    unusable = {**environment, "COMPLETER_CONVERTED_DIR": str(tmp_path / ("d" * 300))}  # a name too long
    failed = _cli(unusable, "info", "--model", "acme/tiny-coder")
    assert failed.returncode == 2 and "Traceback" not in failed.stderr
    assert failed.stderr.strip().splitlines() == [
        f"completer: model error: cannot convert acme/tiny-coder into the user's cache ({tmp_path / ('d' * 300)}): "
        "File name too long"]


def test_the_cli_relays_the_converters_steps_and_keeps_its_reason(capsys):
    from completer.converted import _relayed

    class Stream:
        def __init__(self, chunks: list[bytes]) -> None:
            self.chunks = chunks

        def read1(self, _size: int) -> bytes:
            return self.chunks.pop(0) if self.chunks else b""

    reading = "reading wéights\n".encode()
    assert _relayed(Stream([reading[:10], reading[10:], b"\rlayers [#.] 1/2", b"\rlayers [##] 2/2completer con",
                            b"vert: out of memory\n"])) == "out of memory"
    assert capsys.readouterr().err == "reading wéights\n\rlayers [#.] 1/2\rlayers [##] 2/2\n"
    assert _relayed(Stream([b"completer convert: no newline"])) == "no newline"
    assert _relayed(Stream([b"note: see completer convert: its help\n"])) == ""  # not at a line's start
    assert capsys.readouterr().err == "note: see completer convert: its help\n"


def test_a_cli_killed_while_it_converts_stops_its_converter(stores, environment, tmp_path):
    import signal

    source = tmp_path / "main.py"
    source.write_text("import os\n")
    cli = subprocess.Popen([sys.executable, "-m", "completer", "info", "--model", str(stores / "tiny")],
                           env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert cli.stderr is not None
    for line in cli.stderr:
        if "converting it once" in line:
            break
    cli.send_signal(signal.SIGTERM)  # not Ctrl-C: the CLI dies at once, and its converter notices
    cli.wait(30)
    deadline = time.monotonic() + 30
    while _converters(tmp_path):
        assert time.monotonic() < deadline, _converters(tmp_path)
        time.sleep(0.2)
    assert not [path for path in (tmp_path / "converted").iterdir() if not path.name.startswith(".")]


def test_a_converter_is_asked_to_stop_by_sigint_and_on_windows_terminated(monkeypatch):
    """Popen.send_signal refuses SIGINT on Windows; there the converter is terminated instead (its work folder is
    removed by work_folder), and a converter that has just exited is no error."""
    import signal

    from completer.converted import interrupt

    class Converter:
        def __init__(self, gone: bool = False) -> None:
            self.calls: list[object] = []
            self.gone = gone

        def send_signal(self, sig: int) -> None:
            if os.name == "nt":
                raise ValueError(f"Unsupported signal: {sig}")  # as subprocess.Popen does there
            self._called(sig)

        def terminate(self) -> None:
            self._called("terminate")

        def _called(self, what: object) -> None:
            if self.gone:
                raise ProcessLookupError
            self.calls.append(what)

    converter = Converter()
    interrupt(converter)
    assert converter.calls == [signal.SIGINT]
    interrupt(Converter(gone=True))
    with monkeypatch.context() as patched:
        patched.setattr(os, "name", "nt")
        converter = Converter()
        interrupt(converter)
        interrupt(Converter(gone=True))
    assert converter.calls == ["terminate"]


def test_a_converter_that_fails_unexpectedly_is_one_line_to_the_editor(environment, tmp_path):
    """A converter that dies of an exception it does not expect prints a traceback; the editor gets its last
    line as the reason, once, and the traceback stays in the server's log."""
    broken = tmp_path / "broken"
    (broken / "onnx").mkdir(parents=True)  # the converter's onnx import fails as no missing module does
    (broken / "onnx" / "__init__.py").write_text("raise RuntimeError('onnx is broken here')\n")
    env = {**environment, "PYTHONPATH": f"{broken}{os.pathsep}{environment['PYTHONPATH']}"}
    with RawClient(SERVER_CMD, env=env) as client:
        client.initialize({"modelPath": "acme/tiny-coder"})
        shown = client.wait_for(lambda m: m.get("method") == "window/showMessage" and "cannot convert" in
                                m["params"]["message"], timeout=60)
        assert "RuntimeError: onnx is broken here" in shown["params"]["message"], shown
        info = _info(client)
        assert info["model"] == "python-small" and "RuntimeError: onnx is broken here" in \
            info["model_conversion"]["error"]
        relayed = [m["params"]["message"] for m in client.notifications
                   if m.get("method") in ("window/logMessage", "window/showMessage")]
        assert sum("Traceback" in text for text in relayed) == 1, relayed  # the whole traceback, in one message
        assert not any(text.lstrip().startswith('File "') for text in relayed), relayed


CONVERTER_FAILURES = {
    "raised during the bar over the layers": (
        "import sys\nsys.stderr.write('reading the weights\\nlayers [#..] 1/3'); sys.stderr.flush()\n"
        "raise RuntimeError('boom')", "completer convert failed: RuntimeError: boom"),
    "raised while handling another": (
        "try:\n    raise KeyError('first')\nexcept KeyError:\n    raise ValueError('second')",
        "completer convert failed: ValueError: second"),
    "killed after a traceback it printed and went on from": (
        "import os, signal, traceback\ntry:\n    raise OSError('a warning')\nexcept OSError:\n"
        "    traceback.print_exc()\nimport sys\nprint('quantizing', file=sys.stderr, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)", "completer convert was killed (SIGKILL; out of memory?) while quantizing"),
    "a reason of its own after a traceback": (
        "import traceback, sys\ntry:\n    1 / 0\nexcept ZeroDivisionError:\n    traceback.print_exc()\n"
        "print('completer convert: the weights do not fit', file=sys.stderr)\nsys.exit(2)",
        "the weights do not fit"),
}


@pytest.mark.parametrize("case", list(CONVERTER_FAILURES))
def test_why_a_converter_failed_is_read_from_its_last_words(case, tmp_path, monkeypatch, caplog):
    """Conversion._convert against stand-in converters: the reason is the exception it died of (the last one
    raised, also when it interrupts the bar over the layers), a kill over anything raised before it, and the
    converter's own reason over both; the traceback is logged as one record."""
    import asyncio
    import logging

    from lsp import model_sources

    script, expected = CONVERTER_FAILURES[case]
    monkeypatch.setattr(model_sources, "converter_command", lambda *_args, **_kw: [sys.executable, "-c", script])
    conversion = model_sources.Conversion("acme/tiny-coder", tmp_path / "bundle")
    with caplog.at_level(logging.INFO, logger="lsp.model_sources"):
        reason = asyncio.run(conversion._convert(tmp_path / "out"))
    assert reason == expected
    tracebacks = [r for r in caplog.records if "Traceback" in r.getMessage()]
    assert len(tracebacks) == 1
    assert not any(r.getMessage().lstrip().startswith('File "') for r in caplog.records)


def _slow_start(monkeypatch, tmp_path: Path):
    """A stand-in converter that writes its pid and sleeps, started 0.3 s after it is asked for, so that a stop
    or a cancellation can come while it starts."""
    import asyncio

    from lsp import model_sources

    script = "import os, sys, time\nopen(sys.argv[1], 'w').write(str(os.getpid()))\ntime.sleep(600)"
    monkeypatch.setattr(model_sources, "converter_command",
                        lambda *_args, **_kw: [sys.executable, "-c", script, str(tmp_path / "pid")])
    start = asyncio.create_subprocess_exec

    async def slow_start(*args, **kwargs):
        await asyncio.sleep(0.3)
        return await start(*args, **kwargs)

    monkeypatch.setattr(model_sources.asyncio, "create_subprocess_exec", slow_start)
    return model_sources.Conversion("acme/tiny-coder", tmp_path / "bundle")


def test_a_conversion_stopped_while_its_converter_starts_stops_the_converter(tmp_path, monkeypatch):
    """`stop` waits for a converter that is starting and then stops it, rather than finding no process and
    letting it run to its end."""
    import asyncio

    conversion = _slow_start(monkeypatch, tmp_path)

    async def scenario() -> str | None:
        converting = asyncio.ensure_future(conversion._convert(tmp_path / "out"))
        await asyncio.sleep(0.1)
        assert conversion.process is None  # still starting
        await asyncio.wait_for(conversion.stop(), 30)
        assert conversion.process is not None and conversion.process.returncode is not None
        return await asyncio.wait_for(converting, 30)

    assert asyncio.run(scenario()) == "stopped"


def test_a_conversion_cancelled_while_its_converter_starts_stops_the_converter(tmp_path, monkeypatch):
    """The task converting is cancelled while the converter starts (the server's loop torn down): the start is
    shielded, so it completes, and the converter is stopped as soon as it exists; `stop` then has nothing to do."""
    import asyncio

    conversion = _slow_start(monkeypatch, tmp_path)

    async def scenario() -> int | None:
        converting = asyncio.ensure_future(conversion._convert(tmp_path / "out"))
        await asyncio.sleep(0.1)
        converting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await converting
        assert conversion.cancelled
        process = await asyncio.wait_for(asyncio.shield(conversion._spawning), 30)
        code = await asyncio.wait_for(process.wait(), 30)  # stopped without anyone calling stop
        await asyncio.wait_for(conversion.stop(), 5)
        return code

    assert asyncio.run(scenario()) != 0


def test_a_stop_cancelled_while_the_converter_starts_still_stops_the_converter(tmp_path, monkeypatch):
    """The stop itself is cancelled (the server's loop torn down) while it waits for the converter to start: the
    converter is stopped once it exists, instead of running on unseen."""
    import asyncio

    conversion = _slow_start(monkeypatch, tmp_path)

    async def scenario() -> int | None:
        converting = asyncio.ensure_future(conversion._convert(tmp_path / "out"))
        await asyncio.sleep(0.1)
        stopping = asyncio.ensure_future(conversion.stop())
        await asyncio.sleep(0.05)
        stopping.cancel()
        with pytest.raises(asyncio.CancelledError):
            await stopping
        process = await asyncio.wait_for(asyncio.shield(conversion._spawning), 30)
        code = await asyncio.wait_for(process.wait(), 30)
        assert await asyncio.wait_for(converting, 30) == "stopped"
        return code

    assert asyncio.run(scenario()) != 0


def test_closing_waits_for_a_conversion_stopped_just_before(tmp_path, monkeypatch):
    """modelPath changed (the running conversion stopped in a task of its own), then the server shuts down: close
    waits for that stop too, so no converter outlives it."""
    import asyncio

    from lsp import model_sources

    conversion = _slow_start(monkeypatch, tmp_path)

    async def scenario() -> None:
        async def converted(_source: str, _error: str | None) -> None:
            return None

        sources = model_sources.ModelSources(asyncio.ensure_future, converted, lambda _message: None)
        sources.running = conversion
        converting = asyncio.ensure_future(conversion._convert(tmp_path / "out"))
        await asyncio.sleep(0.5)  # started
        assert conversion.process is not None and conversion.process.returncode is None
        sources._stop_running()
        await asyncio.wait_for(sources.close(), 30)
        assert conversion.process.returncode is not None
        await asyncio.wait_for(converting, 30)

    asyncio.run(scenario())


def test_a_model_folder_whose_name_begins_with_a_dash_is_the_model_read_not_an_option(tmp_path: Path):
    """modelPath `-h` (a checkpoint folder of that name, relative to the server's folder) reached the converter as
    its option: it printed its usage and exited 0, converting nothing; `--name=...` would have set an option."""
    from completer.converted import converter_command

    (tmp_path / "-h").mkdir()
    (tmp_path / "-h" / "config.json").write_text('{"model_type": "not-a-family"}')
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    done = subprocess.run(converter_command("-h", tmp_path / "out", progress=False), cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert "usage:" not in done.stdout + done.stderr
    assert done.returncode != 0 and "model_type 'not-a-family' is not supported" in done.stderr
