"""Helpers shared by the test modules (``tests`` is on pytest's path)."""
