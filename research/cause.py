"""
Why the optimizer's configuration decides (appendix B section 11, issue 33): the cause campaign's verdicts and report, from runs that
change one thing each (reproduce.py's 'cause' plan, research/plans.py). Its plan, the predictions of each hypothesis
and the verdict rules were fixed before any of its runs: research/preregistrations/cause.md.
"""

import math
import os

import numpy as np

from research.claims import control_verdict, two_way
from research.fragility import fragile_lines, verdict_flip
from research.plans import CAUSE_SEEDS as SEEDS, CAUSE_STEPS as STEPS, plan, twin_lrs
from research.records import HERE, by_arm, load_runs, logged, mean_over, paired, run_id, start
from research.stats import compare

R_TOLERANCE = 1e-3  # check R, nats
# The commit that wrote the pre-registration and the plan (recorded in the next commit: a commit can't name itself). The
# campaign runs from a worktree pinned here; every run records the commit it was made at (reproduce.py's git_commit).
PREREGISTERED_AT = "076beb6448b4c667d1e2648e3400d34f36fd68ac"


MATCHED_LR = 3e-3  # sweep S's choice for Tiger and LAMB: the twins' matched lr


def early400(run):
    """Mean whole-split val loss over the evaluations at steps 100-400 (the secondary statistic)."""
    return mean_over(run, "val_loss", 100, STEPS)


STATS = {"start": start, "early400": early400}
PRIMARY, SECONDARY = "start", "early400"


def cells(new_runs, committed_runs):
    """{cell: {arm: {seed: run}}}: 'tiger' and 'lamb' (the committed originals), 'a tiger', 'a lamb', 'twin tiger lr=..',
    'twin lamb lr=..', 'c embedding', 'c body' (the new runs), 'ref tiger', 'ref lamb' (check R's re-makes)."""
    out = {opt: by_arm([r for r in committed_runs if r["group"] == opt]) for opt in ("tiger", "lamb")}
    for r in new_runs:
        g = r["group"]
        name = (g.replace("b ", "twin ").replace("-twin", "") if g.startswith("b ")
                else f"c {g.split()[2].split('-')[0]}" if g.startswith("c ") else g)
        out.setdefault(name, {}).setdefault(r["arm"], {})[r["seed"]] = r
    return out


def check_r(new_runs, committed_runs):
    """Check R: each re-made run against the committed run of the same id, at every shared step <= STEPS: the largest
    |difference| of val_subset_loss and val_loss. Returns [dict(id, steps, max_abs_diff, passed)]."""
    old = {r["id"]: r for r in committed_runs}
    rows = []
    for r in new_runs:
        if not r["group"].startswith("ref "):
            continue
        rid = r["id"].replace(r["group"], r["group"][4:], 1)  # 'ref tiger|ortho|seed=1' -> 'tiger|ortho|seed=1'
        if rid not in old:
            continue
        a = {(t, k): v for k in ("val_subset_loss", "val_loss") for t, v in logged(old[rid], k).items() if t <= STEPS}
        b = {(t, k): v for k in ("val_subset_loss", "val_loss") for t, v in logged(r, k).items()}
        both = sorted(set(a) & set(b))
        diff = max(abs(a[k] - b[k]) for k in both) if both else math.nan
        rows.append(dict(id=rid, steps=len(both), max_abs_diff=diff, passed=bool(diff <= R_TOLERANCE)))
    return rows


def _row(a_runs, b_runs, stat, a, b):
    return dict(a=a, b=b, **compare(paired(a_runs, b_runs, STATS[stat])))


def original_gap(cs, opt, stat=PRIMARY):
    """logn - ortho under the committed original optimizer `opt`, on the plan's seeds (what its twin is read against)."""
    logn, ortho = (cs.get(opt, {}).get(arm, {}) for arm in ("logn", "ortho"))
    return _row({s: r for s, r in logn.items() if s in SEEDS}, {s: r for s, r in ortho.items() if s in SEEDS}, stat,
                "logn", "ortho")


