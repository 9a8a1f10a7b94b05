"""Integration tests: one real service or process at a time (sandboxes, the test
server, the gateway, the agent CLIs, Hermes runner pieces, the judge and cause finder
against the server, concurrent writers)."""
