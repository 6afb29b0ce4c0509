"""[tools] The tools the agent calls, their traits, effects and approval policy."""
