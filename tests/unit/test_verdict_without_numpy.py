"""The parts of the verdict an xdist worker needs at collection do without numpy
(``stats.verdict.unreachable``: whether a suite's gate can ever decide), and give
exactly what the numpy path gives (README "Benchmarks": a worker paid about 0.35 s
to import numpy for this alone)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from pytest_skillcourt.stats import verdict
from pytest_skillcourt.stats.verdict import (MAX_LATTICE, SuccessEvidence, _lopsided_evidence, _nfold,
                                             bootstrap_tail, success_evidence, unreachable)


@pytest.mark.parametrize("reps", range(0, 8))
def test_the_lopsided_evidence_is_success_evidence_exactly(reps: int) -> None:
    for n in range(1, 61):
        assert _lopsided_evidence(n, reps) == success_evidence([1.0] * n, [max(1, reps)] * n), (n, reps)


def numpy_tail(ev: SuccessEvidence, n: int) -> tuple[float, float]:
    """``bootstrap_tail`` as it was: always the convolution."""
    tot = _nfold(np.asarray(ev.pmf), n)
    mid = n * ev.lattice
    return float(tot[: mid + 1].sum()), float(tot[mid:].sum())


@pytest.mark.parametrize("lattice", [1, 2, 3, 4, 6, 12, 60, MAX_LATTICE])
def test_a_point_mass_tail_is_the_convolutions_exactly(lattice: int) -> None:
    # every index of the short lattices; of the longest (an FFT each: seconds), its ends,
    # its middle and either side of it
    ats = range(2 * lattice + 1) if lattice <= 60 else (0, lattice - 1, lattice, lattice + 1, 2 * lattice)
    for at in ats:
        pmf = [0.0] * (2 * lattice + 1)
        pmf[at] = 1.0
        ev = SuccessEvidence(tuple(pmf), lattice, (at - lattice) / lattice, 0.0, float(lattice), lattice)
        for n in ((1, 2, 3, 5, 8, 13, 40) if lattice <= 60 else (1, 2, 5)):
            ours, theirs = bootstrap_tail(ev, n), numpy_tail(ev, n)
            assert set(ours) <= {0.0, 1.0}
            if lattice <= 12:  # every convolution direct (no product of sizes over 2 million): exact
                assert ours == theirs, (lattice, at, n)
            else:  # long sums take the FFT: its round-off is all that differs, far below any tail
                assert ours == pytest.approx(theirs, abs=1e-12), (lattice, at, n)


def test_any_other_pmf_still_takes_the_convolution() -> None:
    ev = success_evidence([1.0, 0.0, -1.0, 1.0, 0.5, 1.0], [2] * 6)
    assert verdict._point_mass(ev.pmf) is None
    assert bootstrap_tail(ev, 6) == numpy_tail(ev, 6)
    half = SuccessEvidence((0.0, 0.5, 0.5), 1, 0.5, 0.25, 1.0, 1)  # not all mass in one place
    assert verdict._point_mass(half.pmf) is None


def test_every_gate_answer_is_what_the_numpy_evidence_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    shapes = [(n, reps, total) for n in range(0, 45) for reps in range(1, 6) for total in (None, n + 3)]
    ours = {shape: unreachable(shape[0], shape[1], total=shape[2]) for shape in shapes}
    unreachable.cache_clear()
    monkeypatch.setattr(verdict, "_lopsided_evidence",
                        lambda n, reps: success_evidence([1.0] * n, [max(1, reps)] * n))
    try:
        assert {shape: unreachable(shape[0], shape[1], total=shape[2]) for shape in shapes} == ours
    finally:
        unreachable.cache_clear()
    assert any(v is None for v in ours.values()) and any(v for v in ours.values())


def test_asking_a_gate_imports_no_numpy() -> None:
    code = ("import sys; from pytest_skillcourt.stats.verdict import unreachable; "
            "[unreachable(n, r, total=12) for n in range(0, 13) for r in range(1, 6)]; "
            "print('numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "False", out.stderr
