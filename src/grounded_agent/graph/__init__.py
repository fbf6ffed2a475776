"""Graph wiring (builder) and pure routing functions."""
