"""The statistics of a verdict: the rule (``verdict.py``) and its generated cells
(``calibrated.py``, written by ``bench/verdict_sim.py --calibrate --write``).

Pure functions of the recorded outcomes: nothing here does I/O or knows pytest.
"""
