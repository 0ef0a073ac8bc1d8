"""Tuning a sweep: search strategies within a budget, pruning and compiling ahead, a cache of results
across runs, the winners spec and the per-shape dispatch table built from it."""
