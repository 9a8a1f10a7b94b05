"""Repository-level pytest configuration: pytester drives the end-to-end tests."""

pytest_plugins = ["pytester"]
