"""[agent] The agent loop: the conversation's next step, knowing nothing of storage."""
