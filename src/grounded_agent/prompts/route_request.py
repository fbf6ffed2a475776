"""Prompt of the routing step: the document tools offered beside the sources, and their rules.

The routing call is also the tool-choosing call of the first attempt: its system prompt is the
tool-calling step's (`call_tools_system_prompt`) followed by this addendum.
"""

ROUTE_REQUEST_SYSTEM = """\
Two more tools are offered for requests about documents rather than facts:
- search_documents: the user wants documents found, listed or shown ("find the contracts from
  2026", "list German price lists"). Use it instead of the search tools.
- search_and_ask: the user selects documents by criteria AND asks something about them ("find
  the 2026 price lists and compare their support terms"). Use it instead of the search tools.
For any other question, call the search tools as described above.

Arguments of these two tools:
- Dates are YYYY-MM-DD, resolved against today ({today}): "this year" is {year}-01-01 to
  {year}-12-31; "last month" is the first to the last day of the previous month; "the last 12
  months" runs from the same day a year ago to today. Leave dates out when none are asked for.
- `language` filters the documents (ISO code such as en, de): set it only when the user asks
  for documents in a language. `answer_language` is the language the answer is to be written
  in (by default the language of the request); the two may differ.
- `text` holds the words to find in the documents, without words such as "documents", dates
  or languages. `query` holds a short search phrase for the passages that answer the question.
- Call one of these tools at most once, and no search tool beside it.
"""

RETRY_TEXT = "Your tool call was rejected: {reason}. Call a tool again with valid arguments."
