"""The embedded default: one command, SQLite and a SQLite queue, a real worker, demo users."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from devkit.paths import CORPUS, REPO
from devkit.stack import free_port

pytestmark = pytest.mark.slow


def test_run_embedded_then_submit_with_the_cli(tmp_path: Path) -> None:
    port = free_port()
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("AUTOGRADE_")}
    env.update(AUTOGRADE_SANDBOX_BACKEND="local", AUTOGRADE_CONFIG_DIR=str(tmp_path / "client"),
               PYTHONUNBUFFERED="1")
    log = open(tmp_path / "embedded.log", "wb")  # noqa: SIM115 - closed below
    server = subprocess.Popen(
        [sys.executable, "-m", "service.cli", "run-embedded", "--data-dir",
         str(tmp_path / "data"), "--port", str(port)], env=env, cwd=tmp_path, stdout=log,
        stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while "Stop with Ctrl-C" not in (tmp_path / "embedded.log").read_text(errors="replace"):
            assert server.poll() is None and time.monotonic() < deadline, \
                (tmp_path / "embedded.log").read_text()
            time.sleep(0.3)
        banner = (tmp_path / "embedded.log").read_text()
        assert url in banner and "student" in banner
        passwords = json.loads((tmp_path / "data" / "demo-credentials.json").read_text())
        assert oct((tmp_path / "data" / "demo-credentials.json").stat().st_mode & 0o777) \
            == "0o600"
        assert passwords["student"] in banner

        def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
            return subprocess.run([sys.executable, "-m", "service.cli", *args], env=env,
                                  cwd=REPO, input=stdin, capture_output=True, text=True,
                                  timeout=300)

        login = cli("login", "--url", url, "--username", "student", "--password-stdin",
                    stdin=passwords["student"] + "\n")
        assert login.returncode == 0, login.stderr
        submit = cli("submit", str(CORPUS / "attention" / "softmax_dim_minus2.py"),
                     "--assignment", "attention", "--timeout", "240")
        assert submit.returncode == 0, submit.stdout + submit.stderr
        assert "[softmax-wrong-axis]" in submit.stdout
        assert requests.get(url + "/healthz", timeout=5).ok
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
        log.close()
    with pytest.raises(requests.ConnectionError):
        requests.get(url + "/healthz", timeout=5)
