"""
The rule that marks a verdict FRAGILE (research/preregistrations/appendix_a.md, added after the data and dated there):
the smallest shift of a verdict's paired comparisons that would change it, against twice the measured error of one
paired difference (another validation split's worth). It reads every claim's rule from claims.py and adds none of its
own. Tested in tests/test_appendix_a.py.
"""

import itertools
import math

import numpy as np

from data.prepare import subset_windows
from research.claims import (CORE_FIXES, FRAGILE_EDGE, alike_verdict, control_word, no_gain_row, no_gain_verdict,
                             slowest_verdict)
from research.records import measurement_noise
from research.stats import MARGIN, compare


# ----------------------------------------------------------------------------------------------------
# Fragility: the smallest shift of a verdict's comparisons that changes it, for every verdict (the control's included).
# A comparison shifts as a whole (every seed's difference by the same amount); each may shift by its own amount.

_BARS = (0.0, MARGIN, -MARGIN)  # every threshold a rule reads an interval end against
_ENDS = (("ci95", "95%"), ("ci90", "90%"), ("ci_bonferroni", "Bonferroni"))


def _kind(name, claim):
    """Which rule gave a verdict: 'control' (it has the logn - ortho row), '1', '2' (claims 2 and 3), '4', or 'one' (a
    single comparison's word)."""
    if "slow" in claim:
        return "control"
    return {"1": "1", "2": "2", "3": "2", "4": "4"}.get(name[:1], "one")


def _verdict_of(kind, rows):
    """The verdict the rules give a claim's decided rows (rows of the control: logn - control, control - ortho and
    logn - ortho)."""
    return {"control": lambda: control_word(*rows), "1": lambda: slowest_verdict(rows),
            "2": lambda: alike_verdict(rows), "4": lambda: no_gain_verdict(rows),
            "one": lambda: rows[0]["word"]}[kind]()


def _shift(kind, row, s):
    """A comparison as if every seed's difference were `s` nats larger: its mean and all its intervals move by s."""
    r = dict(row, **compare(np.asarray(row["diffs"], float) + s, k=row.get("k", 1)))
    return no_gain_row(r) if kind == "4" else r


def _state(r):
    """What the verdict rules read from a comparison (two rows in the same state give the same verdicts)."""
    return (r["word"], r["bonferroni"], r["alike"], r.get("no_gain"), r.get("gain"),
            r["ci90"] is not None and r["ci90"][1] < MARGIN)


def _ends(row):
    """[(label, end)] of a comparison's intervals (its Bonferroni interval only where it differs from the 95% one)."""
    return [(label, end) for key, label in _ENDS if key != "ci_bonferroni" or row.get("k", 1) > 1
            for end in (row.get(key) or ())]


def _crossings(row, s):
    """The interval ends that a shift s carries across a bar: [(interval, end, bar)], the last one crossed first."""
    out = [(abs(bar - end), label, end, bar) for label, end in _ends(row) for bar in _BARS
           if s and 0 < (bar - end) / s <= 1]
    return [(label, end, bar) for _, label, end, bar in sorted(out, reverse=True)]


def verdict_flip(name, claim, radius=None, rule=None):
    """The smallest shift that changes claim `name`'s verdict (`claim` one value of all_claims, or dict(verdict,
    rows=[one compare row]) for a single comparison): each comparison the verdict reads may move by its own shift
    (every seed's difference by the same amount, so its mean and intervals move together); the distance is the
    largest of those shifts. `rule`: a verdict's own rule, rows -> verdict, for one that none of this module's gives
    (cause.py's). Returns dict(distance, to, moves=[(row, shift, crossings)]) with the fewest comparisons moved, or
    None when no shift within `radius` (default: any) changes the verdict. PENDING verdicts: None."""
    kind = _kind(name, claim)
    verdict_of = rule or (lambda rows: _verdict_of(kind, rows))
    rows = claim["rows"] + ([claim["slow"]] if kind == "control" else [])
    if claim["verdict"] == "PENDING" or not rows or any(r.get("ci90") is None for r in rows):
        return None
    options = []
    for r in rows:  # per comparison: each state it can reach, with the smallest shift that reaches it
        cuts = sorted({bar - end for _, end in _ends(r) for bar in _BARS} - {0.0}, key=abs)
        best = {_state(r): (0.0, r)}
        for c in cuts:
            if radius is not None and abs(c) > radius:
                break
            s = c + math.copysign(1e-9, c)  # just past the bar
            moved = _shift(kind, r, s)
            best.setdefault(_state(moved), (s, moved))
        options.append(sorted(best.values(), key=lambda x: abs(x[0])))
    # Search by distance, smallest first: at level D every comparison may take the states it reaches within D, and a
    # combination is new at D if one of them moves by exactly D (the smaller ones were searched at a lower level). The
    # first level with a change is the smallest distance; within it the fewest comparisons moved, the first found.
    for level in sorted({abs(s) for opts in options for s, _ in opts}):
        found = None
        for combo in itertools.product(*([o for o in opts if abs(o[0]) <= level] for opts in options)):
            if max(abs(s) for s, _ in combo) < level or (found and sum(s != 0 for s, _ in combo) >= len(found["moves"])):
                continue
            to = verdict_of([m for _, m in combo])
            if to != claim["verdict"]:
                found = dict(distance=level, to=to, moves=[(r, s, _crossings(r, s)) for r, (s, _) in zip(rows, combo) if s])
        if found:
            return found
    return None