def verdict_a(cs, opt, stat=PRIMARY):
    """(a): the self-logit or the small sigma, with no learned matrix: control_verdict's rule with shuffle_logn
    as the control and shuffle (sigma = 0.02) as the reference arm."""
    orig, new = cs.get(opt, {}), cs.get(f"a {opt}", {})
    by = {"logn": orig.get("logn", {}), "control": new.get("shuffle_logn", {}), "ortho": orig.get("shuffle", {})}
    v = control_verdict(by, stat=STATS[stat])
    names = {"control": "shuffle_logn", "ortho": "shuffle", "logn": "logn"}
    for r in v["rows"] + ([v["slow"]] if v.get("slow") else []):
        r["a"], r["b"] = names[r["a"]], names[r["b"]]
    return dict(v, optimizer=opt, stat=stat)


def _seed_diffs(a_runs, b_runs, stat):
    seeds = sorted(set(a_runs) & set(b_runs))
    return seeds, [STATS[stat](a_runs[s]) - STATS[stat](b_runs[s]) for s in seeds]


B_WORDS = {("not", "not"): "relativity decides", ("lags", "lags"): "relativity is not needed",
           ("lags", "not"): "depends on the lr", ("not", "lags"): "depends on the lr"}  # (b): logn - ortho at M, at O


def verdict_b(cs, opt, picked_lr, stat=PRIMARY):
    """(b): logn - ortho under opt's absolute twin at the matched lr (M) and at its own lr (O = picked_lr; None while
    its sweep is undecided). Also the lag the twin removes at M (paired by seed) and logn - shuffle_logn under it."""
    m = cs.get(f"twin {opt} lr={MATCHED_LR:g}", {})
    rows = {"M": _row(m.get("logn", {}), m.get("ortho", {}), stat, "logn", "ortho")}
    if picked_lr is not None and picked_lr != MATCHED_LR:
        o = cs.get(f"twin {opt} lr={picked_lr:g}", {})
        rows["O"] = _row(o.get("logn", {}), o.get("ortho", {}), stat, "logn", "ortho")
    elif picked_lr == MATCHED_LR:
        rows["O"] = rows["M"]
    orig = cs.get(opt, {})
    g_orig = dict(zip(*_seed_diffs(orig.get("logn", {}), orig.get("ortho", {}), stat)))
    g_twin = dict(zip(*_seed_diffs(m.get("logn", {}), m.get("ortho", {}), stat)))
    seeds = sorted(set(g_orig) & set(g_twin))
    removed = dict(a=f"{opt} gap", b="twin gap", **compare([g_orig[s] - g_twin[s] for s in seeds]))
    selfl = _row(m.get("logn", {}), m.get("shuffle_logn", {}), stat, "logn", "shuffle_logn")
    words = [r["word"] for r in rows.values()]
    if "O" not in rows or any(w == "pending" or w.startswith("invalid") for w in words):
        verdict = "PENDING"
    else:
        verdict = two_way(rows["M"], rows["O"], B_WORDS)
    return dict(verdict=verdict, optimizer=opt, stat=stat, picked_lr=picked_lr, rows=rows, removed=removed,
                self_logit=selfl)


C_WORDS = {("lags", "lags"): "both", ("lags", "not"): "the embedding's relativity carries the lag",
           ("not", "lags"): "the body's relativity carries the lag", ("not", "not"): "neither"}  # (c): E, B


