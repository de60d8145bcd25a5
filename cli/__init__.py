"""The `weft` command line: the one place that composes the client library and the workers."""
