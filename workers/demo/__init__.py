"""The demo's definitions and model script (used by `weft demo` and `make demo`)."""
