"""Settings changed while documents are open and searches run, as an editor sends them when the user edits its
settings: through the real server process and its worker, with a raw client."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from fake_endpoint import Behaviour, FakeEndpoint
from lsp.rawclient import RawClient
from lsp.settings import ServerSettings
from lsp_support import OTHER_FILE, REPO, SAMPLE_TEXT, SERVER_CMD, server_env, workspace_server

URI = "file:///work/live.py"
TEXT = "import os\nos.pa"
CURSOR = (1, 5)


def _ready(client: RawClient) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while True:
        info = client.request("completer/info")["result"]
        if info["server"]["worker_pid"] and info.get("model"):
            return info
        assert time.monotonic() < deadline, "the worker never became ready"
        time.sleep(0.05)


def _started(tmp_path: Path, capabilities: dict[str, Any] | None = None, **env: str) -> RawClient:
    """A server with the document open and its worker ready; its stderr in tmp_path/stderr."""
    with open(tmp_path / "stderr", "wb") as stderr:  # the server writes to its own copy
        client = RawClient(SERVER_CMD, env=server_env(**env), stderr=stderr)
    client.initialize(capabilities=capabilities)
    _ready(client)
    client.open(URI, TEXT)
    return client


def _change(client: RawClient, settings: Any) -> None:
    client.notify("workspace/didChangeConfiguration", {"settings": settings})


def _ask(client: RawClient, method: str = "textDocument/completion", uri: str = URI) -> Any:
    """A request at `CURSOR`, the end of the document's last line (in `TEXT`, and in live.js below)."""
    params: dict[str, Any] = {"textDocument": {"uri": uri}, "position": {"line": CURSOR[0], "character": CURSOR[1]}}
    if method == "textDocument/inlineCompletion":
        params["context"] = {"triggerKind": 2}
    return client.request_nowait(method, params)


def _items(response: dict[str, Any]) -> list[dict[str, Any]]:
    assert "result" in response, response
    return response["result"]["items"]


def _clean_log(tmp_path: Path) -> str:
    text = (tmp_path / "stderr").read_text()
    assert "Traceback" not in text and " ERROR " not in text, text
    return text


def _shown(client: RawClient) -> list[str]:
    return [m["params"]["message"] for m in list(client.notifications) if m.get("method") == "window/showMessage"]


def test_a_request_sent_right_after_a_settings_change_is_answered_with_the_new_settings(tmp_path):
    """While the worker loaded the model of a change, a request sent after the change was answered with the settings
    before it: from the last search's result (three items after maxSuggestions 1), or at all (inlineCompletions
    false). Requests now wait for a change under way, as completer/info did."""
    client = _started(tmp_path)
    try:
        assert len(_items(client.wait(_ask(client), 60))) == 3
        _change(client, {"completer": {"modelPath": "python-base", "maxSuggestions": 1}})
        assert len(_items(client.wait(_ask(client), 60))) == 1
        _change(client, {"completer": {"modelPath": None, "inlineCompletions": False}})
        assert _items(client.wait(_ask(client, "textDocument/inlineCompletion"), 60)) == []
    finally:
        client.close()
    _clean_log(tmp_path)


def test_a_search_stopped_by_a_model_switch_is_asked_of_the_new_model(tmp_path):
    """Loading another model (modelPath, threads or device) stops the client's searches in the worker: the request in
    flight, and one sent right after the change that joined it, were answered RequestCancelled, which the client
    never asked for. Both now get the new model's lines."""
    client = _started(tmp_path, COMPLETER_WORKER_STEP_DELAY_MS="100")
    try:
        for change in ({"modelPath": "python-base"}, {"threads": 1}):
            client.open(URI, TEXT, version=2)  # anew: no finished search to answer from
            in_flight = _ask(client)
            time.sleep(0.3)
            _change(client, {"completer": change})
            after = _ask(client)
            assert _items(client.wait(in_flight, 60)) and _items(client.wait(after, 60))
        info = client.request("completer/info")["result"]
        assert info["model"] == "python-base" and info["server"]["cancelled"] == 0, info
    finally:
        client.close()
    _clean_log(tmp_path)


