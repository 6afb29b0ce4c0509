"""[acp] xclaw as an Agent Client Protocol agent (`xclaw acp`) for editors (docs/editors.md)."""
