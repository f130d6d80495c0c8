"""advisor: LLM serving configuration advisor."""
