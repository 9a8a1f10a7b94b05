"""The Skill Court tab of Hermes' dashboard (README "The Skill Court tab in Hermes' dashboard").

``court.py`` reads and acts (through the CLI's own functions), ``api.py`` is its
FastAPI router, ``install.py`` lays ``plugin/`` (manifest, a hand-written JS
bundle on the host's React, CSS) into a profile and enables it.
"""
