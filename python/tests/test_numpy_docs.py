"""The examples of numpy.einsum's own docstring, run as doctests with numpy.einsum replaced by einstage.einsum:
every printed result (values, dtypes, shapes, scalars) must read exactly as NumPy documents it."""

import doctest

import numpy as np
import pytest

import einstage


def test_numpy_einsum_docstring_examples(monkeypatch):
    docstring = np.einsum.__doc__
    monkeypatch.setattr(np, "einsum", einstage.einsum)
    parser = doctest.DocTestParser()
    test = parser.get_doctest(docstring, {"np": np}, "numpy.einsum", None, 0)
    assert len(test.examples) > 30
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    with np.printoptions(legacy=False):
        result = runner.run(test, out=lambda text: pytest.fail(text))
    assert result.failed == 0 and result.attempted == len(test.examples)
