"""pytest setup: the package from the source tree (python/), the library from build/py
(GOREC_TORCH_LIB, which `make python-test` sets, takes precedence)."""
import itertools
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))

_names = itertools.count()


@pytest.fixture
def name(request):
    """A table name of its own for each test (tables are process-wide)."""
    return "%s-%d" % (request.node.name, next(_names))


def run_python(code):
    """Runs code in a new Python process with this package and library."""
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