def test_a_search_stopped_by_two_model_switches_in_turn_is_asked_again_each_time(tmp_path):
    """A search stopped by a model switch was asked again once: stopped a second time, by the next switch while the
    first retry ran, it was answered RequestCancelled, which the client never asked for, and the user lost the line."""
    client = _started(tmp_path, COMPLETER_WORKER_STEP_DELAY_MS="100")
    try:
        in_flight = _ask(client)
        time.sleep(0.3)
        _change(client, {"completer": {"modelPath": "python-base"}})
        deadline = time.monotonic() + 30
        while (info := client.request("completer/info")["result"])["server"]["searches_stopped_in_worker"] < 1:
            assert time.monotonic() < deadline, info
            time.sleep(0.05)
        time.sleep(0.3)  # the search asked again of python-base is running
        _change(client, {"completer": {"modelPath": None}})
        assert _items(client.wait(in_flight, 60))
        info = client.request("completer/info")["result"]
        assert info["model"] == "python-small" and info["server"]["searches_stopped_in_worker"] == 2, info
        assert info["server"]["cancelled"] == 0, info
    finally:
        client.close()
    _clean_log(tmp_path)


def test_a_worker_restarted_after_its_bundle_moved_falls_back_to_the_default_model_and_says_so(tmp_path):
    """The worker that replaced one that died (a crash; a converted bundle's weights truncated in place, which its
    memory map turns into SIGBUS; the shared engine killed) loaded the model of the settings again: its bundle since
    moved, it had none, and completions stopped without a word to the user (an error in the log alone). Now the server
    falls back to the default model, as at startup, with one popup that says why."""
    bundle = tmp_path / "mine"
    shutil.copytree(REPO / "models" / "python-small", bundle, ignore=shutil.ignore_patterns("training"))
    with open(tmp_path / "stderr", "wb") as stderr:
        client = RawClient(SERVER_CMD, env=server_env(), stderr=stderr)
    try:
        client.initialize({"modelPath": str(bundle)})
        info = _ready(client)
        client.open(URI, TEXT)
        bundle.rename(tmp_path / "moved")
        os.kill(info["server"]["worker_pid"], signal.SIGKILL)
        shown = client.wait_for(lambda m: m.get("method") == "window/showMessage", timeout=30)["params"]["message"]
        assert "using the default" in shown and f"{bundle} is not a directory" in shown, shown
        deadline = time.monotonic() + 30
        while (info := client.request("completer/info")["result"])["server"]["worker_restarts"] < 1 \
                or info.get("model_error") or not info.get("model"):
            assert time.monotonic() < deadline, info
            time.sleep(0.05)
        assert info["server"]["settings"]["modelPath"] is None and _items(client.wait(_ask(client), 60))
        assert len(_shown(client)) == 1, _shown(client)
    finally:
        client.close()


def test_a_request_in_flight_when_a_setting_turns_its_answer_off_gets_none(tmp_path):
    """enabledLanguages, inlineCompletions and completionItems were read before the search only: a request in flight
    when the user turned them off was answered with lines, in a language or a kind of suggestion just turned off."""
    client = _started(tmp_path, COMPLETER_WORKER_STEP_DELAY_MS="100")
    try:
        script = "file:///work/live.js"
        client.open(script, "import os from 'os';\nos.ho", "javascript")
        offs = [({"enabledLanguages": ["python", "javascript"]}, {"enabledLanguages": ["python"]}, script),
                ({"inlineCompletions": True}, {"inlineCompletions": False}, URI),
                ({"completionItems": True}, {"completionItems": False}, URI)]
        for version, (on, off, uri) in enumerate(offs, 2):
            _change(client, {"completer": on})
            method = "textDocument/inlineCompletion" if "inlineCompletions" in on else "textDocument/completion"
            assert _items(client.wait(_ask(client, method, uri), 60)), on  # lines while it is on
            client.change(uri, version, (0, 0), (0, 0), "")  # an edit: the next request searches anew
            in_flight = _ask(client, method, uri)
            time.sleep(0.3)
            _change(client, {"completer": off})
            assert _items(client.wait(in_flight, 60)) == [], off
    finally:
        client.close()
    _clean_log(tmp_path)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_request_in_flight_when_the_backend_changes_is_not_called_stale(tmp_path):
    """A new backend came with a new count of each document's edits: the request in flight, asked again of the new
    backend, was refused ContentModified ("the document changed"), though nothing had changed."""
    client = _started(tmp_path, COMPLETER_WORKER_STEP_DELAY_MS="100")
    try:
        in_flight = _ask(client)
        time.sleep(0.3)
        _change(client, {"completer": {"backend": "openai", "endpoint": f"http://127.0.0.1:{_closed_port()}/v1"}})
        assert _items(client.wait(in_flight, 60)) == []  # the endpoint is down: no lines, and no error
        in_flight = _ask(client)
        _change(client, {"completer": {"backend": "local"}})
        assert "result" in client.wait(in_flight, 60)
        assert _items(client.wait(_ask(client), 60))
    finally:
        client.close()
    _clean_log(tmp_path)


