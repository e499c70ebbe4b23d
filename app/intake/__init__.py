"""Deliveries on their way in, besides the webhook endpoint (``web``): the bounded listening
socket (``listener``), a smee.io channel on a laptop (``proxy``), missed deliveries from the App's
delivery log (``recovery``), and the queue key of a delivery (``subjects``).
"""
