"""The README is a student's first page and docs/ holds the rest: the links must lead somewhere, the first page must
stay short with the commands in the order a student needs them, and its table of findings must be what the
committed runs say."""
import glob
import json
import os
import re

import pytest

from helpers import ROOT

PAGES = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")  # [text](target), not an image


def _links(path):
    with open(path, encoding="utf-8") as f:
        text = re.sub(r"```.*?```", "", f.read(), flags=re.S)  # links inside code blocks are code
    return LINK.findall(text)


def _anchor(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_there_are_docs_pages_beside_the_readme():
    assert len(PAGES) >= 4, "expected README.md and docs/training.md, performance.md, campaigns.md"


@pytest.mark.parametrize("page", PAGES, ids=[os.path.relpath(p, ROOT) for p in PAGES])
def test_every_relative_link_leads_to_a_file_or_heading_in_the_repo(page):
    broken = []
    for target in _links(page):
        if re.match(r"[a-z]+:", target):  # https:, mailto: -- not ours to check offline
            continue
        path, _, anchor = target.partition("#")
        full = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
        if not os.path.exists(full):
            broken.append(f"{target} (no {os.path.relpath(full, ROOT)})")
        elif anchor and full.endswith(".md"):
            with open(full, encoding="utf-8") as f:
                anchors = {_anchor(h) for h in re.findall(r"^#+ (.*)$", f.read(), re.M)}
            if anchor not in anchors:
                broken.append(f"{target} (no heading #{anchor})")
    assert not broken, f"{os.path.relpath(page, ROOT)}: broken links: " + "; ".join(broken)


def test_the_link_check_catches_a_broken_link(tmp_path):
    """The check above must be able to fail: a page linking a missing file and a missing heading."""
    page = tmp_path / "page.md"
    page.write_text("# Title\n[ok](#title) [gone](nowhere.md) [bad](#no-such-heading) ![img](x.png) [web](https://x)\n")
    assert _links(str(page)) == ["#title", "nowhere.md", "#no-such-heading", "https://x"]
    with pytest.raises(AssertionError, match="nowhere.md.*no-such-heading"):
        test_every_relative_link_leads_to_a_file_or_heading_in_the_repo(str(page))


def _first_page():
    """The README up to its first section after the commands ('## The model')."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        return f.read().split("\n## The model", 1)[0]


def test_the_readme_first_page_is_under_700_words_and_gives_the_commands_in_order():
    page = _first_page()
    words = len(page.split())
    assert words <= 700, f"README's first page is {words} words; move detail to docs/"
    for heading in ("## What you will learn", "## The finding", "## Run it"):
        assert heading in page
    commands = ["pip install -r requirements.txt", "jupyter lab lessons/", "python demo.py --quick",
                "python train.py --head=ortho", "pytest"]
    block = re.search(r"## Run it\s+```bash\n(.*?)```", page, re.S).group(1)
    firsts = [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
    assert firsts == commands, "the commands, in the order a student needs them"


def _val(record, step):
    return next(r["val_loss"] for r in record["history"] if r["step"] == step and r.get("val_loss") is not None)


@pytest.mark.reports
def test_the_readme_table_of_findings_is_what_the_committed_runs_give():
    """logn - ortho, whole-split val loss at steps 100 and 400, mean over the 3 paired seeds, per optimizer: recomputed
    from research/runs/repro_optim and compared with the README's table, sign and two decimals."""
    runs = {}
    for path in glob.glob(os.path.join(ROOT, "research", "runs", "repro_optim", "*__*__seed=*.json")):
        with open(path) as f:
            r = json.load(f)
        runs[(r["group"], r["arm"], r["seed"])] = r
    table = {}
    for line in _first_page().splitlines():
        m = re.match(r"\| (Tiger|LAMB|AdamW): .*\| \*\*(yes|no)\*\* \| ([+−-]\d\.\d\d) nats \| ([+−-]\d\.\d\d) \|$", line)
        if m:
            table[m.group(1).lower()] = (m.group(2), float(m.group(3).replace("−", "-")),
                                         float(m.group(4).replace("−", "-")))
    assert sorted(table) == ["adamw", "lamb", "tiger"], "the README's table has one row per optimizer"
    for line in _first_page().splitlines():  # the row's learning rate is the one its runs were made with
        m = re.match(r"\| (Tiger|LAMB|AdamW): .*lr ([0-9.e-]+),", line)
        if m:
            assert {runs[(m.group(1).lower(), "logn", s)]["config"]["lr"] for s in (1, 2, 3)} == {float(m.group(2))}
    for opt, (word, at100, at400) in table.items():
        for step, stated in ((100, at100), (400, at400)):
            gaps = [_val(runs[(opt, "logn", s)], step) - _val(runs[(opt, "ortho", s)], step) for s in (1, 2, 3)]
            assert round(sum(gaps) / 3, 2) == pytest.approx(stated, abs=1e-9), (opt, step)
        assert word == ("yes" if at100 > 0 else "no"), opt  # the verdict words agree with the early gap's sign
    # ... and with the verdicts appendix B prints for claim 1 (its grid's columns: adamw (lesson 04), tiger, lamb)
    with open(os.path.join(ROOT, "lessons", "appendix_b_the_optimizer_campaign.ipynb")) as f:
        text = "".join("".join(o.get("text", "")) for c in json.load(f)["cells"] for o in c.get("outputs", []))
    grid = next(line for line in text.splitlines() if line.startswith("1 logn slowest ")).split()[3:6]
    printed = dict(zip(["adamw", "tiger", "lamb"], grid))
    assert {opt: printed[opt] for opt in table} == {
        opt: {"yes": "SUPPORTED", "no": "CONTRADICTED"}[word] for opt, (word, _, _) in table.items()}


@pytest.mark.reports
def test_the_readme_demo_line_is_what_the_committed_demo_run_gives():
    """The README's demo numbers (each optimizer's mean gap at the reported step and its 95% interval, the minutes)
    are read from research/runs/demo.json, the committed default run that lesson 04 shows."""
    with open(os.path.join(ROOT, "research", "runs", "demo.json")) as f:
        demo = json.load(f)
    line = " ".join(next(block for block in _first_page().split("\n- ") if block.startswith("**Demo**")).split())
    num = r"([+−-]\d\.\d\d)"
    for opt, name in (("tiger", "Tiger"), ("adamw", "AdamW")):
        m = re.search(rf"{name} {num} nats \[{num}, {num}\]|{name} {num} \[{num}, {num}\]", line)
        assert m, f"the README's demo line gives no '{name} +x.xx [lo, hi]'"
        stated = [float(g.replace("−", "-")) for g in m.groups() if g is not None]
        v = demo["verdicts"][opt]
        assert stated == [round(v["mean"], 2), round(v["ci95"][0], 2), round(v["ci95"][1], 2)], (opt, stated)
    minutes = float(re.search(r"(\d+\.\d) min on 2 idle CPU cores", line).group(1))
    assert minutes == round(demo["run"]["wall_s"] / 60, 1), "the stated time is the committed run's wall time"


@pytest.mark.reports
def test_the_readme_small_step_sentence_is_the_sweeps_cell_and_its_command_re_makes_it():
    """The finding's small-step sentence (AdamW at a small lr leaves logn behind ortho at step 100) is the step-size
    sweep's cell, recomputed from research/runs/stepsize; the demo command beside it makes the very runs of that cell."""
    import dataclasses
    import demo
    from research import stepsize as Z
    page = " ".join(_first_page().split())
    m = re.search(r"AdamW at lr ([0-9.e-]+) leaves `logn` ([+−-]\d\.\d\d) nats behind `ortho` at step 100", page)
    assert m, "the README's small-step sentence"
    lr, stated = float(m.group(1)), float(m.group(2).replace("−", "-"))
    cell = Z.table(Z.load())["adamw", lr]
    assert (cell["word"], round(cell["mean"], 2)) == ("yes", stated)  # 'behind' is the sweep's own 'yes'
    command = re.search(r"`python demo.py (--optimizers=adamw --lr_adamw=\S+)`", page).group(1).split()
    s = demo.parse_args(command)
    assert s.optimizers == "adamw" and s.lr_adamw == lr
    committed = {(r["arm"], r["seed"]): r["config"] for r in Z.load() if (r["optimizer"], Z.lr_of(r)) == ("adamw", lr)}
    made = {(a, seed): dataclasses.asdict(demo.run_config(s, "adamw", a, seed, "shakespeare", "cpu"))
            for a in demo.ARMS for seed in demo.seeds_of(s.seeds)}
    assert sorted(made) == sorted(committed)
    for key, config in committed.items():  # flags the trainer has since dropped (bench, log_rows) were all off
        assert not any(v for k, v in config.items() if k not in made[key]), key
        assert made[key] == {k: v for k, v in config.items() if k in made[key]}, key


@pytest.mark.reports
def test_the_readme_quick_demo_counts_are_the_ten_fresh_seed_sets():
    """How often the quick preset's verdicts held on ten fresh seed sets, as the README states them, recomputed from
    research/runs/quick_demo with research.quick_demo's report."""
    from research import quick_demo
    page = " ".join(_first_page().split())
    m = re.search(r"On ten fresh seed sets .*?: Tiger \"yes\" in (\d+), AdamW \"no\" in (\d+), \"can't tell\" in (\d+)",
                  page)
    assert m, "the README's quick-demo counts"
    _, counts = quick_demo.report(quick_demo.load())
    assert len(quick_demo.SETS) == 10
    assert [int(g) for g in m.groups()] == [counts["tiger_yes"], counts["adamw_no"], 10 - counts["adamw_no"]]