def test_a_request_in_flight_when_the_backend_changes_gets_the_new_backends_lines(tmp_path):
    """It was asked again of the new backend as soon as the old one stopped, before the new one had started: the
    endpoint, not configured yet, gave no lines (nor did it get the request), though the next request got its."""
    endpoint = FakeEndpoint(Behaviour(line=lambda prompt: "th.join(a, b)")).start()
    client = _started(tmp_path, COMPLETER_WORKER_STEP_DELAY_MS="100")
    try:
        in_flight = _ask(client)
        time.sleep(0.3)
        _change(client, {"completer": {"backend": "openai", "endpoint": endpoint.url}})
        assert [item["label"] for item in _items(client.wait(in_flight, 60))] == ["os.path.join(a, b)"]
    finally:
        client.close()
        endpoint.stop()
    _clean_log(tmp_path)


REGISTERING = ('import handlers\n\n\ndef install(registry):\n'
               '    registry.register_handler("zq_alpha", handle_zq_alpha, priority=7)')
"""A registration at the end of a file, written out in the workspace's other file (OTHER_FILE) with the next one
after it, `zq_beta`, which only that file holds."""


@pytest.mark.parametrize("change", [{"excludeFiles": ["vault/"]}, {"workspaceContext": False}])
def test_a_file_no_longer_read_lends_no_line_searched_ahead_of_the_change(tmp_path, change):
    """The worker searches the line after Enter while the user pauses, with the workspace's snippets of then, and
    answers the keystroke it foresaw from that search without the model. After excludeFiles took the file that held
    the line (or workspaceContext turned off), the line after Enter still offered it, `zq_beta` and all, from the
    search run before the change. That search is now dropped, and the keystroke searched with what may be read."""
    (tmp_path / "vault").mkdir()
    (tmp_path / "vault" / "registry.py").write_text(OTHER_FILE)
    (tmp_path / "install.py").write_text(REGISTERING + "\n")
    client = workspace_server(tmp_path)
    try:
        deadline = time.monotonic() + 30
        while (index := client.request("completer/info")["result"]["server"]["workspace_index"])["building"]:
            assert time.monotonic() < deadline, index
            time.sleep(0.05)
        uri, end = (tmp_path / "install.py").as_uri(), len(REGISTERING.split("\n")[-1])
        client.open(uri, REGISTERING)
        assert "result" in client.completion(uri, 4, end)
        time.sleep(3)  # the user pauses: the line after Enter is searched ahead (a request meanwhile would stop it)
        client.change(uri, 2, (4, end), (4, end), "\n    ")

        def after_enter() -> tuple[list[str], int]:
            lines = [item["textEdit"]["newText"] for item in client.completion(uri, 5, 4)["result"]["items"]]
            return lines, client.request("completer/info")["result"]["server"]["last_model_runs"]

        lines, runs = after_enter()
        assert runs == 0 and any("zq_beta" in line for line in lines), (lines, runs)  # answered from the search ahead
        client.notify("workspace/didChangeConfiguration", {"settings": {"completer": change}})
        lines, runs = after_enter()
        assert runs > 0 and not any("zq_beta" in line for line in lines), (lines, runs)
    finally:
        client.close()


def test_settings_null_are_pulled_with_workspace_configuration(tmp_path):
    """A client in LSP's pull model sends didChangeConfiguration with null settings and answers workspace/configuration:
    the server ignored the notification, and the user's change never applied."""
    client = _started(tmp_path, capabilities={"workspace": {"configuration": True}})
    try:
        client.configuration["completer"] = {"beams": 2, "maxSuggestions": 1}
        _change(client, None)
        deadline = time.monotonic() + 10
        while (settings := client.request("completer/info")["result"]["server"]["settings"])["beams"] != 2:
            assert time.monotonic() < deadline, settings
            time.sleep(0.05)
        assert settings["maxSuggestions"] == 1
        pulls = [r for r in client.server_requests if r["method"] == "workspace/configuration"]
        assert [item["section"] for item in pulls[0]["params"]["items"]] == ["completer"]
        assert len(_items(client.wait(_ask(client), 60))) == 1
    finally:
        client.close()
    _clean_log(tmp_path)


