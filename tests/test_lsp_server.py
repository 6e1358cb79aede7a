"""End-to-end tests of the language server through pytest-lsp: real server process, real worker,
the committed model bundle. Assertions are about protocol behaviour, not about what the model says."""
from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcRequestCancelled
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from lsp_support import (
    BESIDE_OTHER_FILE,
    BESIDE_OTHER_FILE_CURSOR,
    CALL_BELOW,
    CALL_BELOW_CURSOR,
    FROM_OTHER_FILE,
    LINE_ABOVE,
    LONG_CALL,
    NAMES_LIST,
    OTHER_FILE,
    REPEATED_ARGUMENTS,
    REPEATED_CALL,
    SAMPLE_LINES,
    SAMPLE_TEXT,
    SERVER_CMD,
    apply_line_edit,
    candidate_positions,
    change_doc,
    completion_params,
    first_completing_position,
    info,
    inline_params,
    open_doc,
    plain,
    server_env,
    units,
    wait_ready,
)

VSCODE = client_capabilities("visual-studio-code")
SLOW_STEP_MS = "300"  # the worker sleeps this long at every cancellation poll: searches take seconds
URI = "file:///work/sample.py"


async def _start(lsp_client: LanguageClient, params: types.InitializeParams | None = None) -> None:
    await lsp_client.initialize_session(params or types.InitializeParams(capabilities=VSCODE))
    await wait_ready(lsp_client)


async def _stop(lsp_client: LanguageClient) -> None:
    if lsp_client._server is not None and lsp_client._server.returncode is not None:
        return  # the test already shut it down
    try:
        await asyncio.wait_for(lsp_client.shutdown_session(), 10)
    except Exception:
        if lsp_client._server is not None and lsp_client._server.returncode is None:
            lsp_client._server.kill()


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER_CMD, server_env=server_env()))
async def client(lsp_client: LanguageClient):
    await _start(lsp_client)
    yield
    await _stop(lsp_client)


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER_CMD,
                                              server_env=server_env(COMPLETER_WORKER_STEP_DELAY_MS=SLOW_STEP_MS)))
async def slow_client(lsp_client: LanguageClient):
    await _start(lsp_client)
    yield
    await _stop(lsp_client)


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER_CMD, server_env=server_env()))
async def bare_client(lsp_client: LanguageClient):
    """Not initialized: the test sends its own initialize."""
    yield
    await _stop(lsp_client)


