"""excludeFiles: files that get no suggestions and are never read as another file's context, through the real
server with the embedded model, and in front of a loopback endpoint that records every prompt it is sent."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from fake_endpoint import Behaviour, FakeEndpoint
from lsp.exclusions import DEFAULT_EXCLUDED, Exclusions, check_patterns
from lsp.rawclient import RawClient
from lsp.settings import ServerSettings, apply_changes
from lsp_support import BESIDE_OTHER_FILE, FROM_OTHER_FILE, OTHER_FILE, SERVER_CMD, server_env
from lsp_support import lines_beside_other_file as _lines, workspace_server as _server

SECRET = "sk-live-51Hq0TESTSECRET"


def test_patterns_are_gitignore_lines_read_inside_the_innermost_workspace_folder(tmp_path: Path):
    outer, inner = tmp_path / "repo", tmp_path / "repo" / "service"
    rules = Exclusions(["secrets/", "/config/prod.py", "*.pem", "!public.pem"])
    assert rules.excludes(outer / "a" / "secrets" / "db.py", [outer])
    assert rules.excludes(outer / "config" / "prod.py", [outer])
    assert not rules.excludes(outer / "app" / "config" / "prod.py", [outer])  # anchored to the folder's top
    assert rules.excludes(inner / "config" / "prod.py", [outer, inner])  # the innermost folder's top
    assert rules.excludes(tmp_path / "elsewhere" / "server.pem", [outer])  # outside every folder: the whole path
    assert not rules.excludes(outer / "public.pem", [outer])
    assert rules.pattern_for(outer / "public.pem", [outer]) is None
    assert rules.pattern_for(outer / "x" / "server.pem", [outer]) == "*.pem"
    assert not rules.excludes(None, [outer])  # an untitled document has no file


def test_the_defaults_leave_out_secrets_and_no_source_file():
    rules = Exclusions(DEFAULT_EXCLUDED)
    root = Path("/work/app")
    for name in (".env", "deploy/.env.production", ".envrc", "certs/server.key", "id_ed25519", ".npmrc"):
        assert rules.excludes(root / name, [root]), name
    for name in ("env.py", "settings/environment.py", "keys.py", "src/app.ts", "README.md", ".env_helpers.py"):
        assert not rules.excludes(root / name, [root]), name


def test_a_bad_value_is_refused_with_the_setting_named_and_the_rest_applies():
    assert check_patterns("*.secret.py") == ("*.secret.py",)
    assert check_patterns(["# a comment", "", "build/"]) == ("build/",)
    for bad in (3, {"a": 1}, ["ok.py", 7], ["!"], ["x\0y"]):
        settings, warnings, unknown = apply_changes(ServerSettings(), {"excludeFiles": bad, "beams": 2})
        assert settings.exclude_files == DEFAULT_EXCLUDED and settings.engine.beams == 2, bad
        assert len(warnings) == 1 and "excludeFiles" in warnings[0] and not unknown, bad
    assert apply_changes(ServerSettings(exclude_files=()), {"excludeFiles": None})[0].exclude_files == DEFAULT_EXCLUDED


def test_a_pattern_that_is_no_pattern_is_left_out_and_the_others_apply_with_the_defaults(tmp_path: Path):
    """One typo (`obj\\`, `!`, `[z-a]`) refused the whole list: the defaults applied instead, and the user's own
    `secrets/` did not, so its files were read (and sent to an endpoint). Now the typo is left out and named, the
    user's other patterns apply, and the defaults too until it is fixed; a negation of the user's cannot undo them."""
    value = ["secrets/", "!.env", "[z-a].py", "build\\"]
    settings, warnings, _ = apply_changes(ServerSettings(), {"excludeFiles": value})
    assert len(warnings) == 1 and "'[z-a].py'" in warnings[0] and "excludeFiles" in warnings[0], warnings
    rules, root = Exclusions(settings.exclude_files), tmp_path
    for name in ("secrets/token.py", ".env", "id_rsa"):
        assert rules.excludes(root / name, [root]), name
    assert not rules.excludes(root / "app.py", [root])
    assert apply_changes(ServerSettings(), {"excludeFiles": ["secrets/"]})[0].exclude_files == ("secrets/",)


@pytest.mark.parametrize("pattern", ["[z-a].py", "[Z-a].py"])
def test_a_range_whose_ends_are_reversed_is_refused_in_one_warning_and_the_server_starts(tmp_path: Path,
                                                                                         pattern: str):
    """`[z-a]`, a range whose ends are reversed (and `[Z-a]`, once casefolded), is a typo: one warning names it, and
    initialize is answered (it once went up through initialize as a traceback)."""
    (tmp_path / "install.py").write_text(BESIDE_OTHER_FILE)
    client = RawClient(SERVER_CMD, env=server_env())
    with client:
        answer = client.request("initialize", {"processId": os.getpid(), "rootUri": tmp_path.as_uri(),
                                               "capabilities": {}, "initializationOptions": {"completer": {
                                                   "excludeFiles": [pattern], "workspaceContext": True}}})
        assert "result" in answer, answer
        client.notify("initialized", {})
        shown = client.wait_for(lambda m: m.get("method") == "window/showMessage", timeout=30)["params"]["message"]
        assert "excludeFiles" in shown and pattern in shown
        _indexed(client, 1)
        assert client.request("completer/fileInfo", {"uri": (tmp_path / ".env").as_uri()})["result"]["excluded"] \
            == ".env"  # the defaults hold
        uri = (tmp_path / "install.py").as_uri()
        client.open(uri, BESIDE_OTHER_FILE)
        assert "result" in client.completion(uri, 4, 4)


def test_a_pattern_that_takes_folders_back_holds_as_in_git(tmp_path: Path):
    """`*`, `!*/`, `!*.py` leaves alone everything but Python files, at any depth, as git reads it: a check of a folder
    that let `*` win over the later `!*/` would leave every file in a subfolder alone, the Python ones too, with
    no suggestion. A `!` pattern still takes nothing back from a folder a pattern names itself."""
    with RawClient(SERVER_CMD, env=server_env()) as client:
        client.request("initialize", {"processId": os.getpid(), "rootUri": tmp_path.as_uri(), "capabilities": {},
                                      "initializationOptions": {"completer": {"excludeFiles": [
                                          "*", "!*/", "!*.py", "vault/", "!vault/open.py"]}}})
        client.notify("initialized", {})

        def excluded(name: str):
            return client.request("completer/fileInfo", {"uri": (tmp_path / name).as_uri()})["result"]["excluded"]

        assert [excluded(name) for name in ("app.py", "pkg/app.py", "pkg/deep/app.py")] == [None, None, None]
        assert [excluded(name) for name in ("notes.txt", "pkg/notes.txt", "vault/open.py")] == ["*", "*", "vault/"]


def _indexed(client: RawClient, files: int, timeout: float = 30.0) -> None:
    """Wait until the workspace index is built and holds `files` files (the excluded ones left out)."""
    deadline = time.monotonic() + timeout
    while True:
        index = client.request("completer/info")["result"]["server"].get("workspace_index") or {}
        if not index.get("building", True) and index.get("files") == files:
            return
        assert time.monotonic() < deadline, f"the index never held {files} files: {index}"
        time.sleep(0.05)


def _logged(client: RawClient, text: str) -> list[str]:
    return [m["params"]["message"] for m in client.notifications
            if m.get("method") == "window/logMessage" and text in m["params"]["message"]]


def test_an_excluded_file_gets_no_suggestions_and_lends_none_of_its_lines(tmp_path: Path):
    """The other file holds the only copy of the line: on disk (the index) and open in the editor (the open
    files' heads), excluded it supplies it through neither; turned back on live, the index reads it again."""
    (tmp_path / "vault").mkdir()
    (tmp_path / "vault" / "registry.py").write_text(OTHER_FILE)
    (tmp_path / "install.py").write_text(BESIDE_OTHER_FILE)
    with _server(tmp_path, excludeFiles=["vault/"]) as client:
        _indexed(client, 1)  # install.py alone
        registry = (tmp_path / "vault" / "registry.py").as_uri()
        client.open(registry, OTHER_FILE)
        install = (tmp_path / "install.py").as_uri()
        client.open(install, BESIDE_OTHER_FILE)
        assert FROM_OTHER_FILE not in _lines(client, install)
        for _ in range(2):  # the registration's own line, typed again: the file itself gets nothing
            assert client.completion(registry, 4, len("    registry.register_handler(\"zq_al"))["result"]["items"] == []
        assert len(_logged(client, "matches excludeFiles' 'vault/'")) == 1  # once per document

        client.notify("workspace/didChangeConfiguration", {"settings": {"completer": {"excludeFiles": []}}})
        _indexed(client, 2)  # built anew, with registry.py
        fresh = (tmp_path / "again.py").as_uri()  # a document with no earlier answer to type through
        client.open(fresh, BESIDE_OTHER_FILE)
        assert FROM_OTHER_FILE in _lines(client, fresh)
        assert client.completion(registry, 4, len("    registry.register_handler(\"zq_al"))["result"]["items"]


@pytest.fixture
def endpoint():
    fake = FakeEndpoint(Behaviour(line=lambda prompt: "return charge_with_stripe(amount)")).start()
    yield fake
    fake.stop()


def test_nothing_of_an_excluded_file_reaches_an_endpoint(tmp_path: Path, endpoint: FakeEndpoint):
    """Against a remote backend, where excludeFiles matters most: the default keeps a .env file (every language is
    enabled for an endpoint) out of every request, and a user's pattern a source file of secrets."""
    (tmp_path / "keys.py").write_text(f"STRIPE_KEY = \"{SECRET}\"\n\n\ndef stripe_key():\n    return STRIPE_KEY\n")
    (tmp_path / ".env").write_text(f"STRIPE_KEY={SECRET}\n")
    (tmp_path / "billing.py").write_text("def charge_with_stripe(amount):\n    return stripe.charge(amount)\n")
    options = {"backend": "openai", "endpoint": endpoint.url, "model": "test-model", "requestTimeoutMs": 2000,
               "excludeFiles": [*DEFAULT_EXCLUDED, "keys.py"]}
    with _server(tmp_path, **options) as client:
        _indexed(client, 1)  # billing.py alone
        env, keys = (tmp_path / ".env").as_uri(), (tmp_path / "keys.py").as_uri()
        client.open(env, f"STRIPE_KEY={SECRET}\nSTRIPE_", language_id="dotenv")
        client.open(keys, f"STRIPE_KEY = \"{SECRET}\"\n\n\ndef stripe_key():\n    ")
        assert client.completion(env, 1, 7)["result"]["items"] == []
        assert client.completion(keys, 4, 4)["result"]["items"] == []
        assert endpoint.seen == []  # neither was sent

        cart = (tmp_path / "cart.py").as_uri()
        client.open(cart, "import billing\nimport keys\n\n\ndef pay(amount):\n    key = stripe_key()\n    ")
        assert client.completion(cart, 6, 4)["result"]["items"]
        prompt = endpoint.seen[-1].body["prompt"]
        assert "charge_with_stripe" in prompt  # the workspace's other files are read ...
        assert SECRET not in prompt and "def stripe_key" not in prompt  # ... but not the excluded ones


def test_no_symlink_lends_an_endpoint_the_text_of_a_file_the_walk_would_not_read(tmp_path: Path,
                                                                                 endpoint: FakeEndpoint):
    """A symlink of the workspace pointing at a file its .gitignore ignores was read as the link's own text (git keeps
    a link's target path, never the ignored file's text); and a file indexed, then replaced by a symlink out of the
    workspace with no event to say so (a client without file watchers), was read at the next pick, wherever it led."""
    root = (tmp_path / "app").resolve()
    (root / "private").mkdir(parents=True)
    (root / ".gitignore").write_text("private/\n")
    (root / "private" / "creds.py").write_text(f"def charge_with_stripe(amount):\n    return \"{SECRET}-ignored\"\n")
    (root / "creds_link.py").symlink_to(root / "private" / "creds.py")
    (root / "billing.py").write_text("def charge_with_stripe(amount):\n    return stripe.charge(amount)\n")
    outside = tmp_path / "outside.py"
    outside.write_text(f"def charge_with_stripe(amount):\n    return \"{SECRET}-outside\"\n")
    options = {"backend": "openai", "endpoint": endpoint.url, "model": "test-model", "requestTimeoutMs": 2000}
    with _server(root, **options) as client:
        _indexed(client, 1)  # billing.py alone
        text = "import billing\n\n\ndef pay(amount):\n    charge_with_stripe(amount)\n    "
        cart = (root / "cart.py").as_uri()
        client.open(cart, text)
        assert client.completion(cart, 5, 4)["result"]["items"]
        assert "charge_with_stripe" in endpoint.seen[-1].body["prompt"]  # billing.py is read
        (root / "billing.py").unlink()
        (root / "billing.py").symlink_to(outside)  # no event
        shop = (root / "shop.py").as_uri()  # a document with no snippets picked yet
        client.open(shop, text)
        for _ in range(3):  # the pick may end after a request's wait: the next ones take it
            assert client.completion(shop, 5, 4)["result"]["items"]
        assert all(SECRET not in seen.body["prompt"] for seen in endpoint.seen), endpoint.seen[-1].body["prompt"]


def test_file_info_names_the_pattern_for_a_status_bar_and_refuses_what_names_no_file(tmp_path: Path):
    client = RawClient(SERVER_CMD, env=server_env())
    with client:
        client.request("initialize", {"processId": os.getpid(), "rootUri": tmp_path.as_uri(), "capabilities": {},
                                      "initializationOptions": {"completer": {"excludeFiles": ["secrets/", "*.pem",
                                                                                               "!public.pem"]}}})
        client.notify("initialized", {})

        def excluded(uri: str):
            return client.request("completer/fileInfo", {"uri": uri})["result"]["excluded"]

        assert excluded((tmp_path / "app" / "secrets" / "db.py").as_uri()) == "secrets/"
        assert excluded((tmp_path / "server.pem").as_uri()) == "*.pem"
        assert excluded((tmp_path / "public.pem").as_uri()) is None
        assert excluded((tmp_path / "app.py").as_uri()) is None and excluded("untitled:Untitled-1") is None
        assert excluded("vscode-notebook-cell:Untitled-1.ipynb#W0sZmlsZQ%3D%3D") is None  # an untitled notebook
        client.notify("workspace/didChangeConfiguration", {"settings": {"completer": {"excludeFiles": None}}})
        assert excluded((tmp_path / "app" / "secrets" / "db.py").as_uri()) is None  # the change is applied first
        assert excluded((tmp_path / "deploy" / ".env.production").as_uri()) == ".env.*"
        for params in (None, {}, {"uri": 3}, [1]):
            assert client.request("completer/fileInfo", params)["error"]["code"] == -32602
        assert client.request("completer/info")["result"]  # still serving
    refused = [m["params"]["message"] for m in client.notifications
               if m.get("method") == "window/logMessage" and "completer/fileInfo" in m["params"]["message"]]
    assert len(refused) == 4 and not any("Traceback" in message for message in refused)


def test_a_file_is_left_alone_under_each_of_its_names(tmp_path: Path, endpoint: FakeEndpoint):
    """A symlink of an unexcluded name to an excluded file (or folder), a URI with `..` past an anchored pattern,
    one naming this machine's host (`file://localhost/...`) and a name in other letter case: the file behind each
    gets no suggestion, the status bar names its pattern, and nothing of it is read into another file's prompt (the
    index walks the symlink, the open files' heads)."""
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "creds.py").write_text(f"def stripe_token():\n    return \"{SECRET}\"\n")
    (tmp_path / "settings_local.py").symlink_to("secrets/creds.py")
    (tmp_path / "lib").symlink_to("secrets", target_is_directory=True)
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "prod.py").write_text(f"def stripe_token():\n    return \"{SECRET}\"\n")
    (tmp_path / "billing.py").write_text("def charge_with_stripe(amount):\n    return stripe.charge(amount)\n")
    options = {"backend": "openai", "endpoint": endpoint.url, "model": "test-model", "requestTimeoutMs": 2000,
               "excludeFiles": [*DEFAULT_EXCLUDED, "secrets/", "/config/prod.py"]}
    names = {(tmp_path / "settings_local.py").as_uri(): "secrets/",
             (tmp_path / "lib" / "creds.py").as_uri(): "secrets/",
             tmp_path.as_uri() + "/app/../config/prod.py": "/config/prod.py",
             (tmp_path / "config" / "prod.py").as_uri().replace("file://", "file://localhost", 1): "/config/prod.py",
             (tmp_path / ".ENV").as_uri(): ".env",
             # a cell of a notebook the client does not sync: its URI names the notebook's path
             (tmp_path / "secrets" / "book.ipynb").as_uri().replace("file://", "vscode-notebook-cell:")
             + "#W0sZmlsZQ%3D%3D": "secrets/"}
    with _server(tmp_path, **options) as client:
        _indexed(client, 1)  # billing.py alone
        for uri, pattern in names.items():
            assert client.request("completer/fileInfo", {"uri": uri})["result"]["excluded"] == pattern, uri
            client.open(uri, f"def stripe_token():\n    return \"{SECRET}\"\n\n\ndef stripe_key():\n    ")
            assert client.completion(uri, 5, 4)["result"]["items"] == [], uri
        assert endpoint.seen == []

        cart = (tmp_path / "cart.py").as_uri()
        client.open(cart, "import billing\n\n\ndef pay(amount):\n    token = stripe_token()\n    ")
        assert client.completion(cart, 5, 4)["result"]["items"]
        prompts = [seen.body["prompt"] for seen in endpoint.seen]
        assert prompts and "charge_with_stripe" in prompts[-1]  # the index's other files are read ...
        assert not any(SECRET in prompt for prompt in prompts)  # ... but no name of an excluded one


