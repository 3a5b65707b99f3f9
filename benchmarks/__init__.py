"""Benchmarks: each prints its figure as a ratio to a floor measured in the same run."""
