"""Serving many users: identical requests run once, compute slots, load tests."""