async def _wait_for(predicate, timeout: float = 5.0, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = await predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(interval)


# -- capabilities ---------------------------------------------------------------------------------
async def test_capabilities_advertise_whole_line_completion(bare_client: LanguageClient):
    result = await bare_client.initialize_session(types.InitializeParams(capabilities=VSCODE))
    caps = result.capabilities
    assert caps.position_encoding == "utf-16"  # VS Code 1.65 offers no other encoding
    assert caps.completion_provider is not None
    for char in (".", " ", "(", "a", "Z", "_", "0", "="):
        assert char in caps.completion_provider.trigger_characters
    assert caps.inline_completion_provider is not None
    sync = caps.text_document_sync
    assert sync.change == types.TextDocumentSyncKind.Incremental and sync.open_close


# -- completion and inline completion ---------------------------------------------------------------
async def test_completion_items_replace_the_whole_line(client: LanguageClient):
    open_doc(client, URI, SAMPLE_TEXT)
    line, col, result = await first_completing_position(client, URI)
    assert isinstance(result, types.CompletionList) and result.is_incomplete is True
    typed = SAMPLE_LINES[line][:col]
    sort_keys = [item.sort_text for item in result.items]
    assert sort_keys == sorted(sort_keys) and len(set(sort_keys)) == len(sort_keys)
    new_texts = [item.text_edit.new_text for item in result.items]
    assert len(set(new_texts)) == len(new_texts), "duplicate lines"
    for item in result.items:
        edit = item.text_edit
        assert isinstance(edit, types.TextEdit)
        assert edit.range.start == types.Position(line, 0)
        assert edit.range.end == types.Position(line, len(SAMPLE_LINES[line]))
        assert edit.new_text.startswith(typed) and edit.new_text != SAMPLE_LINES[line]
        assert "\n" not in edit.new_text
        assert item.filter_text == edit.new_text
        assert item.label == edit.new_text.strip()
        assert "score" in item.detail or item.detail == "completer · a line further up the file"
        accepted = apply_line_edit(SAMPLE_LINES, edit)
        assert accepted[line] == edit.new_text and accepted[:line] == SAMPLE_LINES[:line]
        assert accepted[line + 1:] == SAMPLE_LINES[line + 1:]


async def test_inline_completion_offers_the_best_line(client: LanguageClient):
    open_doc(client, URI, SAMPLE_TEXT)
    line, col, completions = await first_completing_position(client, URI)
    result = await client.text_document_inline_completion_async(inline_params(URI, line, col))
    assert isinstance(result, types.InlineCompletionList) and result.items
    best = result.items[0]
    assert best.insert_text == completions.items[0].text_edit.new_text
    assert best.range == types.Range(types.Position(line, 0), types.Position(line, len(SAMPLE_LINES[line])))
    assert [i.insert_text for i in result.items] == [i.text_edit.new_text for i in completions.items]


async def test_the_first_item_is_the_consensus_not_the_likeliest(client: LanguageClient):
    """In the sample's `__len__` the engine puts `return len(self)` before the likelier `return 0`
    (tests/test_engine.py); the server keeps that order in both kinds of answer, so the first item's
    score is below another's."""
    uri = "file:///work/consensus.py"
    open_doc(client, uri, SAMPLE_TEXT)
    got = await client.text_document_completion_async(completion_params(uri, 25, 8))
    lines = [item.text_edit.new_text for item in got.items]
    assert lines[0] == "        return len(self)" and "        return 0" in lines
    scores = [float(item.detail.rsplit(" ", 1)[1]) for item in got.items if "score" in item.detail]
    assert scores[0] < max(scores)
    inline = await client.text_document_inline_completion_async(inline_params(uri, 25, 8))
    assert [item.insert_text for item in inline.items] == lines


SELECTING = 'import os\n\n\ndef check(path):\n    mark = "\u2713\U0001F600"; return os.path.is'
"""A line whose `is` a client's suggest widget offers to complete (another server's `isabs`, say), after characters
of one and of two UTF-16 units."""


def _with_selected_item(uri: str, line: int, character: int, item: types.TextEdit) -> types.InlineCompletionParams:
    """An inline completion request made while the client's suggest widget has `item` selected."""
    params = inline_params(uri, line, character)
    params.context.selected_completion_info = types.SelectedCompletionInfo(range=item.range, text=item.new_text)
    return params


@pytest.mark.parametrize("name", ["isabs", "islink", "isdir"])
async def test_inline_completions_beside_a_selected_item_extend_it_over_its_range(client: LanguageClient, name: str):
    """LSP: inline completions asked with selectedCompletionInfo must extend the selected item's text and use its
    range, or the client does not show them (VS Code shows none beside the suggest widget). The lines for the text
    typed so far name whichever function the model guessed: the lines after the selected name are what counts."""
    uri = "file:///work/selecting.py"
    open_doc(client, uri, SELECTING)
    lines = SELECTING.split("\n")
    end = units(lines[4], "utf-16")
    item = types.TextEdit(types.Range(types.Position(4, end - 2), types.Position(4, end)), name)
    result = await client.text_document_inline_completion_async(_with_selected_item(uri, 4, end, item))
    assert result.items, f"nothing extends {name}"
    for suggestion in result.items:
        assert suggestion.range == item.range
        assert suggestion.insert_text.startswith(name) and suggestion.insert_text != name
        accepted = apply_line_edit(lines, types.TextEdit(suggestion.range, suggestion.insert_text), "utf-16")
        assert accepted[4] == lines[4][:-2] + suggestion.insert_text and accepted[:4] == lines[:4]


async def test_inline_completions_beside_their_own_selected_item_offer_its_line(client: LanguageClient):
    """With the server's own item selected (a whole line, over the whole line), ghost text still shows it."""
    uri = "file:///work/selecting.py"
    open_doc(client, uri, SELECTING)
    end = units(SELECTING.split("\n")[4], "utf-16")
    items = await client.text_document_completion_async(completion_params(uri, 4, end))
    assert len(items.items) > 1
    for chosen in (items.items[-1].text_edit, items.items[0].text_edit):
        result = await client.text_document_inline_completion_async(_with_selected_item(uri, 4, end, chosen))
        assert result.items
        assert all(s.range == chosen.range and s.insert_text.startswith(chosen.new_text) for s in result.items)


ASTRAL = 'import os\n\n\ndef check(path):\n    mark = "\U0001F600"; return os.path.jo'
"""A line with a character of two UTF-16 units (outside the Basic Multilingual Plane) before the cursor."""


async def test_inline_completions_start_after_an_astral_character_before_the_cursor(client: LanguageClient):
    """VS Code takes off the text an inline completion shares with the line counting a character of two UTF-16
    units as one column (TextLength.ofText), so past such a character it puts the rest a column early, over text
    it does not match, and shows no ghost text at all: on a line with an emoji before the cursor, never any. Items
    start after the last such character before the cursor, and still give the whole line."""
    uri = "file:///work/astral.py"
    open_doc(client, uri, ASTRAL)
    lines = ASTRAL.split("\n")
    end = units(lines[4], "utf-16")
    after_emoji = units(lines[4][:lines[4].index("\U0001F600") + 1], "utf-16")
    result = await client.text_document_inline_completion_async(inline_params(uri, 4, end))
    assert result.items
    for suggestion in result.items:
        assert suggestion.range == types.Range(types.Position(4, after_emoji), types.Position(4, end))
        accepted = apply_line_edit(lines, types.TextEdit(suggestion.range, suggestion.insert_text), "utf-16")
        assert accepted[4].startswith(lines[4]) and accepted[4] != lines[4] and accepted[:4] == lines[:4]


async def test_incremental_edits_keep_the_document_in_sync(client: LanguageClient):
    """Edits that rebuild the sample must leave the server with exactly the sample: completions
    at the same cursor then equal those of a freshly opened copy."""
    fresh = "file:///work/fresh.py"
    open_doc(client, fresh, SAMPLE_TEXT)
    line, col, expected = await first_completing_position(client, fresh)
    client.text_document_did_close(types.DidCloseTextDocumentParams(  # or the edited copy would search it
        text_document=types.TextDocumentIdentifier(uri=fresh)))          # as another open file

    edited = "file:///work/edited.py"
    lines = list(SAMPLE_LINES)
    assert line >= 1
    # start from a mangled copy: two junk lines before the line above the cursor, the cursor line
    # split in two with junk at the start of its second half
    mangled = (lines[:line - 1] + ["JUNK ONE", "JUNK TWO \u00fc"] + [lines[line - 1]]
               + [lines[line][:col], "TAIL" + lines[line][col:]] + lines[line + 1:])
    open_doc(client, edited, "\n".join(mangled))
    change_doc(client, edited, 2, (line - 1, 0), (line + 1, 0), "")  # delete both junk lines
    change_doc(client, edited, 3, (line, col), (line + 1, 4), "")  # join the split line, dropping "TAIL"
    change_doc(client, edited, 4, (0, 0), (0, 0), "# header\n")  # insert a line at the top ...
    change_doc(client, edited, 5, (0, 0), (1, 0), "")  # ... and remove it again
    result = await client.text_document_completion_async(completion_params(edited, line, col))
    assert [(i.text_edit.new_text, i.text_edit.range) for i in result.items] == \
        [(i.text_edit.new_text, i.text_edit.range) for i in expected.items]


ENCODING_TEXT = "\n".join([
    "import os",
    "",
    "",
    "def greet(name):",
    '    label = "naïve café 😀 " + name.',
    '    print("😀 résumé 𝄞", label, ',
    '    path = os.path.join("日本", ',
    "    return label",
    "",
])


@pytest.mark.parametrize("offered, expected", [
    (["utf-8"], "utf-8"),
    (["utf-16", "utf-32"], "utf-32"),
    (None, "utf-16"),
])
async def test_position_encoding_negotiation_and_conversion(bare_client: LanguageClient, offered, expected):
    caps = types.ClientCapabilities(general=types.GeneralClientCapabilities(position_encodings=offered))
    result = await bare_client.initialize_session(types.InitializeParams(capabilities=caps))
    assert result.capabilities.position_encoding == expected
    await wait_ready(bare_client)
    lines = ENCODING_TEXT.split("\n")
    # open with "name." missing on line 4, then type it in at a column given in client units
    typed_away = lines[4][: -len("name.")]
    open_doc(bare_client, URI, "\n".join(lines[:4] + [typed_away] + lines[5:]))
    end = units(typed_away, expected)
    change_doc(bare_client, URI, 2, (4, end), (4, end), "name.")
    served = 0
    for line_no in (4, 5, 6):
        line = lines[line_no]
        for col in sorted({len(line), line.index('"') + 1, line.rindex('"') + 1}):
            position = (line_no, units(line[:col], expected))
            result = await bare_client.text_document_completion_async(completion_params(URI, *position))
            for item in result.items:
                served += 1
                assert item.text_edit.new_text.startswith(line[:col])
                assert item.text_edit.range.end == types.Position(line_no, units(line, expected))
    assert served, "no suggestion on any non-ASCII line"


# -- documents that cannot be completed ---------------------------------------------------------------
async def test_unopened_document_and_positions_off_the_end_get_empty_results(client: LanguageClient):
    result = await client.text_document_completion_async(completion_params("file:///never/opened.py", 0, 0))
    assert list(result.items) == []
    open_doc(client, URI, SAMPLE_TEXT)
    result = await client.text_document_completion_async(completion_params(URI, len(SAMPLE_LINES) + 5, 0))
    assert list(result.items) == []
    inline = await client.text_document_inline_completion_async(inline_params(URI, 10_000, 3))
    assert list(inline.items) == []
    # a column past the end of a line is clamped to the line end, as LSP asks
    line, col, _ = await first_completing_position(client, URI)
    result = await client.text_document_completion_async(completion_params(URI, line, 10_000))
    at_end = await client.text_document_completion_async(completion_params(URI, line, len(SAMPLE_LINES[line])))
    assert [plain(i) for i in result.items] == [plain(i) for i in at_end.items]
    for item in result.items:
        assert item.text_edit.new_text.startswith(SAMPLE_LINES[line])


async def test_disabled_languages_and_closed_documents_get_empty_results(client: LanguageClient):
    open_doc(client, "file:///work/notes.md", SAMPLE_TEXT, language_id="markdown")
    open_doc(client, URI, SAMPLE_TEXT)
    line, col, _ = await first_completing_position(client, URI)
    result = await client.text_document_completion_async(completion_params("file:///work/notes.md", line, col))
    assert list(result.items) == []
    cached = (await info(client))["documents_cached"]
    assert cached >= 1
    client.text_document_did_close(types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(URI)))
    result = await client.text_document_completion_async(completion_params(URI, line, col))
    assert list(result.items) == []
    await _wait_for(lambda: _cached_below(client, cached))


