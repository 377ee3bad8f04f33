"""The ``aneforge`` console script: the Rust command line (``aneforge._core.cli_main``) run as a
normal command. ``pip install .`` puts it on PATH; every option and message is the Rust CLI's."""

import signal
import sys

from aneforge._core import cli_main


def main() -> None:
    """Run ``aneforge`` on ``sys.argv[1:]`` and exit with its code (0 success, 1 failure).

    Ctrl-C and a closed pipe (``aneforge ops | head``) end the process as they end any command,
    instead of raising KeyboardInterrupt or BrokenPipeError in Python.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(cli_main(["aneforge", *sys.argv[1:]]))


if __name__ == "__main__":
    main()
