"""pytest-skillcourt: put agent skills on trial with pytest."""

__version__ = "0.1.0"
