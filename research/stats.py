"""
The statistics of the campaigns, with no arm names: t intervals over seeds, the word for one paired comparison,
the pooled seed sd, power, and the error of a measured val loss. The rules they implement were fixed before the data:
research/preregistrations/appendix_a.md ("The words, for one comparison"). Tested in tests/test_appendix_a.py.
"""

import functools
import math

import numpy as np
from scipy import stats

ALPHA = 0.05
MARGIN = 0.02  # nats: the equivalence margin of "alike"
MIN_SEEDS = 3  # fewer paired seeds than this: "pending"


@functools.lru_cache(maxsize=None)
def t_quantile(p, df):
    return float(stats.t.ppf(p, df))


def interval(diffs, level):
    """Two-sided t interval of the mean of `diffs` at `level` (None with fewer than 2 values):
    mean +- t(1/2 + level/2, n - 1) * sd / sqrt(n)."""
    d = np.asarray(diffs, float)
    if len(d) < 2:
        return None
    half = t_quantile(0.5 + level / 2, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d))
    return float(d.mean() - half), float(d.mean() + half)


def compare(diffs, k=1, margin=MARGIN, alpha=ALPHA):
    """The word for a paired difference A - B (one value per seed):
    "A higher" / "A lower" when the 95% interval excludes 0 ("(within the margin)" added when the 90% interval also
    lies inside +-margin), "alike" when only the latter holds (two one-sided tests at alpha), else "inconclusive";
    "pending" below MIN_SEEDS values. k > 1: the comparison is one of k in a claim, and `bonferroni` says whether its
    1 - alpha/k interval excludes 0 (what CONTRADICTED needs)."""
    d = np.asarray(diffs, float)
    out = dict(n=len(d), mean=float(d.mean()) if len(d) else math.nan, diffs=d.tolist())
    if not np.isfinite(d).all():  # a diverged run is named, never averaged into a mean
        return dict(out, word="invalid (non-finite loss)", ci95=None, ci90=None, bonferroni=None, alike=False)
    if len(d) < MIN_SEEDS:
        return dict(out, word="pending", ci95=interval(d, 1 - alpha), ci90=None, bonferroni=None, alike=False)
    ci95, ci90, cib = interval(d, 1 - alpha), interval(d, 1 - 2 * alpha), interval(d, 1 - alpha / k)
    higher, lower = ci95[0] > 0, ci95[1] < 0
    inside = -margin < ci90[0] and ci90[1] < margin
    if higher or lower:
        word = ("A higher" if higher else "A lower") + (" (within the margin)" if inside else "")
    elif inside:
        word = "alike"
    else:
        word = "inconclusive"
    bonf = "higher" if cib[0] > 0 else "lower" if cib[1] < 0 else None
    return dict(out, word=word, ci95=ci95, ci90=ci90, ci_bonferroni=cib, bonferroni=bonf, alike=inside, k=k)


def pooled_sd(groups):
    """The seed sd pooled over several comparisons (each a list of per-seed differences with >= 2 values; others are
    left out): sqrt(sum of squared deviations / sum of degrees of freedom), so a comparison with more seeds weighs
    more. Returns (sd, degrees of freedom, comparisons used); sd NaN when none has 2 values."""
    ss, df, used = 0.0, 0, 0
    for d in groups:
        d = np.asarray(d, float)
        if len(d) >= 2:
            ss, df, used = ss + float(((d - d.mean()) ** 2).sum()), df + len(d) - 1, used + 1
    return (math.sqrt(ss / df) if df else math.nan), df, used


def alike_power(sd, k, margin=MARGIN, alpha=ALPHA, draws=4000, rng=0):
    """The chance that two truly EQUAL arms are called "alike" with k seeds, when their paired difference varies over
    seeds with sd `sd`: the share of simulated experiments (k normal differences of mean 0) whose 90% t interval lies
    inside +-margin. Small at the margin's edge: a half-width just below the margin is necessary, not sufficient."""
    d = np.random.default_rng(rng).normal(0.0, sd, (draws, k))
    half = t_quantile(1 - alpha, k - 1) * d.std(1, ddof=1) / math.sqrt(k)
    m = d.mean(1)
    return float(np.mean((m - half > -margin) & (m + half < margin)))


def seeds_for_alike(sd, power=0.8, most=60):
    """The fewest seeds (at least MIN_SEEDS, which a verdict needs) with which two truly equal arms whose paired
    difference has seed sd `sd` are called "alike" with probability `power` (alike_power). None beyond `most`."""
    for k in range(MIN_SEEDS, most + 1):
        if alike_power(sd, k) >= power:
            return k
    return None


def shared_error_p(seed_diffs, se):
    """If each seed's measured difference erred independently by `se` (the measurement error), the seeds' sd could not
    be much below se. P = probability of an sd at most the observed one when the true sd is se: (n - 1) s^2 / se^2 ~
    chi^2(n - 1). A small P (< 0.05) is evidence that the seeds share their measurement error (the same val windows);
    a large P is not evidence either way."""
    d = np.asarray(seed_diffs, float)
    return float(stats.chi2.cdf((len(d) - 1) * d.var(ddof=1) / se ** 2, len(d) - 1))


def window_error(a_windows, b_windows, block=1):
    """Standard error of a measured difference of two mean losses over the same W windows: the W window differences'
    sd / sqrt(W). block > 1 averages adjacent windows first (W // block blocks), the honest error if neighbouring
    windows are correlated."""
    d = np.asarray(a_windows, float) - np.asarray(b_windows, float)
    k = len(d) // block
    d = d[:k * block].reshape(k, block).mean(1)
    return float(d.std(ddof=1) / math.sqrt(k))


def trend(values):
    """A knob's trend: 'increasing'/'decreasing' only with >= 3 values all moving the same way, else
    'too few points' (2 values) or 'no monotone trend'."""
    v = np.asarray(values, float)
    if len(v) < 3:
        return "too few points"
    steps = np.diff(v)
    if (steps > 0).all():
        return "increasing"
    if (steps < 0).all():
        return "decreasing"
    return "no monotone trend"


def gap_phases(steps, mean, lo, hi):
    """Where a paired gap A - B (records.gap_curve's output, step 0 left out) is significantly below 0 (A ahead) and
    above 0 (A behind) at pointwise 95%: dict(ahead=[steps], behind=[steps], first=(step, mean), last=(step, mean)). A
    crossing shows as steps in both lists: a summary over a window can average it away."""
    keep = steps > 0
    s, m, l, h = steps[keep], mean[keep], lo[keep], hi[keep]
    return dict(ahead=s[h < 0].astype(int).tolist(), behind=s[l > 0].astype(int).tolist(),
                first=(int(s[0]), float(m[0])) if len(s) else None, last=(int(s[-1]), float(m[-1])) if len(s) else None)