def verdict_c(cs, stat=PRIMARY):
    """(c): the 2 x 2 under Tiger's rule at the matched lr. G_cell = logn - ortho per seed in the cells all (committed
    Tiger), embedding-only, body-only and none (the twin); the embedding and body main effects and their interaction,
    per seed over the seeds all four cells share."""
    names = {"all": "tiger", "embedding": "c embedding", "body": "c body", "none": f"twin tiger lr={MATCHED_LR:g}"}
    G = {}
    for cell, key in names.items():
        c = cs.get(key, {})
        G[cell] = dict(zip(*_seed_diffs(c.get("logn", {}), c.get("ortho", {}), stat)))
    seeds = sorted(set.intersection(*(set(g) for g in G.values())))
    g = {cell: np.array([G[cell][s] for s in seeds]) for cell in G}
    E = compare((g["all"] - g["body"] + g["embedding"] - g["none"]) / 2)
    B = compare((g["all"] - g["embedding"] + g["body"] - g["none"]) / 2)
    I = compare((g["all"] - g["body"]) - (g["embedding"] - g["none"]))
    total = compare(g["all"] - g["none"])
    if any(r["word"] == "pending" or r["word"].startswith("invalid") for r in (E, B)):
        verdict = "PENDING"
    else:
        verdict = two_way(E, B, C_WORDS)
    return dict(verdict=verdict, stat=stat, seeds=seeds, E=E, B=B, I=I, total=total,
                gaps={cell: g[cell].tolist() for cell in g})


# ----------------------------------------------------------------------------------------------------
# The report (appendix B's section on the controls): lines to print, and the paired gaps over time

def load(new_path=None, committed_path=None):
    """(new runs, committed optim runs) from research/runs/repro_cause and research/runs/repro_optim by default."""
    return (load_runs(new_path or os.path.join(HERE, "runs", "repro_cause")),
            load_runs(committed_path or os.path.join(HERE, "runs", "repro_optim")))


def _fmt(r):
    if r["word"] == "pending":
        return f"{r['a']} - {r['b']}: pending ({r['n']} of {len(SEEDS)} seeds)"
    lo, hi = r["ci95"]
    return f"{r['a']} - {r['b']} {r['mean']:+.3f} [{lo:+.3f}, {hi:+.3f}] ({r['word']})"


def progress_lines(new_runs):
    """How far the plan is: runs in, by part, and the commit they were made at."""
    planned = plan("cause", new_runs)
    have = {r["id"] for r in new_runs}
    parts = {}
    for g, a, o in planned:
        part = g.split()[0]
        n, d = parts.get(part, (0, 0))
        parts[part] = (n + 1, d + (run_id(g, a, o["seed"]) in have))
    commits = sorted({r.get("git_commit", "?")[:7] for r in new_runs})
    return [f"{len(have)} of {len(planned)} planned runs in (so far: the plan grows when a sweep decides): "
            + ", ".join(f"{p} {d}/{n}" for p, (n, d) in parts.items()),
            f"made at commit(s) {', '.join(commits) or '-'}; pre-registered at {PREREGISTERED_AT[:7]}"]


def _mark(part, fragile):
    """' (FRAGILE)' after the verdict of a part that fragile_parts names, else nothing."""
    return " (FRAGILE)" if part in fragile else ""


def _delta(delta, opt, stat):
    """Section 5's delta for opt's verdicts on `stat`: start has its own; early400 takes the whole split's (early)."""
    return delta[opt]["start" if stat == "start" else "early"]


