"""The default compiled graph, for langgraph.json and `from grounded_agent import agent`."""

from grounded_agent.graph.builder import build_graph

agent = build_graph()