async def _cached_below(client: LanguageClient, count: int) -> bool:
    return (await info(client))["documents_cached"] < count


# -- settings -----------------------------------------------------------------------------------------
async def test_valid_settings_change_applies(client: LanguageClient):
    open_doc(client, URI, SAMPLE_TEXT)
    line, col, _ = await first_completing_position(client, URI)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"completer": {"maxSuggestions": 1, "beams": 2}}))
    state = await _wait_for(lambda: _settings_are(client, maxSuggestions=1, beams=2))
    assert state["settings"]["max_suggestions"] == 1 and state["settings"]["beams"] == 2  # the engine's view
    change_doc(client, URI, 2, (0, 0), (0, 0), "")  # a new edit: no cached answer
    result = await client.text_document_completion_async(completion_params(URI, line, col))
    assert len(result.items) == 1  # this position had suggestions before
    # the settings object itself (no "completer" wrapper) works too
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"maxTokens": 8}))
    await _wait_for(lambda: _settings_are(client, maxTokens=8, maxSuggestions=1))
    assert not client.messages, [m.message for m in client.messages]


async def _settings_are(client: LanguageClient, **expected) -> dict | None:
    state = await info(client)
    current = state["server"]["settings"]
    return state if all(current[k] == v for k, v in expected.items()) else None


