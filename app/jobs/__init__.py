"""The job system: take jobs from the queue and run each to an outcome.

The ``worker`` claims jobs and runs each (``runner``: flatten, guard, route to the handlers
through ``routing``, record the outcome); durable ``timers``; ``pacing`` (requests before jobs,
backoff); bounded background ``tasks``.
"""
