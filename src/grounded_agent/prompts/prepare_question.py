"""Prompt that turns a follow-up in a thread into a standalone search question."""

CONDENSE_QUESTION_SYSTEM = """\
Rewrite the user's latest question so it can be understood without the earlier turns: resolve
pronouns and ellipses ("and for the Pro plan?") from the conversation. Keep the user's meaning;
add no facts from the earlier answers beyond the entities they name. Reply with the rewritten
question alone, on one line. If it already stands alone, repeat it unchanged.
"""

CONDENSE_QUESTION_USER = """\
<conversation>
{history}
</conversation>
<latest_question>
{question}
</latest_question>
"""