def report_lines(new_runs, committed_runs, stat=PRIMARY, fragile=()):
    """Every verdict of the plan on `stat`, each with the rows it rests on; PENDING where runs are missing. A part in
    `fragile` (fragile_parts) gets '(FRAGILE)' after its verdict."""
    mark = lambda part: _mark(part, fragile)  # noqa: E731
    out = []
    for r in check_r(new_runs, committed_runs):
        out.append(f"check R: {r['id']} re-made, largest |diff| over {r['steps']} evaluations {r['max_abs_diff']:.2g} "
                   f"-> {'passed' if r['passed'] else 'FAILED'}")
    cs = cells(new_runs, committed_runs)
    for opt in ("tiger", "lamb"):
        v = verdict_a(cs, opt, stat)
        out.append(f"(a) {opt}: {v['verdict']}{mark(f'(a) {opt}')}" + "".join(f"; {_fmt(r)}" for r in v["rows"])
                   + (f"; the rule's gate {_fmt(v['slow'])}" if v.get("slow") else ""))
    picks = twin_lrs(new_runs)
    for opt in ("tiger", "lamb"):
        v = verdict_b(cs, opt, picks[opt]["lr"], stat)
        own = "sweep pending" if v["picked_lr"] is None else f"own lr {v['picked_lr']:g}"
        part = f"(b) {opt}'s twin"
        out.append(f"{part} ({own}): {v['verdict']}{mark(part)}; at 3e-3 {_fmt(v['rows']['M'])}"
                   + (f"; at {v['picked_lr']:g} {_fmt(v['rows']['O'])}" if "O" in v["rows"] and v["picked_lr"] != MATCHED_LR
                      else ""))
        orig = original_gap(cs, opt, stat)
        out.append(f"    under {opt} itself {_fmt(orig)}; lag the twin removes: {_fmt(v['removed'])}; under the twin "
                   f"{_fmt(v['self_logit'])}")
    v = verdict_c(cs, stat)
    out.append(f"(c) tiger 2 x 2: {v['verdict']}{mark('(c) the 2 x 2')}; embedding effect {_fmt(dict(v['E'], a='E', b='0'))}; "
               f"body effect {_fmt(dict(v['B'], a='B', b='0'))}")
    if v["verdict"] != "PENDING":  # the pre-registered descriptive shares of the lag relativity adds, G_all - G_none
        t = v["total"]["mean"]
        out.append(f"    the lag relativity adds: {_fmt(dict(v['total'], a='G_all', b='G_none'))}; its shares: E "
                   f"{v['E']['mean'] / t:.2f}, B {v['B']['mean'] / t:.2f}; interaction {_fmt(dict(v['I'], a='I', b='0'))}")
    return out + (differs(new_runs, committed_runs) if stat == PRIMARY else [])


PREDICTIONS = {  # the docstring's, one line per part: what each hypothesis expects (written before the data)
    "(a) self-logit without P": dict(H_R="(says nothing)", H_S="(says nothing)", H_C="(says nothing)"),
    "(b) Tiger's twin": dict(H_R="relativity decides", H_S="depends on the lr (lag at 3e-3, none at its own lr)",
                              H_C="relativity is not needed"),
    "(b) LAMB's twin": dict(H_R="relativity decides", H_S="depends on the lr (lag at 3e-3, none at its own lr)",
                             H_C="relativity is not needed"),
    "(c) Tiger 2 x 2": dict(H_R="the embedding's relativity carries the lag", H_S="neither", H_C="neither"),
}


def side_by_side(new_runs, committed_runs, stat=PRIMARY, fragile=()):
    """The predictions of each hypothesis beside the verdict the rules give (PENDING until the runs are in); a part in
    `fragile` (fragile_parts) marked '(FRAGILE)'."""
    cs, picks = cells(new_runs, committed_runs), twin_lrs(new_runs)
    mark = lambda part: _mark(part, fragile)  # noqa: E731
    got = {"(a) self-logit without P": " / ".join(f"{o}: {verdict_a(cs, o, stat)['verdict']}{mark(f'(a) {o}')}"
                                                  for o in ("tiger", "lamb")),
           "(b) Tiger's twin": verdict_b(cs, "tiger", picks["tiger"]["lr"], stat)["verdict"] + mark("(b) tiger's twin"),
           "(b) LAMB's twin": verdict_b(cs, "lamb", picks["lamb"]["lr"], stat)["verdict"] + mark("(b) lamb's twin"),
           "(c) Tiger 2 x 2": verdict_c(cs, stat)["verdict"] + mark("(c) the 2 x 2")}
    return [f"{part}: verdict {got[part]} | H_R expects {p['H_R']}; H_S {p['H_S']}; H_C {p['H_C']}"
            for part, p in PREDICTIONS.items()]


