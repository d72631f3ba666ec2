"""The Python blocks of docs/python.md run as written (one namespace, in order), so the tutorial cannot drift from
the package."""

import pathlib
import re

import numpy as np

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "python.md"


def test_tutorial_blocks_run():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) >= 3
    namespace = {}
    np.random.seed(36)
    for k, block in enumerate(blocks):
        exec(compile(block, f"docs/python.md python block {k}", "exec"), namespace)
