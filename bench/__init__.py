"""Benchmarks that write markdown reports under bench/out/."""
