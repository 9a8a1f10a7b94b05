"""The statistics of a verdict: the rule (``verdict.py``), its generated cells
(``calibrated.py``, written by ``bench/verdict_sim.py --calibrate --write``) and the
Student t quantile it needs (``student_t.py``, pure Python: no scipy at runtime).

Pure functions of the recorded outcomes: nothing here does I/O or knows pytest.
"""
