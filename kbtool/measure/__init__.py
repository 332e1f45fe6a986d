"""Measurements, pure: the bench grid's configurations, the separation rule, tables and the measured ranking.

Below solve/ and bench/ (both use it); no torch, numpy or pydantic import of its own.
"""
