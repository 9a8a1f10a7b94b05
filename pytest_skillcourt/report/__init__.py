"""Reports of a trial: terminal section, JSON, markdown step summary."""
