"""End-to-end tests: pytester sessions of the whole plugin, the CLI on a session's
results, the demo trial, the Hermes plugin in real Hermes, the page in a browser."""