def fragile_lines(name, claim, delta, rule=None):
    """The fragility rule applied to one verdict: FRAGILE when a shift of at most `delta` nats in the comparisons
    it reads changes it (verdict_flip, with `rule` where the verdict has its own), else robust; either way the smallest
    shift that would. One line, or None for a PENDING verdict."""
    if claim["verdict"] == "PENDING":
        return None
    bad = [r for r in claim["rows"] + [claim.get("slow") or {}] if r.get("word", "").startswith("invalid")]
    if bad:
        return f"no reading: {bad[0]['a']} - {bad[0]['b']} is {bad[0]['word']}"
    f = verdict_flip(name, claim, rule=rule)
    if f is None:
        return f"robust: no shift of its comparisons changes {claim['verdict']}"
    how = "; ".join(f"{r['a']} - {r['b']} by {s:+.4f} ({c[0][0]} end {c[0][1]:+.4f} past {c[0][2]:+g})"
                    for r, s, c in f["moves"])
    word = "FRAGILE" if f["distance"] <= delta else "robust"
    return (f"{word}: {claim['verdict']} -> {f['to']} with a shift of {f['distance']:.4f} "
            f"{'<=' if word == 'FRAGILE' else '>'} {delta:.4f}: {how}")


# ----------------------------------------------------------------------------------------------------
# Fragility per setting: fragile_lines with delta = twice the measured error of one paired difference

def fragile_delta(by_arm, windows, subset):
    """The rule's delta per statistic for one setting: twice one measured paired difference's error (measurement_error:
    the whole split's for early, best and last, the dense subset's for start), never below FRAGILE_EDGE. The error is
    that of claim 1's and the control's pairs (appendix B's section 2), or, where none of them kept window losses, of
    every pair that did (appendix A's section 2); FRAGILE_EDGE where nothing was measured. Returns ({stat: delta}, a
    phrase saying where it came from)."""
    err, source = measurement_error(by_arm, windows, subset), "claim 1's and the control's pairs"
    if err is None:
        every = list(itertools.combinations(sorted(a for a in by_arm if by_arm[a]), 2))
        err, source = measurement_error(by_arm, windows, subset, pairs=every), "the setting's pairs with window losses"
    edge = FRAGILE_EDGE
    if err is None:
        return {st: edge for st in ("early", "best", "last", "start")}, \
            f"no measured error: FRAGILE_EDGE {edge}"
    delta = {st: max(edge, 2 * err["whole"]) for st in ("early", "best", "last")}
    delta["start"] = max(edge, 2 * err["subset"])
    return delta, (f"twice one measurement's error ({source}, median of {err['n']}): {delta['early']:.4f} (whole "
                   f"split)" + (f", {delta['start']:.4f} (subset)" if subset else ""))


def fragility_lines(verdicts, delta, names):
    """Every verdict of `names` in one setting under the one fragility rule: FRAGILE or robust, with the smallest shift
    of its comparisons that changes it (fragile_lines) against the statistic's delta."""
    out = []
    for claim in names:
        c = verdicts.get(claim)
        line = c and fragile_lines(claim, c, delta[c["stat"]])
        if line:
            out.append(f"  {claim:34} {line}")
    return out


MEASURED_PAIRS = [("logn", f) for f in CORE_FIXES] + [("logn", "control"), ("control", "ortho")]


def measurement_error(by_arm, windows, subset, block=8, pairs=MEASURED_PAIRS):
    """One measured paired difference's error, as precision_lines prints it: for `pairs` (claim 1's and the control's)
    and every seed whose runs kept per-window val losses, the larger of the per-window and blocks-of-`block` standard
    errors, on the whole split and on the dense subset's own windows; the medians over pairs x seeds. dict(whole,
    subset, n), or None when no such pair has window losses."""
    idx = subset_windows(windows, subset)

    def se(ra, rb, keep=None):
        return max(measurement_noise(ra, rb, k, keep) for k in (1, block))

    rows = [(se(by_arm[a][s], by_arm[b][s]), se(by_arm[a][s], by_arm[b][s], idx))
            for a, b in pairs if by_arm.get(a) and by_arm.get(b)
            for s in sorted(set(by_arm[a]) & set(by_arm[b]))
            if "val_windows_last" in by_arm[a][s] and "val_windows_last" in by_arm[b][s]]
    if not rows:
        return None
    whole, sub = (float(np.median(col)) for col in zip(*rows))
    return dict(whole=whole, subset=sub, n=len(rows))