def test_a_folder_opened_inside_another_takes_back_none_of_its_exclusions(tmp_path: Path, endpoint: FakeEndpoint):
    """A multi-root workspace of a repository and one of its packages: a pattern anchored in the repository's folder
    still leaves the package's file alone, as the walk of the repository reads it and when it is opened."""
    (tmp_path / "service").mkdir()
    (tmp_path / "service" / "settings.py").write_text(f"def stripe_token():\n    return \"{SECRET}\"\n")
    (tmp_path / "billing.py").write_text("def charge_with_stripe(amount):\n    return stripe.charge(amount)\n")
    settings = (tmp_path / "service" / "settings.py").as_uri()
    client = RawClient(SERVER_CMD, env=server_env())
    with client:
        client.request("initialize", {"processId": os.getpid(), "capabilities": {}, "workspaceFolders": [
            {"uri": tmp_path.as_uri(), "name": "repo"}, {"uri": (tmp_path / "service").as_uri(), "name": "service"}],
            "initializationOptions": {"completer": {
                "backend": "openai", "endpoint": endpoint.url, "model": "test-model", "requestTimeoutMs": 2000,
                "excludeFiles": ["/service/settings.py"]}}})
        client.notify("initialized", {})
        _indexed(client, 1)  # billing.py alone
        assert client.request("completer/fileInfo", {"uri": settings})["result"]["excluded"] == "/service/settings.py"
        client.open(settings, f"def stripe_token():\n    return \"{SECRET}\"\n    ")
        assert client.completion(settings, 2, 4)["result"]["items"] == [] and endpoint.seen == []
        client.notify("textDocument/didClose", {"textDocument": {"uri": settings}})
        cart = (tmp_path / "cart.py").as_uri()
        client.open(cart, "import billing\n\n\ndef pay(amount):\n    token = stripe_token()\n    ")
        assert client.completion(cart, 5, 4)["result"]["items"]
        assert "charge_with_stripe" in endpoint.seen[-1].body["prompt"]
        assert not any(SECRET in seen.body["prompt"] for seen in endpoint.seen)


