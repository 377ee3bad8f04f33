"""Shared test setup: a private, temporary program cache and no executor notice on stderr."""

import atexit
import os
import shutil
import tempfile

# Set before aneforge compiles anything: the core reads these at compile time.
if not os.environ.get("ANEFORGE_CACHE_DIR"):
    _cache = tempfile.mkdtemp(prefix="aneforge-test-cache-")
    os.environ["ANEFORGE_CACHE_DIR"] = _cache
    atexit.register(shutil.rmtree, _cache, ignore_errors=True)
os.environ.setdefault("ANEFORGE_QUIET", "1")
