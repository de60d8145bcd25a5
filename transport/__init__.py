"""How a process reaches Temporal: the connection and weft's data converter / payload codec.

Shared by the client library, the workers and the CLI; it imports none of them.
"""
