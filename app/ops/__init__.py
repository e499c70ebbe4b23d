"""Operators' commands: ``doctor`` (is this deployment healthy?) and ``setup`` (register the App
from its manifest and write ``.env``).
"""