def gap_panels(new_runs, committed_runs):
    """What the cause figure draws, part by part: {panel title: [(label, A's runs, B's runs)]}, each a paired gap A - B
    ({seed: run} each). (a) the self-logit's and the small sigma's costs with nothing learned in the head; (b) logn -
    ortho under each optimizer and its absolute twin (each lr the twin ran at); (c) logn - ortho in the 2 x 2 under
    Tiger's rule. A pair with no runs yet is left out."""
    cs = cells(new_runs, committed_runs)
    a = []
    for opt in ("tiger", "lamb"):
        orig, new = cs.get(opt, {}), cs.get(f"a {opt}", {})
        a += [(f"{opt}: logn - shuffle_logn (self-logit)", orig.get("logn"), new.get("shuffle_logn")),
              (f"{opt}: shuffle_logn - shuffle (small sigma)", new.get("shuffle_logn"), orig.get("shuffle"))]
    b = []
    for opt in ("tiger", "lamb"):
        b.append((f"{opt}", cs.get(opt, {}).get("logn"), cs.get(opt, {}).get("ortho")))
        for name in sorted(k for k in cs if k.startswith(f"twin {opt} ")):
            b.append((f"{opt}'s twin, {name.split()[-1]}", cs[name].get("logn"), cs[name].get("ortho")))
    c = [(f"{cell} relative", cs.get(key, {}).get("logn"), cs.get(key, {}).get("ortho"))
         for cell, key in (("all", "tiger"), ("embedding", "c embedding"), ("body", "c body"),
                           ("none", f"twin tiger lr={MATCHED_LR:g}"))]
    panels = {"(a) no learned matrix in the head": a, "(b) each optimizer against its absolute twin: logn - ortho": b,
              "(c) Tiger's rule, relative on: logn - ortho": c}
    return {t: [(label, x, y) for label, x, y in rows if x and y] for t, rows in panels.items()}


# The pre-registration's "What each outcome means" (preregistrations/cause.md), as words: what one twin's verdict says
# of the cause. H_R is named only with (c) (answer). "depends on the lr" means H_S only with a lag at the matched lr and
# none at the twin's own (the plan gives the reverse no reading). Written 2026-11-26 (see cause.md's dated addition).
MEANING = {"relativity decides": "the step's relativity",
           "relativity is not needed": "a cause other than the step's relativity (H_S or H_C)",
           "depends on the lr": "the step's size, not its relativity (H_S)"}
NAMES = dict(tiger="Tiger", lamb="LAMB")
# Where (c) puts the lag a relative step adds: the answer's plain clause when the twins find relativity not needed
# (added 2026-11-27, after the data: the plan expected (c) to find "neither" there, and it did not)
THROUGH = {"the embedding's relativity carries the lag": "through the embedding",
           "the body's relativity carries the lag": "through the body", "both": "through the embedding and the body"}


def _reading(v):
    """What one twin's verdict says of the cause (MEANING), or None where it says nothing (undecided, or the reverse
    'depends on the lr')."""
    if v["verdict"] == "depends on the lr" and v["rows"]["M"]["word"] != "A higher":
        return None
    return MEANING.get(v["verdict"])


def _num(r):
    ci = r.get("ci95")
    return f"{r['mean']:+.2f} nats" + (f" [{ci[0]:+.2f}, {ci[1]:+.2f}]" if ci else " (no interval)")


def part_verdicts(new_runs, committed_runs, stat=PRIMARY):
    """{part: verdict} of (a) and (b) per optimizer and of (c), on `stat`."""
    cs, picks = cells(new_runs, committed_runs), twin_lrs(new_runs)
    return {**{f"(a) {o}": verdict_a(cs, o, stat)["verdict"] for o in NAMES},
            **{f"(b) {o}'s twin": verdict_b(cs, o, picks[o]["lr"], stat)["verdict"] for o in NAMES},
            "(c) the 2 x 2": verdict_c(cs, stat)["verdict"]}


