"""[llm] The models: the Model seam, the providers, retries and the chain, messages."""
