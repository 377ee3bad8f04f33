"""The ``aneforge`` console script that ``pip install .`` puts next to the interpreter: it is the
Rust command line (same version as the package, same output, exit codes 0 / 1, one-line errors)."""

import os
import platform
import subprocess
import sys
from pathlib import Path

import aneforge as af
from aneforge._core import cli_main

SCRIPT = Path(sys.executable).parent / "aneforge"


def aneforge(*args: str, **env: str) -> subprocess.CompletedProcess:
    """Run the installed console script with `args` (and extra environment `env`)."""
    assert SCRIPT.is_file(), f"{SCRIPT} is missing: the package was installed without its console script"
    return subprocess.run(
        [str(SCRIPT), *args],
        check=False,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=120,
    )


def test_version_is_the_package_version():
    out = aneforge("--version")
    assert (out.returncode, out.stdout, out.stderr) == (
        0,
        f"aneforge {af.__version__}\n",
        "",
    )


def test_info_lists_the_executors_cache_and_threads(tmp_path):
    out = aneforge("info", ANEFORGE_CACHE_DIR=str(tmp_path), RAYON_NUM_THREADS="3")
    assert (out.returncode, out.stderr) == (0, ""), out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"aneforge {af.__version__}"
    assert lines[2:4] == ["executors:", "  reference: available"], lines
    assert lines[4].startswith("  ane: "), lines
    if platform.system() != "Darwin":
        assert lines[4].startswith("  ane: unavailable: platform: not macOS (this is linux/"), lines
    assert f"cache dir: {tmp_path}" in lines
    assert "threads: 3 (rayon; set RAYON_NUM_THREADS to change)" in lines


def test_a_failing_command_prints_one_error_line_and_exits_1():
    out = aneforge("ops", "--target", "q7")
    assert (out.returncode, out.stdout) == (1, ""), out.stdout
    assert out.stderr.startswith("aneforge: error: ") and out.stderr.count("\n") == 1, out.stderr
    assert "'q7' is not a known ANE arch" in out.stderr


def test_usage_errors_exit_1_and_help_exits_0():
    bad = aneforge("frobnicate")
    assert bad.returncode == 1 and "unrecognized subcommand 'frobnicate'" in bad.stderr, bad.stderr
    helped = aneforge("run", "--help")
    assert helped.returncode == 0 and helped.stdout.startswith("Run a program directory"), helped.stdout


def test_cli_main_returns_the_exit_code_in_process(capfd):
    assert cli_main(["aneforge", "--version"]) == 0
    assert capfd.readouterr().out == f"aneforge {af.__version__}\n"
    assert cli_main(["aneforge", "ops", "--target", "q7"]) == 1
    err = capfd.readouterr().err
    assert err.startswith("aneforge: error: ") and "q7" in err, err
