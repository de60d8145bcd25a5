"""Clients of weft: a Python API over Temporal (start, signal, update, query, tail) and the
`weft` CLI."""
