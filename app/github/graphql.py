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


# Everything a review or a readiness look decides from, in one request: the pull request, its
# reviews, conversation, review threads, the head commit's check runs and statuses, and the
# bot's settings file on the default branch, of the repository and of the owner's ``.github``
# (``defaults``: absent there is a NOT_FOUND error beside the data). Each connection's first
# page; ``pullstate.read_pull_state`` follows any that has more.
PULL_STATE_QUERY = (
    """
query PullState($owner: String!, $name: String!, $number: Int!, $settings: String!) {
  repository(owner: $owner, name: $name) {
    object(expression: $settings) { ... on Blob { text isTruncated } }
    pullRequest(number: $number) {
      number state merged isDraft title body url createdAt updatedAt
      author { __typename login }
      headRefOid baseRefOid baseRefName mergeable mergeStateStatus reviewDecision
      labels(first: 100) { nodes { name } }
      reviewRequests(first: 100) {
        nodes {
          requestedReviewer { __typename ... on User { login } ... on Bot { login } ... on Team { slug } }
        }
      }
      reviews(first: 100) {
        pageInfo { hasNextPage endCursor }
        nodes { databaseId state body submittedAt commit { oid } author { __typename login } }
      }
      comments(first: 100) {
        pageInfo { hasNextPage endCursor }
        nodes { databaseId body createdAt updatedAt author { __typename login } }
      }
      reviewThreads(first: 100) { ...ThreadPage }
      commits(last: 1) {
        nodes {
          commit {
            oid
            status { contexts { context state createdAt } }
            checkSuites(first: 100) {
              pageInfo { hasNextPage endCursor }
              nodes {
                app { slug databaseId }
                checkRuns(first: 100, filterBy: {checkType: LATEST}) {
                  pageInfo { hasNextPage endCursor }
                  nodes { databaseId name status conclusion startedAt completedAt title summary text }
                }
              }
            }
          }
        }
      }
    }
  }
  defaults: repository(owner: $owner, name: ".github") {
    object(expression: $settings) { ... on Blob { text isTruncated } }
  }
}
"""
    + THREAD_PAGE
)
