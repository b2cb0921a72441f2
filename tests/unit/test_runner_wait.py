"""A warm runner's wait for its job: woken by the plan moved into its folder, not by the clock,
and looking for it at its interval where nothing wakes it."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from sandbox.runner import boot

LONG = 60.0
"""An interval no test waits for: a wait that ends sooner was ended by the wake."""


def _move_in_later(folder: Path, name: str, seconds: float) -> threading.Thread:
    """Lay the file out beside ``folder`` and move it in after ``seconds``, as the host does."""
    def move() -> None:
        time.sleep(seconds)
        staged = folder.with_name("staged")
        staged.write_text("{}")
        os.rename(staged, folder / name)

    mover = threading.Thread(target=move, daemon=True)
    mover.start()
    return mover


def _open_descriptors() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_the_plan_moved_in_ends_the_wait_at_once(tmp_path: Path) -> None:
    folder = tmp_path / "job"
    folder.mkdir()
    before = _open_descriptors()
    mover = _move_in_later(folder, "plan.json", 0.2)
    started = time.monotonic()
    boot.wait_for(str(folder / "plan.json"), LONG)
    assert time.monotonic() - started < LONG / 4, "the move did not wake the wait"
    assert (folder / "plan.json").exists()
    mover.join()
    assert _open_descriptors() == before  # the watch is closed before student code runs


def test_a_plan_already_there_ends_the_wait_before_it_starts(tmp_path: Path) -> None:
    (tmp_path / "plan.json").write_text("{}")
    boot.wait_for(str(tmp_path / "plan.json"), LONG)


def test_without_inotify_the_wait_looks_at_its_interval(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """gVisor, or no inotify at all: the interval alone finds the plan."""
    monkeypatch.setattr(boot, "_watch_folder", lambda _folder: None)
    folder = tmp_path / "job"
    folder.mkdir()
    mover = _move_in_later(folder, "plan.json", 0.1)
    boot.wait_for(str(folder / "plan.json"), 0.01)
    assert (folder / "plan.json").exists()
    mover.join()
