"""The lab: the campaigns behind the appendices, kept beside the class (lessons/) and the core (tiedgpt, train, optim).

    stats, records              the statistics (paired t intervals) and a run's record (one JSON file per run)
    claims, plans, reproduce    the post's claims as verdict rules, the campaigns' plans, the worker that runs them
    appendix_a, appendix_b,     the reports' tables and verdicts (appendix B section 11: cause)
      cause
    figures, budget             the reports' figures; the class lessons' reading budget
    runs/                       the committed run records; preregistrations/ the plans and rules, written before the runs

Run a script from the repository root: python -m research.reproduce --help. The core never imports from here.
"""
