"""[recorder] The glass: the loop's events as steps, written ahead; steps back as messages."""