async def test_invalid_settings_warn_and_keep_the_old_values(client: LanguageClient):
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"completer": {"beams": 17, "device": "tpu", "maxSuggestions": 2, "completionItems": "yes",
                                "maxToken": 30}}))
    await _wait_for(lambda: _settings_are(client, maxSuggestions=2))
    await _wait_for(_async(lambda: len(client.messages) >= 4))
    warnings = [m.message for m in client.messages]
    assert all(m.type == types.MessageType.Warning for m in client.messages)
    for key in ("beams", "device", "completionItems"):
        assert any(key in w for w in warnings), (key, warnings)
    assert "completer: completer.maxToken is not a setting; ignored (did you mean completer.maxTokens?)" in warnings
    del client.messages[:]
    state = await _settings_are(client, beams=0, device="auto", completionItems=True, maxSuggestions=2)
    assert state is not None

    before = await info(client)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"completer": {"modelPath": "/nonexistent/model/bundle", "beams": 3}}))
    await _wait_for(_async(lambda: any("model" in m.message for m in client.messages)))
    after = await _wait_for(lambda: _settings_are(client, beams=3))  # the other key still applies
    assert after["model_path"] == before["model_path"] and after["model_error"] is None
    assert after["server"]["settings"]["modelPath"] is None and after["settings"]["beams"] == 3
    open_doc(client, URI, SAMPLE_TEXT)
    await first_completing_position(client, URI)  # the old model still serves


