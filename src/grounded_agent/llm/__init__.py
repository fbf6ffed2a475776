"""The chat model's plumbing: the one budgeted way to call it (calls), structured output with
fallbacks for every kind of server (structured), and the model's support judgement of a draft's
sentences (support_judge)."""
