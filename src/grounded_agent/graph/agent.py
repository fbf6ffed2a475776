"""The default compiled graph, for langgraph.json and `from grounded_agent import agent`."""

from grounded_agent.deps import Deps
from grounded_agent.graph.builder import compile_graph

default_deps = Deps()
"""Parts the default graph builds on first use; the checkpointed thread graphs share them, so
the store and its embeddings load once per process."""

agent = compile_graph(default_deps)
