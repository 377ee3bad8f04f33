"""Run a benchmark's worker in a fresh process against this build or a saved "before" build
(`--base`), and check which aneforge package the child really imported.

`--base` may name the saved package directory itself (a copy of site-packages/aneforge) or a
directory containing `aneforge/`; anything else is an error, never a silent second timing of
the installed build."""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

_LINKS = []  # temporary directories holding an `aneforge` symlink; live as long as the process


def search_dir(base):
    """The directory to put first on PYTHONPATH so that `import aneforge` loads `base`; raises
    SystemExit naming `base` when it is neither a package directory nor contains one."""
    base = Path(base).resolve()
    if (base / "aneforge" / "__init__.py").is_file():
        return base
    if (base / "__init__.py").is_file():
        if base.name == "aneforge":
            return base.parent
        link = tempfile.TemporaryDirectory(prefix="aneforge-base-")
        _LINKS.append(link)
        (Path(link.name) / "aneforge").symlink_to(base, target_is_directory=True)
        return Path(link.name)
    raise SystemExit(f"--base {base}: neither an aneforge package directory nor a directory containing aneforge/")


def package_dir(base):
    """The aneforge package directory `--base` names (see `search_dir`)."""
    return (search_dir(base) / "aneforge").resolve()


def run_worker(script, args, threads, base=None):
    """Run `script` with `args` in a fresh process at `threads` threads (RAYON/OMP), with the
    `base` build first on PYTHONPATH when given; its last stdout line parsed as JSON. The worker
    reports `aneforge.__file__` as "module" (dropped from the result); a base run that imported another package raises
    SystemExit."""
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads), ANEFORGE_QUIET="1")
    if base:
        env["PYTHONPATH"] = os.pathsep.join(p for p in [str(search_dir(base)), env.get("PYTHONPATH", "")] if p)
    res = subprocess.run([sys.executable, str(script), *args], env=env, capture_output=True, text=True, check=True)
    out = json.loads(res.stdout.strip().splitlines()[-1])
    module = out.pop("module", None)
    if base and (module is None or Path(module).resolve().parent != package_dir(base)):
        raise SystemExit(f"--base {base}: the worker imported {module}, not the base build")
    return out
