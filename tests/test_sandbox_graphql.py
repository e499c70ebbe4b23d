"""The fake's GraphQL schema is GitHub's, cut down to what the bot sends, and keeps GitHub's rules.

The end-to-end GraphQL behaviour (pagination, ``Bot`` vs ``User`` authors, ``resolveReviewThread``
and its webhooks, blobs by alias, NOT_FOUND) is tested over HTTP in ``test_sandbox.py``.
"""

from __future__ import annotations

import graphql
import pytest

from app.github import calls as github
from app.github import graphql as github_graphql
from app.sandbox import FakeGitHub, gql
from tests.conformance import graphql_schema, validate_graphql

BOT_DOCUMENTS = {
    "Blobs (one file)": github_graphql.blobs_query(1),
    "Blobs (a full batch)": github_graphql.blobs_query(github.BLOB_BATCH),
    "ReviewThreads": github_graphql.THREADS_QUERY,
    "ResolveThread": github_graphql.RESOLVE_THREAD,
    "Readiness": github_graphql.READINESS_QUERY,
    "PullState": github_graphql.PULL_STATE_QUERY,
}


@pytest.mark.slow
@pytest.mark.parametrize("document", BOT_DOCUMENTS.values(), ids=BOT_DOCUMENTS.keys())
def test_the_fake_serves_every_document_the_bot_sends(document: str) -> None:
    assert validate_graphql(document) == []
    assert graphql.validate(gql.schema(), graphql.parse(document)) == []


COMPOSITE = (graphql.GraphQLObjectType, graphql.GraphQLInterfaceType, graphql.GraphQLInputObjectType)


def test_the_schema_is_githubs_cut_down() -> None:
    """Every type, field, argument and interface of the fake's schema is GitHub's, unedited."""
    full = graphql_schema()
    fields = 0
    for name, ours in gql.schema().type_map.items():
        if name.startswith("__") or graphql.is_specified_scalar_type(ours):
            continue
        theirs = full.get_type(name)
        if isinstance(ours, graphql.GraphQLEnumType):
            assert isinstance(theirs, graphql.GraphQLEnumType), name
            assert theirs.description == ours.description, name
            for value_name, value in ours.values.items():
                assert value.description == theirs.values[value_name].description, f"{name}.{value_name}"
            continue
        if isinstance(ours, graphql.GraphQLScalarType | graphql.GraphQLUnionType):
            assert type(theirs) is type(ours) and theirs.description == ours.description, name
            if isinstance(ours, graphql.GraphQLUnionType):
                assert isinstance(theirs, graphql.GraphQLUnionType)
                assert {t.name for t in ours.types} <= {t.name for t in theirs.types}, name
            continue
        assert isinstance(ours, COMPOSITE) and type(theirs) is type(ours), name
        assert isinstance(theirs, COMPOSITE) and theirs.description == ours.description, name
        if not isinstance(ours, graphql.GraphQLInputObjectType):
            assert not isinstance(theirs, graphql.GraphQLInputObjectType)
            assert {i.name for i in ours.interfaces} <= {i.name for i in theirs.interfaces}, name
        for field_name, field in ours.fields.items():
            original = theirs.fields[field_name]
            where = f"{name}.{field_name}"
            assert (str(field.type), field.description) == (str(original.type), original.description), where
            for arg_name, arg in getattr(field, "args", {}).items():
                assert str(arg.type) == str(original.args[arg_name].type), f"{where}({arg_name})"
            fields += 1
    assert fields >= 20


@pytest.fixture(scope="module")
def executor() -> gql.Executor:
    """The fake's executor over a world with one pull request (no server: nothing here is HTTP)."""
    fake = FakeGitHub(app_id=1, app_slug="revbot-test", webhook_secret="s")
    fake.add_installation(7, "octo")
    fake.add_repo("octo/repo", installation_id=7)
    fake.set_branch("octo/repo", "main", fake.add_commit("octo/repo", {"a.py": "a = 1\n"}))
    fake.set_branch("octo/repo", "feat", fake.add_commit("octo/repo", {"a.py": "a = 2\n"}))
    fake.open_pull("octo/repo", head="feat", author="alice", title="t")
    return gql.Executor(
        fake.world, fake.actions, installation_id=7, actor=fake.bot_login, emit=lambda *_: None
    )


PAGE = """query($after: String) {
  repository(owner: "octo", name: "repo") { pullRequest(number: 1) { reviewThreads(%s) { nodes { id } } } }
}"""
MISSING = "You must provide a `first` or `last` value to properly paginate the `reviewThreads` connection."
TOO_MANY = (
    "Requesting 101 records on the `reviewThreads` connection exceeds the `first` limit of 100 records."
)
BAD_CURSOR = "`bogus` does not appear to be a valid cursor."


@pytest.mark.slow
@pytest.mark.parametrize(
    ("arguments", "after", "kind", "message"),
    [
        ("after: $after", None, "INVALID_ARGUMENTS", MISSING),
        ("first: 101, after: $after", None, "INVALID_ARGUMENTS", TOO_MANY),
        ("first: 1, after: $after", "bogus", "INVALID_CURSOR_ARGUMENTS", BAD_CURSOR),
    ],
)
def test_connections_keep_githubs_pagination_rules(
    executor: gql.Executor, arguments: str, after: str | None, kind: str, message: str
) -> None:
    query, variables = PAGE % arguments, {"after": after}
    assert validate_graphql(query, variables) == []
    outcome = executor.run(query, variables, None)
    assert outcome.problems == []
    # the connection is non-null, so its error nulls the pull request, as on GitHub
    assert outcome.body["data"] == {"repository": {"pullRequest": None}}
    (error,) = outcome.body["errors"]
    path = ["repository", "pullRequest", "reviewThreads"]
    assert (error["type"], error["message"], error["path"]) == (kind, message, path)
