"""
The statistics of lesson 04, fixed before the d768 data existed (this docstring was committed, with
reproduce.py's d768 plan, before its first run started; rules added later are marked so, with the date).

The claims under test (the source post, and a reply of its author under it)
    1. logn (sigma = ln(n)/d) converges SLOWEST of the fixes.
    2. The other fixes converge ALIKE.
    3. All fixes END alike.
    4. (the author's reply) The fixes give NO FINAL GAIN over plain tying.

What is measured, per run (lessons/reproduce.py, scale d768)
    The validation loss over the WHOLE val split of Tiny Shakespeare (33,792 predicted tokens, every
    non-overlapping 64-token window) at steps 0, 100, ..., 1200. From it:
    - early  = mean val loss over steps 100..600 (the first half of training, step 0 excluded): the area under
               the first half of the curve, our measure of convergence speed (lower = faster). Claims 1 and 2.
    - best   = the lowest val loss of the run (early stopping). Claims 3 and 4. `last` (step 1200) is reported
               beside it; with 2 epochs of data the model may overfit late, so best is primary.
    - steps to target (secondary, descriptive): the first step at which the val curve, linearly interpolated
      between evaluations (100 steps apart: a coarse ruler, said so), reaches a target loss. Targets per
      setting: L_q = ln n - q (ln n - L*), q in (0.5, 0.8, 0.95), where L* is the highest (worst) of the arms'
      mean best val, so every arm's mean curve reaches every target. A run that never reaches one counts as
      "not reached" and its pairs are left out of that target's interval (and the count is printed).

Pairing and intervals
    A seed drives both the init and the data order (data_seed = seed), so runs of one seed differ only in the
    head. Every comparison A - B is the per-seed difference over the seeds both arms have; we report its mean,
    and a t confidence interval over seeds (df = seeds - 1). Fewer than 3 paired seeds: "pending", no verdict.

The words, for one comparison A - B (alpha = 0.05)
    - "A higher" / "A lower" (different): the two-sided 95% t interval excludes 0.
    - "alike": the 90% t interval lies inside +-MARGIN (two one-sided tests at alpha = 0.05 each).
      MARGIN = 0.02 nats: 2% in perplexity, 0.4% of a final loss near 5; smaller than any difference a
      practitioner would choose a fix for, larger than the whole-split measurement noise of a paired difference.
      An interval that excludes 0 and lies inside the margin is "A higher/lower (within the margin)".
    - anything else: "inconclusive". Failing to find a difference is never called "alike".

The claims' verdicts: SUPPORTED / CONTRADICTED / INCONCLUSIVE (or PENDING with too few seeds)
    Fixes compared: the seed's core fixes untied, ortho, shuffle (claim 2 also reported with bert and channel,
    which the seed suggests too, where they were run). k = the number of comparisons in a claim.
    1. statistic early, pairs logn - F for each other fix F.
       SUPPORTED if logn is "higher" against every F (an intersection-union test: each at alpha, no correction).
       CONTRADICTED if logn is lower than some F with the Bonferroni interval (level 1 - alpha/k) excluding 0.
    2. statistic early, every pair of the other fixes.
       SUPPORTED if every pair is "alike" (intersection-union: each TOST at alpha).
       CONTRADICTED if some pair differs with the Bonferroni interval (1 - alpha/k) excluding 0.
    3. statistic best, every pair of {logn, untied, ortho, shuffle}: as claim 2.
    4. statistic best, F - tied for every fix F (logn included): SUPPORTED ("no gain") if every F is "alike"
       tied; CONTRADICTED if some F differs from tied (Bonferroni), and the direction says gain or loss.
    Otherwise INCONCLUSIVE.

The causal control (why logn is slow, if it is)
    control = ortho at logn's sigma = ln(n)/d. logn - control differ only in the self-logit (same sigma);
    control - ortho (sigma = 0.02) differ only in sigma (same head). On early, with the words above:
    - "small sigma": control is higher than ortho, and logn is not higher than control.
    - "self-logit":  logn is higher than control, and control is not higher than ortho.
    - "both":        logn higher than control, and control higher than ortho.
    - "undecided":   neither is higher; both intervals are shown.

The older scales (live, full, gpt2; made before these rules)
    They fixed the data order (data_seed = 0), varied only the init, and measured val on 2,048 random tokens.
    Their main groups (3 seeds) are read with the same words and claims, labelled "older design"; the
    single-seed sweeps are exploratory: per-setting gaps with no verdict. A trend along a knob is named only
    with at least 3 knob values and the same sign of change in every step; two points are never a trend.

Tests of the rules themselves (tests/test_analysis.py): on synthetic curves where every arm is equal plus seed
noise, "different" is said at most ~5% of the time (2,000 draws, fixed RNG) and the claims' verdicts are rarely
wrong; with a planted difference of a few noise units the rules detect it most of the time.
"""
