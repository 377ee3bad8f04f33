"""Layering of the core crate: no import circle may span more than one folder.

Reads every `.rs` file under crates/aneforge/src, resolves its `crate::`/`super::`/`self::` paths
to the module file they name (re-exports at the crate root and in `mod.rs` files are followed to
the module that defines the item), and fails on any strongly connected component of the
file-level import graph whose files live in two or more folders.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.setrecursionlimit(10_000)
SRC = Path(__file__).resolve().parents[2] / "crates" / "aneforge" / "src"

_PATH = re.compile(r"\b((?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)+)")
_USE_GROUP = re.compile(r"\buse\s+((?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{([^;]*)\};", re.S)
_PUB_USE = re.compile(r"\bpub(?:\([a-z]+\))?\s+use\s+([^;]+);", re.S)


def _module_of(path: Path) -> tuple[str, ...]:
    rel = path.relative_to(SRC).with_suffix("")
    parts = rel.parts
    if parts[-1] in ("mod", "lib") or (len(parts) == 1 and parts[0] == "lib"):
        parts = parts[:-1]
    return tuple(parts)


def _files() -> dict[tuple[str, ...], Path]:
    out = {}
    for p in SRC.rglob("*.rs"):
        if "bin" in p.relative_to(SRC).parts:
            continue
        out[_module_of(p)] = p
    return out


def _strip(text: str) -> str:
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r'"(?:\\.|[^"\\])*"', '""', text)


def _without_tests(text: str) -> str:
    """Drops `#[cfg(test)] mod tests { ... }` blocks (tests may reach anywhere)."""
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:pub(?:\([a-z]+\))?\s+)?mod\s+\w+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i : m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)


def _absolute(module: tuple[str, ...], is_dir_mod: bool, path: str) -> tuple[str, ...]:
    # `self` is the module itself and `super` its parent, for a mod.rs and a plain file alike.
    segs = path.split("::")
    base = list(module)
    if segs[0] == "crate":
        base, segs = [], segs[1:]
    elif segs[0] == "self":
        base, segs = (list(module), segs[1:])
    while segs and segs[0] == "super":
        base, segs = base[:-1], segs[1:]
    return tuple(base + segs)


def _graph():
    files = _files()
    texts = {m: _without_tests(_strip(p.read_text())) for m, p in files.items()}
    # Re-exports: (module, name) -> absolute path of the definition.
    reexports: dict[tuple[tuple[str, ...], str], tuple[str, ...]] = {}
    for mod, text in texts.items():
        is_dir = files[mod].name in ("mod.rs", "lib.rs")
        for m in _PUB_USE.finditer(text):
            body = " ".join(m.group(1).split())
            g = re.match(r"(.*?)::\{(.*)\}$", body)
            items = (
                [(g.group(1), x.strip()) for x in g.group(2).split(",")]
                if g
                else [(body.rsplit("::", 1)[0], body.rsplit("::", 1)[-1])]
            )
            for prefix, item in items:
                if not item or item == "self":
                    continue
                name = item.split(" as ")[-1].strip()
                src = f"{prefix}::{item.split(' as ')[0].strip()}"
                if src.startswith(("crate", "super", "self")):
                    reexports[(mod, name)] = _absolute(mod, is_dir, src)
                else:  # a child module of this one
                    reexports[(mod, name)] = mod + tuple(src.split("::"))

    def resolve(path: tuple[str, ...], depth: int = 0) -> tuple[str, ...] | None:
        for n in range(len(path), -1, -1):
            prefix = path[:n]
            if prefix in files:
                if n < len(path) and (prefix, path[n]) in reexports and depth < 8:
                    target = reexports[(prefix, path[n])] + path[n + 1 :]
                    if target != path:
                        return resolve(target, depth + 1)
                return prefix
        return None

    edges: dict[tuple[str, ...], set[tuple[str, ...]]] = {m: set() for m in files}
    for mod, text in texts.items():
        is_dir = files[mod].name in ("mod.rs", "lib.rs")
        paths = [m.group(1) for m in _PATH.finditer(text)]
        for g in _USE_GROUP.finditer(text):
            for item in re.split(r"[,\s]+", re.sub(r"\{[^}]*\}", "", g.group(2))):
                if item and item not in ("self", "as") and re.match(r"[A-Za-z_]", item):
                    paths.append(f"{g.group(1)}::{item}")
        if is_dir:  # a mod.rs naming its own child modules (`io::from_mil`)
            children = re.findall(r"\bmod\s+(\w+)\s*;", text)
            paths += [f"self::{m.group(0)}" for c in children for m in re.finditer(rf"(?<![:\w]){c}(?:::\w+)+", text)]
        for p in paths:
            target = resolve(_absolute(mod, is_dir, p))
            if target is not None and target not in (mod, ()):
                edges[mod].add(target)
    return files, edges


def _sccs(edges):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(comp)

    for v in edges:
        if v not in index:
            visit(v)
    return out


def _folder(files, mod) -> str:
    rel = files[mod].relative_to(SRC)
    return str(rel.parent) if len(rel.parts) > 1 else "."


def test_no_import_circle_spans_two_folders():
    files, edges = _graph()
    bad = []
    for comp in _sccs(edges):
        folders = {_folder(files, m) for m in comp}
        if len(comp) > 1 and len(folders) > 1:
            bad.append(sorted("/".join(m) or "lib" for m in comp))
    assert not bad, "import circles across folders:\n" + "\n".join(", ".join(c) for c in bad)