def test_a_setting_removed_from_a_pulled_configuration_goes_back_to_its_value_at_startup(tmp_path):
    """workspace/configuration answers with the client's whole section: the server merged it as a change, so a key
    the user removed from their configuration kept its value until the server restarted (beams stayed 2). It now
    goes back to its value at startup: initializationOptions' (maxSuggestions 2), else its default; a pull that
    finds no section (null) changes nothing. Each section sets its own searchBudgetMs, to tell it was applied."""
    with open(tmp_path / "stderr", "wb") as stderr:
        client = RawClient(SERVER_CMD, env=server_env(), stderr=stderr)
    try:
        client.initialize({"completer": {"maxSuggestions": 2}}, capabilities={"workspace": {"configuration": True}})
        _ready(client)

        def pulled(section: dict[str, Any]) -> dict[str, Any]:
            client.configuration["completer"] = section
            _change(client, None)
            deadline = time.monotonic() + 10
            while (settings := client.request("completer/info")["result"]["server"]["settings"])["searchBudgetMs"] \
                    != section["searchBudgetMs"]:
                assert time.monotonic() < deadline, settings
                time.sleep(0.02)
            return settings

        settings = pulled({"beams": 2, "maxSuggestions": 1, "excludeFiles": ["vault/"], "searchBudgetMs": 1001})
        assert (settings["beams"], settings["maxSuggestions"], settings["excludeFiles"]) == (2, 1, ["vault/"])
        settings = pulled({"maxSuggestions": 1, "searchBudgetMs": 1002})
        assert (settings["beams"], settings["maxSuggestions"], settings["excludeFiles"]) \
            == (0, 1, list(ServerSettings().exclude_files))
        settings = pulled({"beams": 3, "searchBudgetMs": 1003})
        assert (settings["beams"], settings["maxSuggestions"]) == (3, 2)
        client.configuration["completer"] = None
        _change(client, None)
        time.sleep(1)
        assert client.request("completer/info")["result"]["server"]["settings"]["beams"] == 3
        assert [request["method"] for request in client.server_requests].count("workspace/configuration") == 4
    finally:
        client.close()
    _clean_log(tmp_path)


def test_a_completer_section_that_is_not_an_object_is_a_warning(tmp_path):
    """`"completer": [...]` or a string was read as the bare settings object, whose one key "completer" was then an
    unknown setting: a log line that said so, no popup. Now the user is told what is wrong, as for any invalid value,
    and the settings stay."""
    client = _started(tmp_path)
    try:
        for wrong in ([1, 2], "beams=2", 3):
            _change(client, {"completer": wrong})
        _change(client, {"completer": None})  # nothing for this server: no warning
        _change(client, [{"beams": 2}])  # the client's mistake, not the user's: a log line
        info = client.request("completer/info")["result"]
        assert info["server"]["settings"]["beams"] == 0
        shown = _shown(client)
        assert len(shown) == 3 and all("completer must be an object" in message for message in shown), shown
        assert len(_items(client.wait(_ask(client), 60))) == 3
    finally:
        client.close()
    logged = _clean_log(tmp_path)
    assert "unknown settings" not in logged and logged.count("settings must be an object") == 1, logged


def test_a_value_of_kilobytes_is_quoted_short_in_its_warning(tmp_path):
    """Nested junk of 100 kB in each of several settings, and hundreds of unknown keys (a client that sends every
    server's settings): each invalid value was quoted whole, a popup and a log line of 100 kB per key. Each is now one
    short warning, and the valid key beside them applies."""
    client = _started(tmp_path)
    try:
        junk = {"nested": [{f"key{number}": "v" * 50} for number in range(2000)]}
        keys = ("maxSuggestions", "enabledLanguages", "modelPath", "device", "backend", "fimTemplate", "model")
        _change(client, {"completer": {**{key: junk for key in keys}, **{f"x{n}" * 500: n for n in range(300)},
                                       "beams": 2}})
        assert client.request("completer/info")["result"]["server"]["settings"]["beams"] == 2
        messages = [m["params"]["message"] for m in list(client.notifications)
                    if m.get("method") in ("window/showMessage", "window/logMessage")]
        assert max(map(len, messages)) < 2000, sorted(map(len, messages))[-3:]
        for key in keys:
            assert len([message for message in _shown(client) if f"completer.{key}:" in message]) == 1, key
        assert any("ignoring unknown settings" in message and "and 290 more" in message for message in messages)
    finally:
        client.close()
    _clean_log(tmp_path)


