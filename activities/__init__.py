"""Activities: all I/O of weft (model providers, tools, the code sandbox, the store)."""
