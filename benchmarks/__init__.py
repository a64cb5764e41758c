"""Benchmarks (not tests): ``python -m benchmarks [--quick]``. See benchmarks/README.md."""
