"""The probe runner as a script: ``python -I runner/__main__.py JOB_DIR OUT_DIR ...`` (``boot``).

The sandbox runs it with no package of ours installed (from ``/opt/autograde/runner`` in the
image), and under ``python -I`` its folder is not on ``sys.path`` (nor should it be, where the
submission's folder is): this loads the package from its folder under a name of its own,
``autograde_runner``, and runs ``boot.main``. The fork server loads it the same way.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import types

PACKAGE = "autograde_runner"


def load_boot() -> types.ModuleType:
    """The runner's ``boot`` module, its package loaded from this folder as ``PACKAGE``."""
    if PACKAGE not in sys.modules:
        folder = os.path.dirname(os.path.abspath(__file__))
        spec = importlib.util.spec_from_file_location(
            PACKAGE, os.path.join(folder, "__init__.py"), submodule_search_locations=[folder])
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load the runner from {folder}")
        package = importlib.util.module_from_spec(spec)
        sys.modules[PACKAGE] = package
        spec.loader.exec_module(package)
    return importlib.import_module(f"{PACKAGE}.boot")


if __name__ == "__main__":
    load_boot().main(sys.argv[1:])
