"""research/probes.py, what appendix B measures beyond the loss (its section 10): how far E's rows turn from their
init, how much of the fresh tied model's 2-gram self-logit is left, what the residual branches add, and the operator
norm of a head's matrix. Lab tests: pytest -m lab."""
import math

import pytest
import torch

from helpers import config
from research.probes import branch_ratio, emb_turn, head_scale, row_probe, self_logit

pytestmark = pytest.mark.lab


def quiet(*_):
    pass


def _tiny_model(emb_std=0.02, head="ortho"):
    from tiedgpt import GPT, GPTConfig
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=50, block_size=8, n_layer=1, n_head=2, n_embd=16, head=head, emb_std=emb_std,
                         residual_std=1e-4))


@pytest.mark.parametrize("opt", ["tiger", "lamb"])
def test_a_resumed_run_measures_its_rows_from_the_init_it_started_from(data_dir, tmp_path, opt):
    """row_probe rebuilds E's init from the seed, as train.setup builds the model: a run stopped at its step-4
    checkpoint and resumed logs the uninterrupted run's losses and turns to the bit."""
    from train import train
    kw = dict(optimizer=opt, lr=0.01, eval_interval=4, lr_decay_iters=8)
    probe = lambda c: [row_probe(c)]  # noqa: E731
    whole = train(config(max_iters=8, out_dir="", **kw), progress=False, log=quiet, probes=probe(config(**kw)))
    c = config(max_iters=4, out_dir=str(tmp_path), **kw)
    train(c, progress=False, log=quiet, probes=probe(c))
    c = config(max_iters=8, out_dir=str(tmp_path), resume=True, **kw)
    resumed = train(c, progress=False, log=quiet, probes=probe(c))
    assert [(r.get("train_loss"), r.get("emb_turn")) for r in whole] == \
           [(r.get("train_loss"), r.get("emb_turn")) for r in resumed]
    assert whole[7]["emb_turn"] > 0 and whole[0]["train_loss"] != whole[7]["train_loss"]


def test_emb_turn_is_the_mean_angle_of_each_row_from_its_init():
    E0 = torch.tensor([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0], [3.0, 0.0, 0.0]])
    E = torch.tensor([[0.0, 5.0, 0.0], [0.0, 0.1, 0.0], [1.0, 1.0, 0.0]])  # turned 90 degrees; shrunk only; 45 degrees
    assert emb_turn(E, E0) == pytest.approx((math.pi / 2 + 0 + math.pi / 4) / 3)
    assert emb_turn(E0, E0) == 0.0 and emb_turn(-E0, E0) == pytest.approx(math.pi)


def test_the_self_logit_of_a_fresh_model_is_lesson_02s_2_gram_score():
    """The fresh tied model scores its input token ~ d sigma above the mean (here 64 x 0.1 = 6.4); logn ~ ln n;
    ortho's rotation after the norm leaves no self-logit."""
    from tiedgpt import GPT, GPTConfig
    torch.manual_seed(0)
    x = torch.randint(0, 500, (8, 33))
    got = {}
    for head in ("tied", "logn", "ortho"):
        torch.manual_seed(0)
        model = GPT(GPTConfig(head=head, vocab_size=500, n_embd=64, n_head=2, n_layer=1, block_size=32, emb_std=0.1))
        got[head] = self_logit(model, [x])
    assert got["tied"] == pytest.approx(6.4, rel=0.05)
    assert got["logn"] == pytest.approx(math.log(500), rel=0.05)
    assert abs(got["ortho"]) < 0.5


def test_under_tiger_no_row_turns_faster_than_the_relative_steps_budget(data_dir):
    """Under Tiger a row moves by lr_t |w_i| a step, so the mean turn after t steps is at most the sum of lr_t so far;
    the self-logit of the fresh tied model starts high and is logged beside it."""
    from train import train
    c = config(optimizer="tiger", lr=0.05, max_iters=12, eval_interval=12, out_dir="")
    r = {row["step"]: row for row in train(c, progress=False, log=quiet, probes=[row_probe(c)])}
    budget = 0.0
    for s in range(12):
        budget += r[s]["lr"]  # the row of step s is measured after that step's update
        assert 0 < r[s]["emb_turn"] <= budget and r[s]["branch_ratio"] >= 0
    assert r[11]["emb_turn"] > 0.3 * budget  # and it does turn: the bound is not vacuous
    assert r[0]["self_logit"] > 2


def test_turning_the_rows_of_a_fresh_tied_model_leaves_its_self_logit():
    """Why emb_turn can't be how the 2-gram start is unlearned: with the branches at zero the final norm sees w_i itself,
    and z_ii = LN(w_i) . w_i = g d std(w_i), whatever w_i's direction. Replace every row by a random one of the same
    length (each turns by ~90 degrees) and the self-logit stays ~ln n."""
    from tiedgpt import GPT, GPTConfig
    torch.manual_seed(0)
    model = GPT(GPTConfig(head="logn", vocab_size=500, n_embd=64, n_head=2, n_layer=1, block_size=32))
    x = [torch.randint(0, 500, (8, 33))]
    before = self_logit(model, x)
    E = model.transformer.wte.weight
    E0 = E.detach().clone()
    with torch.no_grad():
        new = torch.randn_like(E)
        E.copy_(new / new.norm(dim=1, keepdim=True) * E0.norm(dim=1, keepdim=True))
    assert emb_turn(E, E0) > 1.4  # ~pi/2: every row turned
    assert self_logit(model, x) == pytest.approx(before, rel=0.05) and before == pytest.approx(math.log(500), rel=0.05)


def test_branch_ratio_is_zero_for_the_2_gram_model_and_large_for_nanogpts_init():
    """branch_ratio: what the residual branches add to the final norm's input, against the embedding. Exactly 0 with
    zero-initialised branches (the fresh model IS the 2-gram model); with nanoGPT's init (every branch weight at std
    0.02, its last layer at 0.02 / sqrt(2L)) and logn's small embedding, they already dominate at step 0, as issue 20's
    pilot found."""
    from tiedgpt import GPT, GPTConfig
    x = [torch.randint(0, 500, (4, 33))]
    ratios = {}
    for zero in (True, False):
        torch.manual_seed(0)
        cfg = GPTConfig(head="logn", vocab_size=500, n_embd=256, n_head=4, n_layer=2, block_size=32,
                        zero_init_residual=zero)  # logn's sigma = ln(500) / 256 = 0.024
        ratios[zero] = branch_ratio(GPT(cfg), x)
    assert ratios[True] == 0.0 and ratios[False] > 1


def test_head_scale_gives_the_operator_norm_of_ortho_s_matrix_and_nothing_for_parameter_free_heads():
    model = _tiny_model(head="ortho")
    hs = head_scale(model)
    assert hs["head_opnorm"] == pytest.approx(1.0, abs=1e-5)  # orthogonal at init: every singular value is 1
    with torch.no_grad():
        model.head.proj.weight[:, 0] *= 3  # stretch one direction: |P|_2 = 3, the Frobenius norm hardly moves
    assert head_scale(model)["head_opnorm"] == pytest.approx(3.0, rel=1e-4)
    assert head_scale(_tiny_model(head="shuffle")) == {}
