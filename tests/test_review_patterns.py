"""Pull-request patterns, YAML and configuration paths, bounded (app/review/core/patterns.py and
``ruffinputs``): table-driven, pure."""

from __future__ import annotations

import pytest

from app.review.core.lintconfig import lint_config, ruff_glob_match
from app.review.core.model import FileContent
from app.review.core.patterns import YamlRefused, compile_regex, load_yaml, strip_verbose
from app.review.core.ruffinputs import ruff_inputs


@pytest.mark.parametrize(
    ("pattern", "verbose", "subject", "found"),
    [
        ("^(a+)+b", False, "a" * 40, False),  # RE2: linear, no blow-up
        ("^(a+)+b", False, "a" * 40 + "b", True),
        ("^gen/", False, "gen/x.py", True),
        (r"(?<!x)\.py$", False, "a.py", True),  # look-behind: Python's re, inside the boundary
        ("(a", False, "a", None),  # neither engine accepts it: no pattern
        ("(\n  a/ # the a tree\n  | b/\n)", True, "b/x.py", True),
        ("x" * 5000, False, "x" * 5000, None),  # too long to be a path filter
    ],
)
def test_regexes_run_on_re2_else_bounded_re(
    pattern: str, verbose: bool, subject: str, found: bool | None
) -> None:
    matcher = compile_regex(pattern, verbose=verbose)
    assert (None if matcher is None else matcher(subject)) == found


def test_verbose_layout_is_stripped_outside_classes_and_escapes() -> None:
    assert strip_verbose("a b # c\n[ x]\\ y") == "ab[ x]\\ y"


@pytest.mark.parametrize(
    ("pattern", "path", "excluded"),
    [
        ("**/**/**/**/**/**/**/**/gen", "src/gen/x.py", True),  # nested ** collapse: linear
        ("**/**/**/**/**/**/**/**/gen", "a/" * 30 + "x.py", False),
        ("build", "pkg/build/m.py", True),
        ("/docs/*.py", "docs/a.py", True),
    ],
)
def test_ruff_globs_are_bounded(pattern: str, path: str, excluded: bool) -> None:
    assert ruff_glob_match(pattern, path) is excluded


def bomb(levels: int) -> str:
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for level in range(1, levels + 1):
        lines.append(f"a{level}: &a{level} [{', '.join([f'*a{level - 1}'] * 9)}]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("text", "refusal"),
    [
        (bomb(9), "its aliases expand to more than 100,000 nodes"),
        ("&a [*a]", "an alias refers to the node that holds it"),
        ("x: " + "y" * (300 * 1024), "it is larger than 256 KB"),
        (bomb(3), None),  # 9**4 nodes: within the cap
    ],
)
def test_yaml_has_a_size_and_an_alias_expansion_cap(text: str, refusal: str | None) -> None:
    if refusal is None:
        assert isinstance(load_yaml(text), dict)
        return
    with pytest.raises(YamlRefused) as raised:
        load_yaml(text)
    assert str(raised.value) == refusal


def contents(files: dict[str, str]) -> dict[str, FileContent | None]:
    return {path: FileContent(text, len(text)) for path, text in files.items()}


OUTSIDE = "does not name a configuration file inside the repository; it was dropped"


@pytest.mark.parametrize(
    ("files", "config", "setting", "kept", "note"),
    [
        (
            {"ruff.toml": 'extend = "/proc/self/environ"\n'},
            "ruff.toml",
            "extend",
            None,
            f"`ruff.toml`: the ruff setting `extend` {OUTSIDE}",
        ),
        (
            {"ruff.toml": 'extend = "/dev/zero"\n'},
            "ruff.toml",
            "extend",
            None,
            f"`ruff.toml`: the ruff setting `extend` {OUTSIDE}",
        ),
        (
            {"ruff.toml": 'extend = "~/.config/x.toml"\n'},
            "ruff.toml",
            "extend",
            None,
            f"`ruff.toml`: the ruff setting `extend` {OUTSIDE}",
        ),
        (
            {"a/ruff.toml": 'extend = "../../etc/x.toml"\n'},
            "a/ruff.toml",
            "extend",
            None,
            f"`a/ruff.toml`: the ruff setting `extend` {OUTSIDE}",
        ),
        (
            {"a/ruff.toml": 'extend = "dev/zero"\n'},
            "a/ruff.toml",
            "extend",
            None,
            f"`a/ruff.toml`: the ruff setting `extend` {OUTSIDE}",
        ),
        (
            {"a/ruff.toml": 'extend = "../base.toml"\n', "base.toml": "line-length = 99\n"},
            "a/ruff.toml",
            "extend",
            "../base.toml",
            None,
        ),
        (
            {"ruff.toml": 'src = ["src", "/etc", "../x"]\n'},
            "ruff.toml",
            "src",
            ["src"],
            "`ruff.toml`: the ruff setting `src` names a path outside the repository; it was dropped",
        ),
        (
            {"ruff.toml": 'cache-dir = "/tmp/c"\n'},
            "ruff.toml",
            "cache-dir",
            None,
            "`ruff.toml`: the ruff setting `cache-dir` is not used by revbot; it was dropped",
        ),
        (
            {"pyproject.toml": '[tool.ruff]\noutput-file = "/etc/passwd"\n'},
            "pyproject.toml",
            "output-file",
            None,
            "`pyproject.toml`: the ruff setting `output-file` is not used by revbot; it was dropped",
        ),
    ],
)
def test_ruff_path_settings_stay_inside_the_repository(
    files: dict[str, str], config: str, setting: str, kept: object, note: str | None
) -> None:
    read = contents(files)
    inputs, notes = ruff_inputs(lint_config(read), read)
    [written] = [i for i in inputs if i.path == config]
    assert written.settings is not None and written.settings.get(setting) == kept
    assert notes == ([] if note is None else [note])
    assert "/proc" not in written.text and "/dev/zero" not in written.text


def test_ruff_reads_only_its_table_and_requires_python_from_a_pyproject() -> None:
    text = (
        '[project]\nname = "x"\nrequires-python = ">=3.9"\n'
        "[tool.ruff]\nline-length = 80\n[tool.other]\nk = 1\n"
    )
    read = contents({"pyproject.toml": text})
    [written], _ = ruff_inputs(lint_config(read), read)
    assert written.text == '[project]\nrequires-python = ">=3.9"\n\n[tool.ruff]\nline-length = 80\n'
