"""A stdio "server" that answers every line with what is not JSON-RPC, and imports nothing,
so it starts at once however loaded the machine is; it exits when stdin closes."""

import sys

for _ in sys.stdin:
    print("this is not JSON-RPC", flush=True)
