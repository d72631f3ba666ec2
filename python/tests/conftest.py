"""pytest configuration for the einstage Python package's tests: NumPy's einsum tests that einstage does not pass,
each with the reason (docs/python.md repeats this list)."""

import pytest

# test id (relative to test_numpy_suite.py) -> why einstage differs from NumPy there
_REFUSED = ("einstage refuses {} with a TypeError naming the dtype: it computes in float32, float64, complex64, "
            "complex128 and int64 (and bool and the other integers through int64), and rounding through another "
            "type would give values that differ from NumPy's")
_ORDER_K = ("order='K' with Fortran-ordered operands: NumPy returns the layout its internal transposes happen to "
            "give (neither C- nor F-contiguous); einstage writes the result directly in F order for F-ordered "
            "operands and C order otherwise (order='C', 'F' and 'A' agree with NumPy)")
KNOWN_DIFFERENCES = {
    "TestEinsum::test_einsum_sums_float16": _REFUSED.format("float16"),
    "TestEinsum::test_einsum_sums_longdouble": _REFUSED.format("longdouble (float128)"),
    "TestEinsum::test_einsum_sums_clongdouble": _REFUSED.format("clongdouble (complex256)"),
    "TestEinsum::test_different_paths[e]": _REFUSED.format("float16"),
    "TestEinsum::test_different_paths[g]": _REFUSED.format("longdouble (float128)"),
    "TestEinsum::test_different_paths[G]": _REFUSED.format("clongdouble (complex256)"),
    "TestEinsum::test_output_order": _ORDER_K,
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if not item.nodeid.split("::")[0].endswith("test_numpy_suite.py"):
            continue
        key = "::".join(item.nodeid.split("::")[1:])
        if key in KNOWN_DIFFERENCES:
            item.add_marker(pytest.mark.xfail(reason=KNOWN_DIFFERENCES[key], strict=True))
