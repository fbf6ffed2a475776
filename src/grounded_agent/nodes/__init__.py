"""Graph nodes, one per module; each module, function and node share one name."""
