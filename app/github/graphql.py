"""The GraphQL documents the bot sends GitHub (``calls.py`` runs them). The fake GitHub's
schema (``app/sandbox/schema.graphql``) is cut down to exactly these, and
``tests/test_sandbox_graphql.py`` validates each against GitHub's full schema.
"""

from __future__ import annotations

BLOBS_QUERY = """
query Blobs($owner: String!, $name: String!, {params}) {{
  repository(owner: $owner, name: $name) {{
{fields}
  }}
}}
"""


def blobs_query(count: int) -> str:
    """A document reading ``count`` blobs by ``"<sha>:<path>"`` expressions passed as variables
    (never spliced into the query text: paths come from the pull request)."""
    params = ", ".join(f"$e{i}: String!" for i in range(count))
    fields = "\n".join(
        f"    f{i}: object(expression: $e{i}) {{ ... on Blob {{ text isBinary isTruncated byteSize }} }}"
        for i in range(count)
    )
    return BLOBS_QUERY.format(params=params, fields=fields)


# One page of review threads, as both queries below read them (root comment only: its marker).
THREAD_PAGE = """
fragment ThreadPage on PullRequestReviewThreadConnection {
  pageInfo { hasNextPage endCursor }
  nodes {
    id
    isResolved
    path
    line
    comments(first: 1) {
      nodes { databaseId body author { __typename login } }
    }
  }
}
"""

THREADS_QUERY = (
    """
query ReviewThreads($owner: String!, $name: String!, $number: Int!, $after: String) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) {
      reviewThreads(first: 100, after: $after) { ...ThreadPage }
    }
  }
}
"""
    + THREAD_PAGE
)


RESOLVE_THREAD = """
mutation ResolveThread($threadId: ID!) {
  resolveReviewThread(input: {threadId: $threadId}) {
    thread { id isResolved }
  }
}
"""


READINESS_QUERY = (
    """
query Readiness($owner: String!, $name: String!, $number: Int!, $after: String) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) {
      reviewDecision
      reviewThreads(first: 100, after: $after) { ...ThreadPage }
    }
  }
}
"""
    + THREAD_PAGE
)