async def test_search_budget_setting_reaches_the_engine(client: LanguageClient):
    """searchBudgetMs applies, a too-short budget is counted in completer/info, and a bad value warns."""
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"completer": {"searchBudgetMs": 1}}))
    state = await _wait_for(lambda: _settings_are(client, searchBudgetMs=1))
    assert state["settings"]["search_budget_ms"] == 1 and state["server"]["out_of_time"] == 0
    text = SAMPLE_TEXT * 4  # about 1,000 tokens to prefill: far more than 1 ms
    open_doc(client, URI, text)
    lines = text.split("\n")
    line = max(i for i, code in enumerate(lines) if code.startswith("    with open("))  # in the last copy
    await client.text_document_completion_async(completion_params(URI, line, 4))  # a line to write
    assert (await info(client))["server"]["out_of_time"] == 1
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"completer": {"searchBudgetMs": -5}}))
    await _wait_for(_async(lambda: any("searchBudgetMs" in m.message for m in client.messages)))
    assert (await info(client))["server"]["settings"]["searchBudgetMs"] == 1


async def test_document_repeats_setting_reaches_the_engine(client: LanguageClient):
    """On by default, the document's repeats put the argument list written above first; documentRepeats:
    false gives the model alone, which puts `path)` first (tests/test_engine.py checks the same)."""
    repeated = "other = frobnicate_payload(" + REPEATED_ARGUMENTS  # labels are stripped
    line, column = REPEATED_CALL.count("\n"), len(REPEATED_CALL.split("\n")[-1])
    open_doc(client, "file:///work/repeats_on.py", REPEATED_CALL)
    on = await client.text_document_completion_async(completion_params("file:///work/repeats_on.py", line, column))
    assert on.items[0].label == repeated
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"completer": {"documentRepeats": False}}))
    state = await _wait_for(lambda: _settings_are(client, documentRepeats=False))
    assert state["settings"]["document_repeats"] is False
    open_doc(client, "file:///work/repeats_off.py", REPEATED_CALL)
    off = await client.text_document_completion_async(completion_params("file:///work/repeats_off.py", line, column))
    assert off.items[0].label != repeated and repeated in [item.label for item in off.items]


async def test_a_line_further_up_comes_last_with_its_own_detail(client: LanguageClient):
    """The call above is longer than the search may generate: the server still offers it, last, and says
    where it came from instead of a score."""
    line, column = LINE_ABOVE.count("\n"), len(LINE_ABOVE.split("\n")[-1])
    open_doc(client, "file:///work/above.py", LINE_ABOVE)
    got = await client.text_document_completion_async(completion_params("file:///work/above.py", line, column))
    assert got.items[-1].text_edit.new_text == LONG_CALL
    assert got.items[-1].detail == "completer · a line further up the file"
    assert all("score" in item.detail for item in got.items[:-1]) and len(got.items) >= 2