def differs(new_runs, committed_runs):
    """The pre-registered flag: the parts whose primary (start) and secondary (early400) verdicts differ, neither
    PENDING, as lines to print."""
    p, q = (part_verdicts(new_runs, committed_runs, st) for st in (PRIMARY, SECONDARY))
    return [f"FLAGGED differs: {k}: {p[k]} on {PRIMARY} (primary, the answer) but {q[k]} on {SECONDARY}"
            for k in p if p[k] != q[k] and "PENDING" not in (p[k], q[k])]


def answer(new_runs, committed_runs, stat=PRIMARY, delta=None):
    """The campaign's answer in one sentence a student can read: which cause the twins' verdicts support (MEANING; H_R
    "as the lesson tells it" only when (c) also finds the embedding's relativity carrying the lag; where both twins
    find relativity not needed but (c) finds a part, the part Tiger's matched twin removes and where (c) puts it,
    THROUGH, added 2026-11-27 after the data), and how strongly:
    logn - ortho under each optimizer and under its twin (and at the twin's own lr), and the 2 x 2's effects, with 95%
    intervals over the seeds. 'Not answered yet' while any verdict of (b) or (c) is PENDING.
    delta (as fragility_lines takes it; added 2026-11-27, after the data, on a review): where the sentence says where
    (c) puts the part and section 5's rule marks (c)'s verdict FRAGILE, it says so, with the shift that would change it."""
    cs, picks = cells(new_runs, committed_runs), twin_lrs(new_runs)
    b = {o: verdict_b(cs, o, picks[o]["lr"], stat) for o in NAMES}
    c = verdict_c(cs, stat)
    waiting = [f"{o}'s twin" for o, v in b.items() if v["verdict"] == "PENDING"] + ["the 2 x 2"] * (c["verdict"] == "PENDING")
    if waiting:
        return f"Not answered yet: {', '.join(waiting)} pending ({progress_lines(new_runs)[0].split(' (')[0]})."
    readings = {o: _reading(v) for o, v in b.items()}
    if None in readings.values() or len(set(readings.values())) > 1:
        head = "The data do not decide the cause: " + "; ".join(
            f"{NAMES[o]}'s twin {'points to ' + r if r else 'gives no reading (' + b[o]['verdict'] + ')'}"
            for o, r in readings.items())
    elif b["tiger"]["verdict"] == "relativity is not needed" and c["verdict"] in THROUGH:
        r, g = b["tiger"]["removed"], original_gap(cs, "tiger", stat)
        f = verdict_flip("c", _as_claim_c(c), rule=_rule_c) if delta is not None else None
        fragile = (f" (FRAGILE: a shift of {f['distance']:.4f} nats would make (c)'s verdict '{f['to']}')"
                   if f and f["distance"] <= _delta(delta, "tiger", stat) else "")
        head = (f"The relative step is not needed for logn's lag, but under Tiger's rule it adds {_num(r)} of it "
                f"({r['mean'] / g['mean']:.0%}), {THROUGH[c['verdict']]}{fragile}, and the rest is there without it "
                f"(the steps' small size or the rest of the configuration, H_S or H_C, not told apart)")
    elif b["tiger"]["verdict"] != "relativity decides":
        head = f"The data support {readings['tiger']}"
    elif c["verdict"] == "the embedding's relativity carries the lag":
        head = "The data support the step's relativity, through the embedding (H_R, as the lesson tells it)"
    elif c["verdict"] == "undecided":
        head = ("The data support the step's relativity; the 2 x 2 does not decide through which weights, so H_R as "
                "the lesson tells it (through the embedding) is not shown")
    else:
        head = (f"The data support the step's relativity, but the 2 x 2 finds {c['verdict']} rather than the "
                f"embedding alone: H_R as the lesson tells it is not supported")
    how, rows = [], [c["E"], c["B"]]
    for o, v in b.items():
        orig = original_gap(cs, o, stat)
        own = v["picked_lr"] != MATCHED_LR
        rows += [orig, v["rows"]["M"]] + ([v["rows"]["O"]] if own else [])
        how.append(f"logn - ortho {_num(orig)} under {NAMES[o]}, {_num(v['rows']['M'])} under its twin at the same lr"
                   + (f" and {_num(v['rows']['O'])} at the twin's own lr {v['picked_lr']:g}" if own else ""))
    how.append(f"under Tiger's rule the embedding's relativity adds {_num(c['E'])} and the body's {_num(c['B'])}")
    flag = differs(new_runs, committed_runs) if stat == PRIMARY else []
    return (head + ": " + "; ".join(how) + f" ({STATS[stat].__name__}, paired over {min(r['n'] for r in rows)} seeds, "
            f"95% intervals" + ("; the secondary statistic differs, see the flags" if flag else "") + ").")


