"""
The quick demo's classroom preset tested on ten fresh seed sets (research/preregistrations/quick_demo.md, written before
the runs): how often each verdict holds. The runs are committed in research/runs/quick_demo/ (made with
`python demo.py --seeds=201,...,240 --steps=100 --val_windows=64` from a worktree pinned at the plan's commit).

    python -m research.quick_demo    # the report
"""

import json
import os
import sys

import demo

HERE = os.path.dirname(os.path.abspath(__file__))
COMMITTED = os.path.join(HERE, "runs", "quick_demo")
SETS = [list(range(201 + 4 * i, 205 + 4 * i)) for i in range(10)]  # the plan's ten sets of four fresh seeds
K = demo.QUICK["verdict_evals"]  # the preset's rule: each seed's gap averaged over its last K evaluations


def load(folder=COMMITTED):
    """{(optimizer, arm, seed): run record} of the campaign's runs."""
    runs = {}
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name)) as f:
            r = json.load(f)
        runs[r["optimizer"], r["arm"], r["seed"]] = r
    return runs


def verdicts(runs, seeds, k=K):
    """{optimizer: demo's verdict dict} for one seed set, read with the preset's rule (k=1: the full demo's)."""
    chosen = [runs[o, a, s] for s in seeds for o in ("tiger", "adamw") for a in demo.ARMS]
    return demo.answer(chosen, seeds, ["tiger", "adamw"], k)[1]


def report(runs):
    """(a line per set, the counts): the preset's verdicts on each of the ten sets, and how often each held; the
    last-step rule's beside them (descriptive), and every seed pooled."""
    lines, counts = [], dict(tiger_yes=0, adamw_no=0, both=0, both_last_step=0)
    for seeds in SETS:
        v, last = verdicts(runs, seeds), verdicts(runs, seeds, k=1)
        t, a = v["tiger"], v["adamw"]
        counts["tiger_yes"] += t["word"] == "yes"
        counts["adamw_no"] += a["word"] == "no"
        counts["both"] += (t["word"], a["word"]) == ("yes", "no")
        counts["both_last_step"] += (last["tiger"]["word"], last["adamw"]["word"]) == ("yes", "no")
        lines.append(f"seeds {seeds[0]}-{seeds[-1]}: Tiger {t['word']} {t['mean']:+.2f}, AdamW {a['word']} "
                     f"{a['mean']:+.2f} [{a['ci95'][0]:+.2f}, {a['ci95'][1]:+.2f}] | at the last step: Tiger "
                     f"{last['tiger']['word']}, AdamW {last['adamw']['word']}")
    pooled = verdicts(runs, [s for seeds in SETS for s in seeds])
    lines.append(f"all {sum(map(len, SETS))} seeds pooled: Tiger {pooled['tiger']['mean']:+.2f}, AdamW "
                 f"{pooled['adamw']['mean']:+.2f} [{pooled['adamw']['ci95'][0]:+.2f}, "
                 f"{pooled['adamw']['ci95'][1]:+.2f}]; AdamW's mean below 0 in "
                 f"{sum(verdicts(runs, seeds)['adamw']['mean'] < 0 for seeds in SETS)} of {len(SETS)} sets")
    lines.append(f"of {len(SETS)} sets: Tiger 'yes' in {counts['tiger_yes']}, AdamW 'no' in {counts['adamw_no']}, both "
                 f"in {counts['both']} (the last-step rule: both in {counts['both_last_step']})")
    return lines, counts


if __name__ == "__main__":
    print("\n".join(report(load())[0]))
    sys.exit(0)
