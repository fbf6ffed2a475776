"""Test support that runs outside the installed package (servers and doubles used by the tests)."""
