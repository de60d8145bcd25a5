"""Applying ThreadState's transcript and env edits: `inject_message`, `delete_message`, `set_env`.

The activity did what it could on its side (a deletion and an env value are in the store
already); the workflow keeps its own state in step: it places an injected message (it owns
positions), forgets deleted ids, and keeps a set env value in its view of env. None of
these starts a turn.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from weft.contract.activities import Intent
from weft.contract.messages import Side
from weft.contract.thread import Counters, ThreadStartInput
from weft.contract.transcript_edits import DeletedMessages, EnvSet, InjectedMessage
from weft.workflows.control import parse_single
from weft.workflows.control_plane import refused_after_terminate
from weft.workflows.open_calls import OpenCalls
from weft.workflows.views import Terminated, Transcript


class EditsView(Terminated, Transcript, Protocol):
    """What the transcript and env edits read and change of the thread."""

    @property
    def active_turn(self) -> str | None: ...

    @property
    def start(self) -> ThreadStartInput: ...  # its env: the thread's own layer

    @property
    def counters(self) -> Counters: ...

    @property
    def open_calls(self) -> OpenCalls: ...

    def forget_message(self, message_id: str) -> None: ...


class TranscriptEdits:
    """The workflow's side of the transcript and env intents (registered with the control
    plane through `handle_intents`)."""

    def __init__(self, mem: EditsView) -> None:
        self._mem = mem

    def intent_handlers(self) -> dict[str, Callable[[Intent], None]]:
        """The handlers `ControlPlane.handle_intents` takes, by intent kind."""
        return {
            "inject_message": self.inject,
            "messages_deleted": self.forget,
            "set_env": self.set_env,
        }

    def inject(self, intent: Intent) -> None:
        """Place an injected message at the next position, once the step's open tool calls
        have their results; it rides on the next write to the store.

        While a turn runs, the next activity writes it; while the thread is idle (an
        effect injected it), the idle loop's flush does.
        """
        message = parse_single("inject_message intent", [intent.data], InjectedMessage)
        if refused_after_terminate(self._mem, "inject_message intent"):
            return
        self._mem.open_calls.after_answers(lambda: self._place(message))

    def _place(self, request: InjectedMessage) -> None:
        mem = self._mem
        message = mem.new_message(
            role=request.role,
            content=request.content,
            side=_side_of(request.role),
            turn_id=mem.active_turn,
            message_id=request.message_id,
            attachments=request.attachments,
            silent=request.silent,
            metadata=request.metadata,
        )
        mem.outbox_messages.append(message)
        # The Agent Runtime has no message events: a stored message is an artifact.
        mem.emit(
            "artifact.changed",
            {
                "change": "message.injected",
                "messageId": message.id,
                "role": message.role,
                "position": message.position,
            },
            turn_id=mem.active_turn,
        )

    def forget(self, intent: Intent) -> None:
        """Drop messages a tool deleted from the store from the thread's index."""
        deleted = parse_single("messages_deleted intent", [intent.data], DeletedMessages)
        for message_id in deleted.ids:
            self._mem.forget_message(message_id)

    def set_env(self, intent: Intent) -> None:
        """Keep a thread env value a tool set in the workflow's view of env.

        `mem.start.env` is the thread's own layer of env as the workflow reads it
        (`ActiveAgent.env`: what subagents receive). The start input is carried into the
        next run when the thread continues as new, and a payload carrying env is encrypted
        by the codec, so the value stays out of plaintext history there too.
        """
        # Counted first: the row has changed even if the intent does not parse. Tool calls
        # carry the count, so a worker's copy of the row read before is not used again.
        self._mem.counters.env_writes += 1
        update = parse_single("set_env intent", [intent.data], EnvSet)
        for name, entry in update.env.items():
            self._mem.start.env[name] = entry.model_dump(mode="json")


def _side_of(role: str) -> Side | None:
    # As a queued message: an assistant message speaks for side A; user and system
    # messages belong to no side, and every side sees them as what they are.
    return "a" if role == "assistant" else None
