"""Shared test configuration.

pytester's in-process runs restore ``sys.modules`` afterwards; extension
modules (numpy, scipy) cannot be imported twice in one process, so the heavy
modules the plugin imports lazily are imported once here, up front.
"""

import jinja2  # noqa: F401
import numpy  # noqa: F401
import openai  # noqa: F401
import scipy.stats  # noqa: F401
import yaml  # noqa: F401
