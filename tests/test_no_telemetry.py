"""Nothing leaves the machine: onnxruntime's own telemetry is off in every process that runs the model.

onnxruntime's official Linux and macOS builds collect telemetry from the moment they are imported (a device id and a
store of events under the user's cache folder, which they upload to Microsoft) unless ORT_DISABLE_TELEMETRY=1 is set
before that import; completer/__init__.py sets it. What these tests look for is the device id and the store: the
upload itself needs a network that test machines do not have."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lsp.rawclient import RawClient
from lsp_support import SAMPLE

TELEMETRY_NAMES = ("deviceid", "onnxruntime.db")
CI_VARIABLES = ("CI", "CONTINUOUS_INTEGRATION", "BUILDKITE", "CIRCLECI", "CODEBUILD_BUILD_ID", "GITHUB_ACTIONS",
                "GITLAB_CI", "JENKINS_URL", "SYSTEM_TEAMFOUNDATIONCOLLECTIONURI", "TEAMCITY_VERSION", "TF_BUILD",
                "TRAVIS", "APPVEYOR", "BITBUCKET_BUILD_NUMBER", "ORT_RUNNING_UNIT_TESTS")
"""What onnxruntime reads as a build pipeline, where it collects nothing (the names its library holds): a user's
machine has none of them, and with one set these tests would pass whatever our processes did."""


def _user_folders(home: Path) -> dict[str, str]:
    """A user's environment, not CI's, whose home and cache folders are `home`, with the user's own choice of
    telemetry saying yes: our processes must turn it off themselves."""
    user = {name: value for name, value in os.environ.items() if name not in CI_VARIABLES}
    return {**user, "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"), "ORT_DISABLE_TELEMETRY": "0",
            "COMPLETER_STANDALONE": "1"}


def _telemetry_files(home: Path) -> list[str]:
    return sorted(str(path.relative_to(home)) for path in home.rglob("*") if path.name in TELEMETRY_NAMES)


def test_onnxruntime_left_alone_collects_telemetry(tmp_path: Path) -> None:
    """The control: without our setting, importing onnxruntime writes the files the other tests look for."""
    subprocess.run([sys.executable, "-c", "import onnxruntime"], env=_user_folders(tmp_path), check=True, timeout=120)
    assert _telemetry_files(tmp_path), "onnxruntime wrote no telemetry files: look for its store elsewhere"


def test_a_build_pipelines_variables_are_left_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run on any CI service onnxruntime knows (AppVeyor and Bitbucket Pipelines among them), the control still
    sees the files: with one of its variables left in, these tests would pass whatever our processes did."""
    for name in ("APPVEYOR", "BITBUCKET_BUILD_NUMBER", "CI", "GITHUB_ACTIONS", "TF_BUILD"):
        monkeypatch.setenv(name, "True")
    test_onnxruntime_left_alone_collects_telemetry(tmp_path)


def test_the_command_line_collects_no_telemetry(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "completer", "complete", f"{SAMPLE}:3:1"], env=_user_folders(tmp_path),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert _telemetry_files(tmp_path) == []


@pytest.mark.parametrize("standalone", [True, False], ids=["private-worker", "session-host-and-shared-engine"])
def test_the_language_server_and_its_model_processes_collect_no_telemetry(tmp_path: Path, standalone: bool) -> None:
    uri = SAMPLE.as_uri()
    env = _user_folders(tmp_path)
    if not standalone:  # the default: sessions forked by the session host, the model in the shared engine
        del env["COMPLETER_STANDALONE"]
        env.update(COMPLETER_RUNTIME_DIR=str(tmp_path / "run"), COMPLETER_ENGINE_IDLE_EXIT_S="3")
    with RawClient([sys.executable, "-m", "lsp"], env=env, cwd=str(tmp_path)) as client:
        client.initialize()
        client.open(uri, SAMPLE.read_text())
        answer = client.completion(uri, 2, 0, timeout=120)
        assert answer["result"]["items"], answer  # the worker loaded the model and ran it
    assert _telemetry_files(tmp_path) == []
