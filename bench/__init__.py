"""Benchmarks (`make bench`); see docs/benchmarks.md."""
