"""A scripted model server: a real loopback HTTP server speaking the OpenAI Chat Completions
and Anthropic Messages protocols, playing back scripts so tests exercise production adapters.
"""

from weft.workers.scripted_model.script import ScriptError, load_script_file
from weft.workers.scripted_model.server import MAX_RECORDS, ScriptedModelServer
from weft.workers.scripted_model.threaded import ThreadedServer, start_in_thread

__all__ = [
    "MAX_RECORDS",
    "ScriptError",
    "ScriptedModelServer",
    "ThreadedServer",
    "load_script_file",
    "start_in_thread",
]
