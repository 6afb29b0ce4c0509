"""xclaw without async, as in a notebook or a plain script: `xclaw.open_sync`.

    python examples/notebook.py [DATABASE] [MODEL]

Each cell of a notebook can hold one of the blocks below; the agent runs on an event loop
of its own (a notebook's own loop is left alone), and Ctrl+C (interrupting the cell)
cancels the run in flight.
"""

from __future__ import annotations

import sys
from pathlib import Path

import xclaw

HERE = Path(__file__).resolve().parent
database = sys.argv[1] if len(sys.argv) > 1 else "notes.db"
model = sys.argv[2] if len(sys.argv) > 2 else f"script:{HERE / 'scripts' / 'notes.json'}"

# cell 1: open the agent (close it in the last cell, or use `with`)
agent = xclaw.open_sync(db=database, model=model, approval="ask")

# cell 2: a session; its events as they come, approving each call
session = agent.new_session(title="notebook notes")
for event in session.send("prepare the release notes"):
    if event.type == "approval_request":
        session.approve(event.step_id, True)
    elif event.type == "reply":
        print("reply:", event.content)

# cell 3: what happened, from the record
for step in session.steps():
    print(step.id, step.type, step.name, step.status)
print(session.usage())

# cell 4: a whole run in one call, approvals answered by a rule
branch = session.fork("s0002", title="shorter")
result = branch.run("make it shorter", approve=lambda request: request.name == "shell")
print(result.reply)

# cell 5: sessions so far
for info in agent.search("notes"):
    print(info.session_id, info.state_text, info.title)

agent.close()