async def test_the_start_of_a_longer_line_comes_with_its_own_detail(client: LanguageClient):
    """With maxTokens 6 no line of four more names can end: the server still offers the start of the
    likeliest one, as a completion item that says so and as an inline completion."""
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"maxTokens": 6}))
    await _wait_for(lambda: _settings_are(client, maxTokens=6))
    uri, line, column = "file:///work/names.py", NAMES_LIST.count("\n"), len(NAMES_LIST.split("\n")[-1])
    open_doc(client, uri, NAMES_LIST)
    got = await client.text_document_completion_async(completion_params(uri, line, column))
    assert got.items and got.items[0].detail.startswith("completer · the start of a longer line · score")
    started = got.items[0].text_edit.new_text
    assert started.startswith('    "') and started.count('"') >= 2
    inline = await client.text_document_inline_completion_async(inline_params(uri, line, column))
    assert [i.insert_text for i in inline.items] == [started]


async def test_accepting_the_start_of_a_longer_line_offers_the_rest(client: LanguageClient):
    """The start of a longer line is not a finished line: once accepted (or typed out, and a space after it), the
    next request offers lines that go on from it, where a whole line accepted gets none until the next keystroke."""
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"maxTokens": 6}))
    await _wait_for(lambda: _settings_are(client, maxTokens=6))
    uri, line, column = "file:///work/names.py", NAMES_LIST.count("\n"), len(NAMES_LIST.split("\n")[-1])
    open_doc(client, uri, NAMES_LIST)
    got = await client.text_document_completion_async(completion_params(uri, line, column))
    assert got.items and "the start of a longer line" in got.items[0].detail
    accepted = got.items[0].text_edit.new_text
    change_doc(client, uri, 2, (line, 0), (line, column), accepted)  # the item's edit, as the client applies it
    for version, typed in ((3, ""), (4, " ")):
        if typed:
            change_doc(client, uri, version, (line, len(accepted)), (line, len(accepted)), typed)
        at = len(accepted + typed)
        rest = await client.text_document_completion_async(completion_params(uri, line, at))
        assert rest.items, f"nothing offered after {accepted + typed!r}"
        assert all(i.text_edit.new_text.startswith(accepted + typed) for i in rest.items)
        inline = await client.text_document_inline_completion_async(inline_params(uri, line, at))
        assert [i.insert_text for i in inline.items] == [i.text_edit.new_text for i in rest.items]


COMMENTED = ("import os\n\n\ndef main(path):\n    x =   # the count\n    print()  # show it\n\tsize = \t# in bytes\n"
             "    return x\n")


@pytest.mark.parametrize("line, column, comment", [
    (4, len("    x = "), "  # the count"),  # the user's own gap before it
    (5, len("    print("), "  # show it"),  # the editor's closer is written again, the comment kept
    (6, len("\tsize = "), "\t# in bytes"),  # a tab before it stays a tab
])
async def test_a_suggestion_keeps_the_comment_after_the_cursor(client: LanguageClient, line, column, comment):
    """A suggestion is a whole line the model wrote without reading the text after the cursor, which it replaces;
    a comment there is the user's and stays at the end of every line offered, and typing on keeps it."""
    open_doc(client, URI, COMMENTED)
    lines = COMMENTED.split("\n")
    got = await client.text_document_completion_async(completion_params(URI, line, column))
    inline = await client.text_document_inline_completion_async(inline_params(URI, line, column))
    offered = [apply_line_edit(lines, item.text_edit)[line] for item in got.items]
    assert offered and [apply_line_edit(lines, types.TextEdit(i.range, i.insert_text))[line]
                        for i in inline.items] == offered
    assert all(text.startswith(lines[line][:column]) and text.endswith(comment) for text in offered), offered
    longest = max(offered, key=len)  # one that inserts more than the character typed
    change_doc(client, URI, 2, (line, column), (line, column), longest[column])
    lines[line] = lines[line][:column] + longest[column] + lines[line][column:]
    through = await client.text_document_completion_async(completion_params(URI, line, column + 1))
    assert longest in [apply_line_edit(lines, item.text_edit)[line] for item in through.items]


async def test_the_lines_below_the_cursor_reach_the_engine(client: LanguageClient):
    """The server sends the worker the lines below the cursor's, so the call written out further down
    brings its arguments (tests/test_engine.py checks that without them it does not)."""
    open_doc(client, "file:///work/below.py", CALL_BELOW)
    got = await client.text_document_completion_async(completion_params("file:///work/below.py", *CALL_BELOW_CURSOR))
    assert any('mode="xz"' in item.text_edit.new_text for item in got.items)


