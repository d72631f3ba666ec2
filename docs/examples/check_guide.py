"""Checks that every snippet the user guide quotes from docs/examples/ is current: each region between two
`// [name]` (or `# [name]`) marker lines of an example, with its common indentation removed, must appear verbatim in
docs/guide.md. Usage: check_guide.py DOCS_DIR. Exit status 1 names each stale snippet."""
import pathlib
import re
import sys
import textwrap

docs = pathlib.Path(sys.argv[1])
guide = (docs / "guide.md").read_text()
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
            if snippet not in guide:
                stale.append(f"{src.name} [{open_name}]")
            open_name = None
        elif open_name is not None:
            lines.append(line)
for s in stale:
    print(f"docs/guide.md does not quote the current snippet {s}")
print(f"{count} snippets, {len(stale)} stale")
sys.exit(1 if stale or count == 0 else 0)
