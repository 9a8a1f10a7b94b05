"""Unit tests: pure functions on plain values and files; no pytester, no server, no
sandbox, no subprocess."""
