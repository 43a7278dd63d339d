"""Benchmarks: each prints figures as ratios against a baseline measured in the same run."""
