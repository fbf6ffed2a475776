"""Prompt of the one query rewrite the agent may make."""

REFORMULATE_QUERY_SYSTEM = """\
The first search for a question found nothing usable. Rewrite the question as one search query
that is simpler and broader: plain words instead of jargon, the key entities and terms kept,
no dates or qualifiers that are not essential. Reply with the query alone, on one line.
"""

REFORMULATE_QUERY_USER = """\
<question>
{question}
</question>
<tried_queries>
{queries}
</tried_queries>
"""