def _fragility(new_runs, committed_runs, delta, stat=PRIMARY):
    """Appendix B section 5's fragility rule on every verdict of this section on `stat` (applied 2026-11-27, after the
    data, on a review: the plan has no fragility rule): FRAGILE when shifting the comparisons a verdict reads, each by
    at most delta nats, changes it (fragility.fragile_lines, with (b)'s and (c)'s own rules). delta: {opt: {stat: nats}},
    section 5's for the original optimizer (twice one measured paired difference's error; early400 takes the whole
    split's, as early does); (c) ran under Tiger's rule and takes Tiger's. [(part, 'FRAGILE: ...' or 'robust: ...')]."""
    cs, picks = cells(new_runs, committed_runs), twin_lrs(new_runs)
    d = {opt: _delta(delta, opt, stat) for opt in NAMES}
    out = [(f"(a) {opt}", fragile_lines("control", verdict_a(cs, opt, stat), d[opt])) for opt in NAMES]
    for opt in NAMES:
        v = verdict_b(cs, opt, picks[opt]["lr"], stat)
        rows = [v["rows"]["M"]] + [v["rows"][k] for k in ("O",) if k in v["rows"] and v["rows"][k] is not v["rows"]["M"]]
        out.append((f"(b) {opt}'s twin", fragile_lines("b", dict(verdict=v["verdict"], rows=rows), d[opt],
                                                      rule=lambda rs: two_way(rs[0], rs[-1], B_WORDS))))
    out.append(("(c) the 2 x 2", fragile_lines("c", _as_claim_c(verdict_c(cs, stat)), d["tiger"], rule=_rule_c)))
    return [(name, line) for name, line in out if line]


def fragility_lines(new_runs, committed_runs, delta, stat=PRIMARY):
    """Section 5's fragility rule on every verdict of this section (_fragility), one printed line each."""
    return [f"  {name:18} {line}" for name, line in _fragility(new_runs, committed_runs, delta, stat)]


def fragile_parts(new_runs, committed_runs, delta, stat=PRIMARY):
    """The parts whose verdict on `stat` the fragility rule marks FRAGILE ('(a) tiger', "(b) lamb's twin", '(c) the 2
    x 2'), for report_lines and side_by_side to mark on the verdict's own line (added 2026-11-27, on a review)."""
    return {name for name, line in _fragility(new_runs, committed_runs, delta, stat) if line.startswith("FRAGILE")}


def _rule_c(rows):
    """(c)'s verdict from its two rows, E and B (verdict_c's rule, for the fragility rule to re-apply)."""
    return two_way(rows[0], rows[1], C_WORDS)


def _as_claim_c(v):
    """(c)'s verdict as the fragility rule reads a claim: its verdict and the two rows it is made from, E and B."""
    return dict(verdict=v["verdict"], rows=[dict(v["E"], a="E", b="0"), dict(v["B"], a="B", b="0")])


