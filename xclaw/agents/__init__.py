"""[agents] Declared agents (docs/agents.md): what an agent is made of — its instructions, the tools
it is offered, its model and settings, its structured output, its sub-agents and hooks — as
a value (`definition.py`), declared in Python (`xclaw.Agent(...)`) or in xclaw.yaml's
`agents:` (`settings.py`), found by name (`catalog.py`).

Not to be confused with `xclaw/agent/`, the loop that runs one: the runtime turns a
definition into what the loop is given (xclaw/runtime/agent_setup.py) and records which
definition each session runs (xclaw/runtime/agent_choice.py).
"""