async def test_other_open_files_reach_the_engine(client: LanguageClient):
    """The registration written out in another open Python file comes back as a suggestion; a file in
    another language is not searched, and once the Python file is closed (or openFiles is 0) neither is it
    (tests/test_engine.py checks that without the other file the line is not found)."""
    uri = "file:///work/install.py"

    async def lines() -> list[str]:
        got = await client.text_document_completion_async(completion_params(uri, *BESIDE_OTHER_FILE_CURSOR))
        return [item.text_edit.new_text for item in got.items]  # each replaces the whole line

    open_doc(client, "file:///work/registry.txt", OTHER_FILE, language_id="plaintext")
    open_doc(client, uri, BESIDE_OTHER_FILE)
    assert FROM_OTHER_FILE not in await lines()
    open_doc(client, "file:///work/registry.py", OTHER_FILE)
    assert FROM_OTHER_FILE in await lines()  # an edit elsewhere is not answered from the last result
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"completer": {"openFiles": 0}}))
    await _wait_for(lambda: _settings_are(client, openFiles=0))
    assert FROM_OTHER_FILE not in await lines()
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"completer": {"openFiles": 4}}))
    await _wait_for(lambda: _settings_are(client, openFiles=4))
    assert FROM_OTHER_FILE in await lines()
    client.text_document_did_close(types.DidCloseTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri="file:///work/registry.py")))
    assert FROM_OTHER_FILE not in await lines()


async def test_the_worker_searches_the_line_after_enter_while_it_waits(client: LanguageClient):
    """A completion at the end of a line of code, a pause, then Enter: the new line's first request is
    answered with no model run, from the search the worker ran while it waited; with searchAhead off it
    runs the model."""
    typed = "def read_config(path):"
    for setting, uri in ((True, "file:///work/ahead.py"), (False, "file:///work/not_ahead.py")):
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
            settings={"completer": {"searchAhead": setting}}))
        await _wait_for(lambda: _settings_are(client, searchAhead=setting))
        open_doc(client, uri, "import os\n\n\n" + typed + "\n")
        await client.text_document_completion_async(completion_params(uri, 3, len(typed)))
        await asyncio.sleep(1.5)  # the worker waits a moment, then searches the next line
        change_doc(client, uri, 2, (3, len(typed)), (3, len(typed)), "\n    ")
        got = await client.text_document_completion_async(completion_params(uri, 4, 4))
        assert got.items, setting
        runs = (await info(client))["server"]["last_model_runs"]
        assert (runs == 0) if setting else (runs > 0), (setting, runs)


def _async(fn):
    async def wrapper():
        return fn()
    return wrapper


async def test_unloadable_model_at_startup_falls_back_but_keeps_other_settings(bare_client: LanguageClient):
    await _start(bare_client, types.InitializeParams(capabilities=VSCODE, initialization_options={
        "completer": {"modelPath": "/nonexistent/model/bundle", "maxSuggestions": 2, "beams": 3}}))
    state = await _wait_for(lambda: _settings_are(bare_client, maxSuggestions=2, beams=3, modelPath=None))
    assert state["model"] and state["model_error"] is None
    assert state["settings"]["max_suggestions"] == 2 and state["settings"]["beams"] == 3
    await _wait_for(_async(lambda: any("default model" in m.message for m in bare_client.messages)))


async def test_initialization_options_and_feature_switches(bare_client: LanguageClient):
    await _start(bare_client, types.InitializeParams(capabilities=VSCODE, initialization_options={
        "completer": {"maxSuggestions": 1, "beams": "many", "completionItems": False}}))
    state = await info(bare_client)
    assert state["server"]["settings"]["maxSuggestions"] == 1 and state["settings"]["max_suggestions"] == 1
    assert state["server"]["settings"]["beams"] == 0 and state["beams"] == 4, "0: the embedded bundle's default"
    await _wait_for(_async(lambda: any("beams" in m.message for m in bare_client.messages)))
    open_doc(bare_client, URI, SAMPLE_TEXT)
    found = False
    for line, col in candidate_positions():
        inline = await bare_client.text_document_inline_completion_async(inline_params(URI, line, col))
        if inline.items:
            assert len(inline.items) == 1
            items = await bare_client.text_document_completion_async(completion_params(URI, line, col))
            assert list(items.items) == []  # completionItems: false
            found = True
            break
    assert found, "no inline completion anywhere"


