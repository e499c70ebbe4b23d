"""Deliveries that come in other than through the webhook endpoint, recorded as if they had.

A smee.io channel on a laptop (``proxy``) and the deliveries GitHub failed to make, read back from
the App's delivery log (``recovery``).
"""
