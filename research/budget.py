"""
Does each class lesson fit the room? `python -m research.budget` prints, for lessons 01-04 as committed: the words a
student reads before "Going deeper" (prose and printout), the largest single printout, the longest code cell, the widest
code line and the full-mode run time the notebook printed at its end, and exits non-zero if a lesson is over budget.

A word is a whitespace-separated token (str.split()) of a markdown cell's source or of a code cell's text output (what it
prints, and the text of a displayed result that is not a figure); code is not counted. A lesson's reading stops at the
first heading that says "Exercises" or "Going deeper", inside its cell: the exercises are homework, and what a cell
holds above that heading is read in class. The printout, cell and line limits hold for every cell, Going
deeper too; the first code cell (the setup) has its own, smaller limit. tests/test_lessons.py holds the first four.
"""
import glob
import os
import re
import sys

import nbformat

WORDS = 1500       # prose and printout before "Going deeper"
PRINTOUT = 100     # words in any one cell's printout
CELL_LINES = 15    # lines of any code cell
SETUP_LINES = 3    # lines of the first code cell
COLUMNS = 100      # characters of any code line
SECONDS = 120      # the full-mode run time on 2 idle cores, as the notebook printed it
LESSONS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lessons")
CLASS_LESSONS = sorted(glob.glob(os.path.join(LESSONS, "0[0-9]_*.ipynb")))  # the class path; the appendices are reports
GOING_DEEPER = re.compile(r"^#+\s.*going deeper", re.IGNORECASE | re.MULTILINE)
HOMEWORK = re.compile(r"^#+\s.*(exercises|going deeper)", re.IGNORECASE | re.MULTILINE)  # where the reading stops
RAN = re.compile(r"this notebook ran in (\d+) s(?! \(FAST)")


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
    """dict(words, printout, cell_lines, setup_lines, columns, seconds, deeper) of one lesson notebook."""
    nb = nbformat.read(path, as_version=4)
    out = dict(words=0, printout=0, cell_lines=0, setup_lines=None, columns=0, seconds=None, deeper=False)
    done = False  # past the exercises' or Going deeper's heading: no longer counted
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            out["deeper"] |= bool(GOING_DEEPER.search(cell.source))
            out["words"] += 0 if done else words(HOMEWORK.split(cell.source, maxsplit=1)[0])
            done |= bool(HOMEWORK.search(cell.source))
            continue
        lines = cell.source.splitlines()
        if out["setup_lines"] is None:
            out["setup_lines"] = len(lines)
        else:
            out["cell_lines"] = max(out["cell_lines"], len(lines))
        out["columns"] = max([out["columns"]] + [len(line) for line in lines])
        text = printout(cell)
        out["words"] += 0 if done else words(text)
        out["printout"] = max(out["printout"], words(text))
        ran = RAN.search(text)
        out["seconds"] = int(ran.group(1)) if ran else out["seconds"]
    return out


LIMITS = dict(words=WORDS, printout=PRINTOUT, cell_lines=CELL_LINES, setup_lines=SETUP_LINES, columns=COLUMNS,
              seconds=SECONDS)


def over(m):
    """The limits a lesson's measures pass (a run time not printed in full mode counts as unmeasured, not over)."""
    return [k for k, limit in LIMITS.items() if m[k] is not None and m[k] > limit] + \
        ([] if m["deeper"] else ["no Going deeper section"])


def report(paths=CLASS_LESSONS):
    """Printable lines and whether every lesson is within every limit."""
    head = "lesson                             words printout  cell setup width  run s"
    lines, ok = [head, f"{'(limits)':33s} {WORDS:6d} {PRINTOUT:8d} {CELL_LINES:5d} {SETUP_LINES:5d} {COLUMNS:5d} "
                       f"{SECONDS:6d}"], True
    for p in paths:
        m = measure(p)
        bad = over(m)
        ok &= not bad
        ran = "-" if m["seconds"] is None else m["seconds"]
        lines.append(f"{os.path.basename(p):33s} {m['words']:6d} {m['printout']:8d} {m['cell_lines']:5d} "
                     f"{m['setup_lines']:5d} {m['columns']:5d} {ran:>6}" + (f"   OVER: {', '.join(bad)}" if bad else ""))
    return lines, ok


if __name__ == "__main__":
    if not CLASS_LESSONS:
        sys.exit(f"no class lessons (0*_*.ipynb) in {LESSONS}")
    lines, ok = report()
    print("\n".join(lines))
    sys.exit(0 if ok else 1)
