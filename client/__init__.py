"""Clients of weft: a Python API over Temporal (start, signal, update, query, tail).

The `weft` command line that drives it lives in `cli/`."""
