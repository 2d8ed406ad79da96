"""Evaluation on held-out benchmarks; see ``spadework.evaluate.run``."""