# -- concurrency: cancellation, stale searches, shutdown -------------------------------------------
async def test_cancel_request_abandons_the_search(slow_client: LanguageClient):
    open_doc(slow_client, URI, SAMPLE_TEXT)
    pending = asyncio.ensure_future(slow_client.protocol.send_request_async(
        types.TEXT_DOCUMENT_COMPLETION, completion_params(URI, 12, 4), msg_id="slow-1"))
    await asyncio.sleep(0.2)
    started = time.monotonic()
    slow_client.cancel_request(types.CancelParams(id="slow-1"))
    with pytest.raises(JsonRpcRequestCancelled):
        await asyncio.wait_for(pending, 5)
    assert time.monotonic() - started < 1.0
    # the engine itself stopped (it raised Cancelled at a beam step), not just the reply
    await _wait_for(lambda: _stopped_in_worker(slow_client, 1), timeout=5)


async def _stopped_in_worker(client: LanguageClient, count: int) -> bool:
    return (await info(client))["server"]["searches_stopped_in_worker"] >= count


async def test_newer_edit_abandons_the_running_search(slow_client: LanguageClient):
    open_doc(slow_client, URI, SAMPLE_TEXT)
    pending = asyncio.ensure_future(slow_client.text_document_completion_async(completion_params(URI, 12, 4)))
    await asyncio.sleep(0.2)
    started = time.monotonic()
    change_doc(slow_client, URI, 2, (12, 4), (12, 4), "x")
    with pytest.raises(JsonRpcException) as raised:
        await asyncio.wait_for(pending, 5)
    assert raised.value.code == types.LSPErrorCodes.ContentModified
    assert time.monotonic() - started < 1.0
    await _wait_for(lambda: _stopped_in_worker(slow_client, 1), timeout=5)


async def test_requests_and_shutdown_are_answered_while_a_search_runs(slow_client: LanguageClient):
    open_doc(slow_client, URI, SAMPLE_TEXT)
    open_doc(slow_client, "file:///work/other.py", "x = 1\n")
    pending = asyncio.ensure_future(slow_client.text_document_completion_async(completion_params(URI, 13, 8)))
    await asyncio.sleep(0.2)
    started = time.monotonic()
    state = await info(slow_client)
    assert state["server"]["open_documents"] == 2
    empty = await slow_client.text_document_completion_async(completion_params("file:///nope.py", 0, 0))
    assert list(empty.items) == []
    assert time.monotonic() - started < 1.5
    started = time.monotonic()
    await asyncio.wait_for(slow_client.shutdown_async(None), 3)
    assert time.monotonic() - started < 2.0
    with pytest.raises(JsonRpcRequestCancelled):
        await asyncio.wait_for(pending, 3)
    slow_client.exit(None)
    assert await asyncio.wait_for(slow_client._server.wait(), 5) == 0


# -- worker crash ------------------------------------------------------------------------------------
async def test_worker_crash_is_survived(client: LanguageClient):
    open_doc(client, URI, SAMPLE_TEXT)
    line, col, expected = await first_completing_position(client, URI)
    client.text_document_did_close(types.DidCloseTextDocumentParams(  # or the copy would search it as another
        text_document=types.TextDocumentIdentifier(uri=URI)))         # open file
    old_pid = (await info(client))["server"]["worker_pid"]
    os.kill(old_pid, signal.SIGKILL)
    started = time.monotonic()
    other = "file:///work/copy.py"  # same text, new document: nothing cached in the server
    open_doc(client, other, SAMPLE_TEXT)
    result = await asyncio.wait_for(client.text_document_completion_async(completion_params(other, line, col)), 10)
    elapsed = time.monotonic() - started
    assert [i.text_edit.new_text for i in result.items] == [i.text_edit.new_text for i in expected.items]
    assert elapsed < 2.0, f"next request took {elapsed:.2f} s after the crash"
    state = await info(client)
    assert state["server"]["worker_pid"] not in (None, old_pid)
    assert state["server"]["worker_restarts"] == 1
