"""NumPy's own einsum tests (numpy/core/tests/test_einsum.py, shipped by python3-numpy) with numpy.einsum replaced
by einstage.einsum.

Every upstream test is collected here under the same name; the ones einstage does not pass are marked xfail
(strict: a test that starts passing fails the run, so the list stays true) in conftest.py's KNOWN_DIFFERENCES with
the reason, and docs/python.md lists them. numpy.einsum_path stays NumPy's (the tests compare its paths with NumPy's
own expectations); einsum calls with an explicit path or optimize= go to einstage.
"""

import numpy as np
import pytest

import einstage

upstream = pytest.importorskip("numpy.core.tests.test_einsum")


@pytest.fixture(autouse=True)
def einsum_is_einstage(monkeypatch):
    monkeypatch.setattr(np, "einsum", einstage.einsum)


class TestEinsum(upstream.TestEinsum):
    pass


class TestEinsumPath(upstream.TestEinsumPath):
    pass


def test_overlap():
    upstream.test_overlap()


def test_the_replacement_is_in_place():
    assert np.einsum is einstage.einsum