def test_file_info_names_the_pattern_that_decides(tmp_path: Path):
    """A folder taken back with `!` does not take back the files a pattern names inside it (git's rule, which the
    server follows): the status bar names that pattern rather than saying the file is not excluded."""
    rules = Exclusions(["# dotenv files", "", ".env.*", "!.env.example", "!docs/"])
    assert rules.pattern_for(tmp_path / "docs" / ".env.local", [tmp_path]) == ".env.*"
    assert rules.pattern_for(tmp_path / "docs" / ".env.example", [tmp_path]) is None
    client = RawClient(SERVER_CMD, env=server_env())
    with client:
        client.request("initialize", {"processId": os.getpid(), "rootUri": tmp_path.as_uri(), "capabilities": {},
                                      "initializationOptions": {"completer": {"excludeFiles": rules.patterns}}})
        client.notify("initialized", {})
        uri = (tmp_path / "docs" / ".env.local").as_uri()
        client.open(uri, "API_KEY=x\nAPI_", language_id="python")
        assert client.request("completer/fileInfo", {"uri": uri})["result"]["excluded"] == ".env.*"
        assert client.completion(uri, 1, 4)["result"]["items"] == []
        assert _logged(client, "matches excludeFiles' '.env.*'")


def test_a_symlink_pointed_at_an_excluded_file_later_is_left_alone_after_the_event(tmp_path: Path,
                                                                                   endpoint: FakeEndpoint):
    """The server keeps each document's answer between keystrokes; a symlink made anew (a checkout that switches
    what `current.py` points at) is looked up again once the client's watcher reports it."""
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "creds.py").write_text(f"STRIPE = \"{SECRET}\"\n")
    (tmp_path / "plain.py").write_text("STRIPE = None\n")
    link = tmp_path / "current.py"
    link.symlink_to("plain.py")
    options = {"backend": "openai", "endpoint": endpoint.url, "model": "test-model", "requestTimeoutMs": 2000,
               "excludeFiles": ["secrets/"]}
    with _server(tmp_path, **options) as client:
        client.open(link.as_uri(), "STRIPE = None\n\n\ndef charge_with_stripe(amount):\n    ")
        assert client.completion(link.as_uri(), 4, 4)["result"]["items"]
        link.unlink()
        link.symlink_to("secrets/creds.py")
        client.notify("workspace/didChangeWatchedFiles", {"changes": [{"uri": link.as_uri(), "type": 2}]})
        client.change(link.as_uri(), 2, (0, 0), (0, 0), f"STRIPE = \"{SECRET}\"\n")
        asked = len(endpoint.seen)
        assert client.completion(link.as_uri(), 5, 4)["result"]["items"] == []
        assert len(endpoint.seen) == asked


