"""[llm] What the models that play answers back need of a call beyond what any provider is sent.

The scripted model (xclaw/llm/scripted.py) picks its script and its turn, and a recorded
session's replay (xclaw/ops/replay.py) its recorded answer, from who asks and from the whole
conversation; the real providers never look at it. The agent loop fills one `Playback` per
call (`LLMRequest.playback`), so these fields are not the general request's.
"""

from __future__ import annotations

from dataclasses import dataclass

from xclaw.llm.messages import Message


@dataclass(frozen=True, slots=True)
class Playback:
    # "main" for the session's main agent, otherwise the sub-agent's id (`<parent>/<call id>`):
    # whose script (or recorded answers) to play.
    agent: str = "main"
    # The declared agent that asks (docs/agents.md): a named sub-agent's own script.
    # "default": xclaw's own.
    agent_name: str = "default"
    # The whole conversation before it was trimmed to fit the window (None: the request's
    # `messages` are all of it): turns are counted here, so that a long session whose oldest
    # turns were trimmed does not play its script again.
    history: tuple[Message, ...] | None = None
    # The last message is the runtime's resume note (the run was interrupted: continue, do
    # not repeat), not what a person said: the script's branches skip it.
    resumed: bool = False

    def conversation(self, messages: tuple[Message, ...]) -> tuple[Message, ...]:
        """The whole conversation of a request whose (trimmed) messages are `messages`."""
        return messages if self.history is None else self.history


# A call made outside the agent loop (a test, a tool): the main agent, nothing trimmed.
MAIN = Playback()
