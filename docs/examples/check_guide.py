"""Checks that the user guide's code is the code ctest runs: each region between two `// [name]` (or `# [name]`)
marker lines of a docs/examples/ program, with its common indentation removed, must appear verbatim in
docs/guide.md or another page of docs/ (docs/linalg.md quotes 07_linalg.cpp), and every line of every ```cpp / ```sh block of the guide must be a line of some example program.
Usage: check_guide.py DOCS_DIR. Exit status 1 names each stale snippet or foreign line."""
import pathlib
import re
import sys
import textwrap

docs = pathlib.Path(sys.argv[1])
guide = (docs / "guide.md").read_text()
pages = "\n".join(page.read_text() for page in sorted(docs.glob("*.md")))
marker = re.compile(r"^\s*(//|#) \[([a-z0-9-]+)\]\s*$")
stale = []
count = 0
for src in sorted((docs / "examples").glob("0*")):
    open_name, lines = None, []
    for line in src.read_text().splitlines():
        m = marker.match(line)
        if m and open_name is None:
            open_name, lines = m.group(2), []
        elif m and m.group(2) == open_name:
            count += 1
            snippet = textwrap.dedent("\n".join(lines)).strip("\n")
            if snippet not in pages:
                stale.append(f"{src.name} [{open_name}]")
            open_name = None
        elif open_name is not None:
            lines.append(line)
example_lines = set()
for src in (docs / "examples").glob("0*"):
    example_lines.update(line.strip() for line in src.read_text().splitlines())
for block in re.findall(r"```(?:cpp|sh)\n(.*?)```", guide, re.S):
    for line in block.splitlines():
        if line.strip() and line.strip() not in example_lines:
            stale.append(f"(guide line not in any example) {line.strip()}")
for s in stale:
    print(f"docs/guide.md is out of date: {s}")
print(f"{count} snippets, {len(stale)} stale")
sys.exit(1 if stale or count == 0 else 0)