async def test_a_change_of_the_patterns_excludes_from_its_arrival_not_once_applied(tmp_path: Path):
    """A settings change waits for the settings' lock, which a model that loads holds for seconds (eglot, lsp-mode
    and ALE send their settings right after initialize, as the worker boots): its patterns exclude meanwhile."""
    import asyncio

    from lsp.server import CompleterServer

    server = CompleterServer()
    server._config_lock = lock = asyncio.Lock()
    secret = (tmp_path / "vault.py").as_uri()
    await lock.acquire()  # the model loading
    change = asyncio.ensure_future(server.change_settings({"completer": {"excludeFiles": ["vault.py"]}}))
    await asyncio.sleep(0.05)
    assert server.settings.exclude_files == DEFAULT_EXCLUDED  # not applied yet ...
    assert server.excluded(secret)  # ... but in force
    lock.release()
    await asyncio.wait_for(change, 10)
    assert server.settings.exclude_files == ("vault.py",) and server.excluded(secret)
    await server.change_settings({"completer": {"excludeFiles": None}})
    assert not server.excluded(secret) and not server.document_exclusions.pending


async def test_a_search_whose_snippets_were_picked_before_the_patterns_changed_drops_its_search_ahead():
    """A request whose workspace snippets were being picked when excludeFiles changed reached the worker after the
    change had dropped the searches ahead: its answer led the worker to search the line after Enter with those
    snippets, and the keystroke after Enter took a line of the file just excluded. The server drops them again
    once that search is over."""
    import asyncio

    from lsprotocol import types

    from lsp.server import CompleterServer

    server = CompleterServer()
    server._config_lock = asyncio.Lock()
    uri = "file:///work/doc.py"
    server.documents.open(uri, "python", 1, "import os\nos.pa")
    picking, picked = asyncio.Event(), asyncio.Event()

    async def slow_snippets(uri: str, before: str) -> list:
        picking.set()
        await picked.wait()
        return []

    async def search(*args: object) -> dict:
        return {"result": {"suggestions": []}}

    forgotten: list[str] = []
    server.lookups.snippets = slow_snippets  # type: ignore[method-assign]
    server.searches.run = search  # type: ignore[method-assign]
    server.worker.forget_searches_ahead = lambda: forgotten.append("forgotten")  # type: ignore[method-assign]
    request = asyncio.ensure_future(server.suggest(server.locate(uri, types.Position(1, 5))))
    await asyncio.wait_for(picking.wait(), 10)
    await server.change_settings({"completer": {"excludeFiles": ["vault/"]}})
    assert len(forgotten) == 1  # the change's own
    picked.set()
    await asyncio.wait_for(request, 10)
    assert len(forgotten) == 2, "the search of the snippets picked before the change left its search ahead"


def test_a_file_in_an_excluded_folder_stays_excluded_whatever_a_later_line_says(tmp_path: Path):
    """As in git, which never looks inside a folder it ignores: `!secrets/ok.py` cannot take a file of `secrets/`
    back; `!public.pem` takes back a file that a pattern of files left out."""
    rules = Exclusions(["secrets/", "!secrets/ok.py", "*.pem", "!public.pem"])
    assert rules.pattern_for(tmp_path / "secrets" / "ok.py", [tmp_path], resolve=False) == "secrets/"
    assert rules.pattern_for(tmp_path / "app" / "secrets" / "db" / "a.py", [tmp_path], resolve=False) == "secrets/"
    assert rules.pattern_for(tmp_path / "public.pem", [tmp_path], resolve=False) is None
    assert rules.pattern_for(tmp_path / "server.pem", [tmp_path], resolve=False) == "*.pem"
