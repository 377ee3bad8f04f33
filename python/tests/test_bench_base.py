"""bench/base_build.py: `--base` selects the saved build whichever form the directory takes, and a
child that imported another aneforge is an error, not a silent timing of the installed build."""

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def base_build():
    spec = importlib.util.spec_from_file_location("base_build", BENCH / "base_build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


WORKER = """import json, sys
import aneforge
print("noise")
print(json.dumps({"value": 7, "module": aneforge.__file__}))
"""


@pytest.fixture
def saved(tmp_path):
    """A saved 'build': a package directory named like a copy (not `aneforge`) whose module
    says where it lives, and a worker script importing it."""
    pkg = tmp_path / "saved_copy"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    worker = tmp_path / "worker.py"
    worker.write_text(WORKER)
    return pkg, worker


def test_package_directory_and_parent_both_select_the_saved_build(saved, tmp_path):
    b = base_build()
    pkg, worker = saved
    assert b.package_dir(pkg) == pkg.resolve()
    assert b.run_worker(worker, [], 1, base=pkg) == {"value": 7}
    parent = tmp_path / "holder"
    parent.mkdir()
    (parent / "aneforge").symlink_to(pkg, target_is_directory=True)
    assert b.search_dir(parent) == parent.resolve()
    assert b.run_worker(worker, [], 1, base=parent) == {"value": 7}


def test_a_directory_without_a_package_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="neither an aneforge package directory"):
        base_build().search_dir(tmp_path)


def test_a_worker_that_imported_another_build_is_an_error(saved, tmp_path):
    b = base_build()
    pkg, _ = saved
    liar = tmp_path / "liar.py"
    liar.write_text('import json\nprint(json.dumps({"module": "/elsewhere/aneforge/__init__.py"}))\n')
    with pytest.raises(SystemExit, match="not the base build"):
        b.run_worker(liar, [], 1, base=pkg)
    # Without --base the reported module is only dropped.
    assert b.run_worker(liar, [], 1) == {}