def test_a_model_path_that_will_not_load_is_one_short_warning_that_names_it(tmp_path):
    """A modelPath of 100 kB (pasted or generated text) that names no bundle: the worker's error quotes the path
    whole, and the popup and its log line were 100 kB long, saying "model settings not applied" without naming the
    setting. Now one warning of bounded length names modelPath, and the rest of the change applies."""
    client = _started(tmp_path)
    try:
        _change(client, {"completer": {"modelPath": "x" * 100_000, "maxSuggestions": 1}})
        assert client.request("completer/info")["result"]["server"]["settings"]["maxSuggestions"] == 1
        shown = _shown(client)
        assert len(shown) == 1 and shown[0].startswith("completer: modelPath not applied, keeping the loaded model"), \
            [message[:200] for message in shown]
        messages = [m["params"]["message"] for m in list(client.notifications)
                    if m.get("method") in ("window/showMessage", "window/logMessage")]
        assert max(map(len, messages)) < 2000, sorted(map(len, messages))[-3:]
        assert len(_items(client.wait(_ask(client), 60))) == 1
    finally:
        client.close()
    _clean_log(tmp_path)


def test_a_language_id_in_other_letter_case_enables_its_language_and_an_empty_one_is_refused(tmp_path):
    """Documents are matched by their LSP id exactly: `enabledLanguages: ["Python"]` (as a user writes the
    language's name) or `[""]` matched no document, and every suggestion stopped without a word. An id LSP knows in
    other letters now is that id, and an empty one is refused with a warning, the languages of before kept."""
    client = _started(tmp_path)
    try:
        _change(client, {"completer": {"enabledLanguages": ["Python"]}})
        assert client.request("completer/info")["result"]["server"]["enabled_languages"] == ["python"]
        assert _items(client.wait(_ask(client), 60))
        _change(client, {"completer": {"enabledLanguages": [""], "maxSuggestions": 1}})
        info = client.request("completer/info")["result"]["server"]
        assert (info["enabled_languages"], info["settings"]["maxSuggestions"]) == (["python"], 1)
        assert [message for message in _shown(client) if "completer.enabledLanguages" in message], _shown(client)
        client.change(URI, 2, (0, 0), (0, 0), "")  # an edit: searched anew, not answered from the last search
        assert len(_items(client.wait(_ask(client), 60))) == 1
    finally:
        client.close()
    _clean_log(tmp_path)


def _model_runs_after_opening(client: RawClient, uri: str, text: str, wait_s: float) -> int:
    """The engine's model runs while `uri` has been open `wait_s`, left alone: its background prefill runs while the
    worker is idle (a completer/info is a job too, so none is asked meanwhile). The wait before lets the prefills of
    documents opened earlier end first."""
    time.sleep(wait_s)
    before = client.request("completer/info")["result"]["model_runs"]
    client.open(uri, text)
    time.sleep(wait_s)
    return client.request("completer/info")["result"]["model_runs"] - before


def test_a_file_opened_with_both_kinds_of_answer_off_is_not_prefilled(tmp_path):
    """VS Code's toggle turns inlineCompletions and completionItems off, and says the server then runs the model for
    nothing; a file opened meanwhile was still run through the model (its background prefill: 4 to 6 model runs for
    the sample). Turned on again, a file opened is prefilled (the same wait is long enough)."""
    client = _started(tmp_path)
    try:
        _change(client, {"completer": {"inlineCompletions": False, "completionItems": False}})
        assert client.request("completer/info")["result"]["server"]["settings"]["inlineCompletions"] is False
        assert _model_runs_after_opening(client, "file:///work/off.py", SAMPLE_TEXT, 3) == 0
        _change(client, {"completer": {"inlineCompletions": True}})
        assert client.request("completer/info")["result"]["server"]["settings"]["inlineCompletions"] is True
        assert _model_runs_after_opening(client, "file:///work/on.py", SAMPLE_TEXT, 3) > 0
    finally:
        client.close()
    _clean_log(tmp_path)


def test_a_shutdown_while_a_model_loads_says_nothing_of_the_settings(tmp_path):
    """The editor closed (or the server was stopped) right after the user changed modelPath: the worker stopped under
    the model loading, and the server showed "settings not applied, keeping the previous ones: the inference worker
    exited", a popup about settings nobody would use again."""
    client = _started(tmp_path)
    try:
        _change(client, {"completer": {"modelPath": "python-base"}})
        assert client.request("shutdown", timeout=30) == {"jsonrpc": "2.0", "id": client._next_id, "result": None}
        time.sleep(0.5)  # what the stopped change would show is shown by now
        client.notify("exit")
        assert client.proc.wait(10) == 0
        client._reader.join(5)  # every message the server wrote is read
        assert _shown(client) == []
    finally:
        client.close()
    _clean_log(tmp_path)
