"""
How long is each class lesson to read? `python -m research.budget` prints, for lessons 01-04, the words a student
reads before the lesson's "Going deeper" section and the longest single printout, and exits non-zero if a lesson
is over its budget.

What counts as a word, simply: a whitespace-separated token (str.split()) of
    - a markdown cell's source (prose, headings, tables and maths alike: `$d\\sigma$` is one word), and
    - a code cell's text outputs: what it prints (stdout/stderr) and the text of a displayed result, unless that
      result is a figure (a figure's "<Figure size ...>" placeholder is not read).
Code is not counted: a student runs it, and reads what it prints. A lesson's reading stops at the first markdown
cell whose heading says "Going deeper" (the optional end section); the whole lesson counts if it has none.
One printout is everything a single code cell prints; the printout limit holds for every cell, Going deeper too.

The budgets (issue 30, two 90-minute classes for lessons 01-04):
    WORDS     words of prose and printed output together before "Going deeper"
    PRINTOUT  words in any single cell's printout
"""
import glob
import os
import re
import sys

import nbformat

WORDS = 3000
PRINTOUT = 150
LESSONS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lessons")
CLASS_LESSONS = sorted(glob.glob(os.path.join(LESSONS, "0[0-9]_*.ipynb")))  # the class path; the appendices are reports
GOING_DEEPER = re.compile(r"^#+\s.*going deeper", re.IGNORECASE | re.MULTILINE)


def words(text):
    return len(text.split())


def printout(cell):
    """Everything one code cell printed or displayed as text (figures left out)."""
    parts = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            parts.append(o.get("text", ""))
        elif o.get("output_type") in ("execute_result", "display_data") and "image/png" not in o.get("data", {}):
            parts.append(o.get("data", {}).get("text/plain", ""))
    return "".join(parts)


def measure(path):
    """(words before Going deeper, (largest printout's words, its cell index), has a Going deeper section)."""
    nb = nbformat.read(path, as_version=4)
    total, largest, deeper = 0, (0, None), False
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown" and GOING_DEEPER.search(cell.source):
            deeper = True
        if cell.cell_type == "markdown" and not deeper:
            total += words(cell.source)
        if cell.cell_type == "code":
            w = words(printout(cell))
            total += 0 if deeper else w
            largest = max(largest, (w, i), key=lambda t: t[0])
    return total, largest, deeper


def report(paths=CLASS_LESSONS):
    """Printable lines and whether every lesson is within both budgets."""
    lines, ok = [f"{'lesson':34s} {'words':>6s} (<= {WORDS})  {'largest printout':>16s} (<= {PRINTOUT})"], True
    for p in paths:
        total, (big, cell), deeper = measure(p)
        within = total <= WORDS and big <= PRINTOUT
        ok &= within
        lines.append(f"{os.path.basename(p):34s} {total:6d}           {big:10d} (cell {cell})"
                     + ("" if deeper else "   [no Going deeper section]") + ("" if within else "   OVER BUDGET"))
    return lines, ok


if __name__ == "__main__":
    if not CLASS_LESSONS:
        sys.exit(f"no class lessons (0*_*.ipynb) in {LESSONS}")
    lines, ok = report()
    print("\n".join(lines))
    sys.exit(0 if ok else 1)
