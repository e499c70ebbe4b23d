"""What keeps a deployment running besides the reviews.

The operators' commands ``doctor`` (is it healthy?) and ``setup`` (register the App from its
manifest, write ``.env``), and the periodic ``housekeeping`` every bot process does (recover missed
deliveries, empty old payloads, forget old model answers).
"""
