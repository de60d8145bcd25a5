"""The types that cross the Temporal boundary: workflow input, signals, updates, queries,
activity inputs and results, events and definitions.

Pure data only (pydantic and the standard library), so workflows, activities, workers and
clients can all import it without breaking the workflow sandbox's determinism.
"""
