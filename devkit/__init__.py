"""Kits the tests and the benchmarks share: service stacks, seeded courses, corpora, the fault
harness, a test LMS, a webhook receiver, notebooks; it imports neither tests nor benchmarks."""
