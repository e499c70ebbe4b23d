"""Pull-request-supplied patterns and YAML, evaluated with bounds. Pure; runs inside the
execution boundary (``isolation``), never in the serving process.

- Regular expressions run on RE2 (linear time in the subject) where its syntax allows; what it
  cannot express (look-around, back-references) falls back to Python's ``re``, which the
  boundary bounds in time (each configuration file's patterns are a stage of their own).
- Globs become RE2 expressions; runs of ``**/`` collapse into one (same meaning, no blow-up).
- YAML documents have a size cap and an alias-expansion cap: the node graph is composed (aliases
  shared, not copied), its expanded size counted, and only then is it built into objects.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

import re2
import yaml

from .refusals import EXHAUSTED

__all__ = [
    "MAX_PATTERN_CHARS",
    "MAX_YAML_BYTES",
    "MAX_YAML_NODES",
    "YamlRefused",
    "compile_glob",
    "compile_regex",
    "load_yaml",
    "strip_verbose",
]

MAX_PATTERN_CHARS = 4096  # a longer pattern is not a path filter anyone writes: not used
MAX_YAML_BYTES = 256 * 1024
MAX_YAML_NODES = 100_000  # after expanding every alias
Matcher = Callable[[str], bool]
_QUIET = re2.Options()
_QUIET.log_errors = False  # a pattern RE2 cannot express is expected, not worth a line on stderr


def strip_verbose(pattern: str) -> str:
    """A ``re.VERBOSE`` pattern without its layout (whitespace and ``#`` comments outside
    character classes and escapes), for engines without that flag."""
    out: list[str] = []
    i, in_class = 0, False
    while i < len(pattern):
        char = pattern[i]
        if char == "\\" and i + 1 < len(pattern):
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = char != "]"
            out.append(char)
        elif char == "[":
            in_class = True
            out.append(char)
        elif char == "#":
            newline = pattern.find("\n", i)
            i = len(pattern) if newline < 0 else newline
            continue
        elif not char.isspace():
            out.append(char)
        i += 1
    return "".join(out)


@functools.lru_cache(maxsize=512)
def compile_regex(pattern: str, *, verbose: bool = False) -> Matcher | None:
    """``search`` for ``pattern`` on RE2, else on ``re``; None when neither accepts it."""
    if len(pattern) > MAX_PATTERN_CHARS:
        return None
    try:
        linear = re2.compile(strip_verbose(pattern) if verbose else pattern, options=_QUIET)
    except re2.error:
        pass
    else:
        return lambda subject: linear.search(subject) is not None
    try:
        backtracking = re.compile(pattern, re.VERBOSE if verbose else 0)
    except (re.error, RecursionError, OverflowError):
        return None
    return lambda subject: backtracking.search(subject) is not None


def compile_glob(regex: str) -> Matcher | None:
    """``fullmatch`` for a glob already translated to a regular expression (``selection``)."""
    try:
        linear = re2.compile(regex, options=_QUIET)
    except re2.error:
        return None
    return lambda subject: linear.fullmatch(subject) is not None


class YamlRefused(ValueError):
    """The document was not read; the message says why, in a few words."""


def load_yaml(text: str) -> Any:
    """``yaml.safe_load`` within ``MAX_YAML_BYTES`` and ``MAX_YAML_NODES``. Raises YamlRefused
    for a document over a cap, yaml.YAMLError for one that is not YAML."""
    if len(text.encode()) > MAX_YAML_BYTES:
        raise YamlRefused(f"it is larger than {MAX_YAML_BYTES // 1024} KB")
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expansion(node)
        return loader.construct_document(node)
    except EXHAUSTED as exc:  # 3,000 nested ``[``: refused, as a document over a cap is
        raise YamlRefused(f"it nests too deeply to read ({type(exc).__name__})") from None
    finally:
        loader.dispose()


def _check_expansion(root: yaml.Node) -> None:
    """Count the nodes the document would have with every alias expanded (each shared node
    counted once per reference), without expanding anything."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            size = 1 + sum(sizes[id(child)] for child in _children(node))
            if size > MAX_YAML_NODES:
                raise YamlRefused(f"its aliases expand to more than {MAX_YAML_NODES:,} nodes")
            sizes[key] = size
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise YamlRefused("an alias refers to the node that holds it")
        on_path.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in sizes)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []
