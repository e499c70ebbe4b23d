"""The job system: the ``worker`` claims jobs from the queue and runs each (``runner``: flatten,
guard, route to the handlers through ``routing``, record the outcome), durable ``timers``,
fairness between installations (``tenancy``), ``pacing`` and backoff, bounded background
``tasks``, and periodic ``housekeeping``.
"""
