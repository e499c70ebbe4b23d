"""The engine's execution boundary: where pull-request content is evaluated.

Everything that evaluates what a pull request carries (its configuration files, the patterns in
them, ruff, every analyzer) runs as a *job* in a small pool of long-lived child processes
(``pool.ProcessPool``), never in the serving process: each child has a scrubbed environment, a
private temporary directory as its whole world, resource limits and a wall-clock deadline after
which its process group is killed and it is replaced. A limit that trips is an answer
(``limits.Tripped``), which the engine reports in the review; it is never retried.

``limits`` holds the vocabulary; ``pool`` the serving side, and ``process`` its handle on one child;
``child`` the child's side, and ``confine`` what a child may see.
"""
