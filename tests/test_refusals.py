"""Every parse of what a pull request (or a model) wrote refuses a document built to exhaust the
parser (issue 36, row 4): a refused file, said so, never an analyzer that fails for every file."""

from __future__ import annotations

import base64
import tomllib
from collections.abc import Callable
from typing import Any

import pytest

from app.review.analyzers.secret_tokens import _b64json
from app.review.core.patterns import YamlRefused, load_yaml
from app.review.core.refusals import load_toml
from app.review.llm.schema import extract_json

DEEP = 100_000  # far past any parser's stack


@pytest.mark.parametrize(
    ("parse", "refusal"),
    [
        (lambda: load_yaml("x: " + "[" * 3_000 + "]" * 3_000), YamlRefused),
        (lambda: load_toml("x = " + "[" * DEEP + "]" * DEEP), tomllib.TOMLDecodeError),
        (lambda: extract_json("[" * DEEP + "]" * DEEP + "{}"), None),  # the object after it is read
    ],
    ids=["yaml", "toml", "model-reply"],
)
def test_a_document_nested_to_exhaust_the_parser_is_refused(
    parse: Callable[[], Any], refusal: type[BaseException] | None
) -> None:
    if refusal is None:
        assert parse() == {}
    else:
        with pytest.raises(refusal, match="nests too deeply"):
            parse()


def test_a_token_whose_json_nests_too_deeply_is_no_token() -> None:
    deep = base64.urlsafe_b64encode(b"[" * DEEP + b"]" * DEEP).decode().rstrip("=")
    assert _b64json(deep) is None


def test_ordinary_documents_still_parse() -> None:
    assert load_yaml("x: [1, [2]]") == {"x": [1, [2]]}
    assert load_toml("x = [1, [2]]") == {"x": [1, [2]]}
    assert extract_json('{"a": [1]}') == {"a": [1]}
