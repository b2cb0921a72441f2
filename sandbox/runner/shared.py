"""The files of ours the runner loads by path: ``wire.py`` and ``training.py``, beside its package.

They live in ``sandbox/`` (``/opt/autograde`` in the image), where the host imports them too.
"""

from __future__ import annotations

import importlib.util
import os
import types


def _load_sibling(filename: str, name: str) -> types.ModuleType:
    """A file of ours in the folder above this package (``wire.py``, ``training.py``): the
    runner runs as a script under ``python -I``, so that folder is not on ``sys.path`` (nor
    should it be, where the submission's folder is)."""
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), filename)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


WIRE = _load_sibling("wire.py", "autograde_wire")
PLAN_FILE: str = WIRE.PLAN_FILE
INPUTS_FILE: str = WIRE.INPUTS_FILE
SUBMISSION_DIR: str = WIRE.SUBMISSION_DIR
EVENTS_FILE: str = WIRE.EVENTS_FILE
TENSORS_DIR: str = WIRE.TENSORS_DIR
WALL_SLACK: float = WIRE.WALL_SLACK
TRAINING = _load_sibling("training.py", "autograde_training_probe")
