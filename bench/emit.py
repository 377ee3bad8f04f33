"""One way for every benchmark script to report: print the Markdown section and append it to
``--out`` (BENCHMARKS.md) when given."""


def emit(text, out=None):
    """Print `text`; when `out` names a file, append a blank line and `text` to it (UTF-8)."""
    print(text)
    if out:
        with open(out, "a", encoding="utf-8") as f:
            f.write("\n" + text)
