"""optim.py: Tiger and LAMB step exactly as their references say, and their steps are RELATIVE to each weight's
size where AdamW's and Signum's are ABSOLUTE. That difference is what lesson 04 and appendix B are about; these tests
pin it down.

Everything here is one step on a small tensor, or a tiny model for a few steps: seconds of CPU."""
import math

import pytest
import torch

from optim import LAMB_BETAS, LAMB_EPS, TIGER_BETA, Lamb, Tiger, make_optimizer, relative_step_budget
from helpers import TINY, config, run


def one_step(opt_class, w, g, **kw):
    """A copy of w after one step of opt_class with gradient g (kw: the optimizer's and the group's settings)."""
    p = torch.nn.Parameter(w.clone())
    group = {k: kw.pop(k) for k in ("kind",) if k in kw}
    opt = opt_class([dict(params=[p], **group)], **kw)
    p.grad = g.clone()
    opt.step()
    return p.detach()


def rms(x, **kw):
    return x.pow(2).mean(**kw).sqrt()


W = torch.tensor([[0.5, -1.0, 2.0], [0.1, 0.3, -0.2]], dtype=torch.float64)
G = torch.tensor([[1.0, 2.0, -3.0], [-0.5, 0.0, 4.0]], dtype=torch.float64)


def test_tiger_one_step_of_a_matrix_is_the_sign_of_the_momentum_times_lr_times_its_rms():
    lr, wd = 0.01, 0.01
    new = one_step(Tiger, W, G, lr=lr, weight_decay=wd)
    m = (1 - TIGER_BETA) * G  # m starts at 0: m = beta * 0 + (1 - beta) g
    by_hand = W - (torch.sign(m) + wd * W) * lr * rms(W)  # tiger.py: u = (sign(m_t) + d var) lr, lr = lr rms(var)
    torch.testing.assert_close(new, by_hand)


def test_tiger_moves_an_embedding_row_by_row():
    """tiger.py's `'embeddings' in var.name` rule: each row's step is lr x that row's own RMS, so a small row
    (a rare token's) moves by a small amount, a large row by a large one."""
    lr = 0.01
    new = one_step(Tiger, W, G, lr=lr, weight_decay=0.0, kind="rows")
    step = (W - new).abs()
    m = (1 - TIGER_BETA) * G
    expected = torch.where(m != 0, lr * rms(W, dim=-1, keepdim=True).expand_as(W), torch.zeros_like(W))
    torch.testing.assert_close(step, expected)
    assert step[0].max() > 5 * step[1].max()  # row 0 is ~6x the RMS of row 1, and so is its step


def test_tiger_moves_norm_gains_and_biases_by_half_lr_with_no_decay():
    v = torch.tensor([1.0, 1.0, 0.0, 3.0], dtype=torch.float64)
    g = torch.tensor([0.2, -0.1, 0.0, 5.0], dtype=torch.float64)
    new = one_step(Tiger, v, g, lr=0.01, weight_decay=0.5, kind="vector")
    torch.testing.assert_close(new, v - 0.01 * 0.5 * torch.sign(g))  # no 0.5 * v decay term: vectors don't decay


def test_tiger_momentum_remembers_past_gradients():
    """Two steps: the second step's sign is that of m2 = beta m1 + (1 - beta) g2 = (1 - beta)(beta + g2) after a
    first gradient of +1, so a gradient of -0.5 does not flip the step (against a remembered +1), -2 does."""
    p = torch.nn.Parameter(torch.ones(3, dtype=torch.float64))
    opt = Tiger([dict(params=[p], kind="vector")], lr=0.1, weight_decay=0.0)  # vectors: steps of lr x 0.5 = 0.05
    p.grad = torch.tensor([1.0, 1.0, 1.0], dtype=torch.float64)
    opt.step()
    p.grad = torch.tensor([-0.5, -2.0, 0.0], dtype=torch.float64)
    opt.step()
    torch.testing.assert_close(p.detach(), torch.tensor([0.9, 1.0, 0.9], dtype=torch.float64))


def test_lamb_one_step_is_algorithm_2_of_you_et_al():
    lr, wd, (b1, b2) = 0.01, 0.01, LAMB_BETAS
    new = one_step(Lamb, W, G, lr=lr, weight_decay=wd)
    m_hat = (1 - b1) * G / (1 - b1)  # bias-corrected first moment after one step: g itself
    v_hat = (1 - b2) * G * G / (1 - b2)  # and g^2
    r = m_hat / (v_hat.sqrt() + LAMB_EPS) + wd * W
    torch.testing.assert_close(new, W - lr * W.norm() / r.norm() * r)


def test_lamb_gives_a_zero_tensor_adams_plain_step_tiger_leaves_it_at_zero():
    """|W| = 0: LAMB's trust ratio is 1 by convention, so zero-initialised residual branches can grow; Tiger's
    step lr x RMS(0) = 0, so they never move (train.py refuses that combination)."""
    z = torch.zeros(2, 3, dtype=torch.float64)
    lamb = one_step(Lamb, z, G, lr=0.01, weight_decay=0.0)
    adam_dir = G / (G.abs() + LAMB_EPS)  # m_hat / sqrt(v_hat) after one step: sign(g) where g != 0
    torch.testing.assert_close(lamb, -0.01 * adam_dir)
    assert torch.equal(one_step(Tiger, z, G, lr=0.01, weight_decay=0.0), z)


@pytest.mark.parametrize("w_scale", [1e-3, 1.0, 1e3])
@pytest.mark.parametrize("g_scale", [1e-6, 1.0, 1e6])
def test_tiger_and_lamb_move_a_matrix_by_lr_of_its_own_size_whatever_the_scales(w_scale, g_scale):
    """|W_new - W| / |W| = lr for a matrix of any size and a gradient of any size: a relative step."""
    torch.manual_seed(0)
    w, g, lr = torch.randn(16, 8, dtype=torch.float64) * w_scale, torch.randn(16, 8, dtype=torch.float64) * g_scale, 0.003
    for opt_class in (Tiger, Lamb):
        new = one_step(opt_class, w, g, lr=lr, weight_decay=0.0)
        assert (new - w).norm() / w.norm() == pytest.approx(lr, rel=1e-6), opt_class.__name__


def test_adamw_moves_every_entry_by_about_lr_whatever_the_matrix_size():
    """AdamW's first step is lr x sign(g) per entry (m_hat / sqrt(v_hat) = g / |g|): an absolute step, so its
    size relative to W is lr / RMS(W), large for a small init and tiny for a large one."""
    torch.manual_seed(0)
    g, lr, relative = torch.randn(16, 8, dtype=torch.float64), 0.003, []
    for w_scale in (1e-3, 1.0, 1e3):
        w = torch.randn(16, 8, dtype=torch.float64) * w_scale
        p = torch.nn.Parameter(w.clone())
        opt = torch.optim.AdamW([p], lr=lr, weight_decay=0.0, eps=1e-12)
        p.grad = g.clone()
        opt.step()
        torch.testing.assert_close((p.detach() - w).abs(), torch.full_like(w, lr))
        relative.append(((p.detach() - w).norm() / w.norm()).item())
    assert relative[0] > 100 * relative[1] > 1e4 * relative[2]  # relative step ~ lr / RMS(W)


def test_a_relative_step_can_grow_a_tensor_at_most_by_one_plus_lr_per_step():
    assert relative_step_budget([1e-3] * 1200) == pytest.approx(math.exp(1200 * math.log1p(1e-3)))
    assert relative_step_budget([1e-3] * 1200) < math.exp(1.2)


def test_signum_moves_every_entry_of_every_matrix_by_exactly_lr_whatever_its_size():
    """Tiger's update with one fixed per-entry step: sign of the momentum times lr (plus decay lr x 0.01 x W), on a
    large matrix, a small one and the embedding alike; vectors by lr / 2, as under Tiger."""
    from tiedgpt import GPT
    c = config(optimizer="signum", vocab_size=100, lr=1e-2)
    model = GPT(c.model_config())
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = make_optimizer(model, c)
    for p in model.parameters():
        p.grad = torch.randn_like(p)
    opt.step()
    for name, p in model.named_parameters():
        step = (before[name] * (1 - 1e-2 * 0.01) - p.detach()).abs() if p.dim() >= 2 else (before[name] - p).abs()
        want = 1e-2 if p.dim() >= 2 else 0.5e-2
        assert torch.allclose(step, torch.full_like(step, want), rtol=1e-4), name


def test_make_optimizer_gives_each_tensor_its_references_rule():
    from tiedgpt import GPT
    for head in ("tied", "untied"):
        c = config(optimizer="tiger", head=head, vocab_size=100)
        model = GPT(c.model_config())
        kinds = {id(p): g["kind"] for g in make_optimizer(model, c).param_groups for p in g["params"]}
        assert kinds[id(model.transformer.wte.weight)] == "rows"  # the embedding (tied: also the head)
        assert kinds[id(model.transformer.h[0].attn.c_attn.weight)] == "matrix"
        assert kinds[id(model.transformer.ln_f.weight)] == "vector"
        if head == "untied":  # an output layer is a dense kernel in tiger.py's naming: one RMS for the matrix
            assert kinds[id(model.lm_head.weight)] == "matrix"
    lamb = make_optimizer(model, config(optimizer="lamb"))
    assert [g["weight_decay"] for g in lamb.param_groups] == [0.01, 0.0]  # LAMB's reference decay, vectors none
    assert isinstance(make_optimizer(model, config()), torch.optim.AdamW)


def test_tiger_by_default_starts_the_branches_near_zero_and_refuses_exact_zeros(data_dir):
    c = config(optimizer="tiger")
    assert c.zero_init_residual and 0 < c.residual_std <= 1e-3
    p = run([*TINY, "--optimizer=tiger", "--residual_std=0", "--out_dir="])
    assert p.returncode == 2 and "never move" in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_near_zero_branches_keep_the_fresh_model_close_to_the_2_gram_model():
    """residual_std = 1e-4 changes the first loss of a tied model by well under 1%: the same model with its
    branches set to exactly zero is the 2-gram model."""
    from tiedgpt import GPT, GPTConfig
    torch.manual_seed(0)
    model = GPT(GPTConfig(n_layer=2, n_embd=128, n_head=4, vocab_size=2000, block_size=32, emb_std=0.05,
                          residual_std=1e-4))
    branches = [m.weight for m in model.modules() if getattr(m, "RESIDUAL_OUT", False)]
    assert len(branches) == 4 and all(0 < w.std().item() < 2e-4 for w in branches)
    gen = torch.Generator().manual_seed(1)
    x, y = torch.randint(0, 2000, (4, 32), generator=gen), torch.randint(0, 2000, (4, 32), generator=gen)
    with torch.no_grad():
        near = model(x, y)[1].item()
        for w in branches:
            w.zero_()
        exact = model(x, y)[1].item()
    assert near == pytest.approx(exact, rel=0.01) and near != exact


# ----------------------------------------------------------------------------------------------------
# The absolute twins (optim.py, relative != 'all'): the same rules with each weight's RMS frozen at the first step.
# They are the controls of research/cause.py: only the step's relativity differs from Tiger and LAMB.

def _tiny_model(emb_std=0.02, head="ortho"):
    from tiedgpt import GPT, GPTConfig
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=50, block_size=8, n_layer=1, n_head=2, n_embd=16, head=head, emb_std=emb_std,
                         residual_std=1e-4))


def _steps(opt_name, relative, model, n=1, lr=0.01):
    """model's parameters after n steps of train.py's optimizer with a fixed random gradient; returns {name: tensor}."""
    from train import Config
    c = Config(optimizer=opt_name, relative=relative, lr=lr, out_dir="")
    opt = make_optimizer(model, c)
    g = torch.Generator().manual_seed(1)
    grads = {id(p): torch.randn(p.shape, generator=g) for p in model.parameters()}
    for _ in range(n):
        for p in model.parameters():
            p.grad = grads[id(p)].clone()
        opt.step()
    return {k: v.detach().clone() for k, v in model.named_parameters()}, opt


@pytest.mark.parametrize("opt_name", ["tiger", "lamb"])
def test_the_absolute_twin_takes_the_originals_first_step_on_every_matrix_but_the_embedding(opt_name):
    """At step 1 the twin's frozen scale IS the matrix's RMS, so every matrix but the embedding moves exactly as under
    the original (LAMB: to float rounding of |r| ~ sqrt(numel)); the embedding's scale is 0.02, its rows' RMS ~0.02."""
    before = {k: v.detach().clone() for k, v in _tiny_model().named_parameters()}
    orig, _ = _steps(opt_name, "all", _tiny_model())
    twin, _ = _steps(opt_name, "none", _tiny_model())
    for name, w in orig.items():
        if before[name].dim() < 2 or "wte" in name:
            continue
        d_orig, d_twin = w - before[name], twin[name] - before[name]
        if opt_name == "tiger":
            torch.testing.assert_close(d_twin, d_orig)
        else:  # LAMB's |r| is sqrt(numel) only up to eps and the decay term
            assert (d_twin - d_orig).norm() < 0.05 * d_orig.norm(), name
    step_orig = (orig["transformer.wte.weight"] - before["transformer.wte.weight"]).pow(2).mean().sqrt()
    step_twin = (twin["transformer.wte.weight"] - before["transformer.wte.weight"]).pow(2).mean().sqrt()
    assert step_twin == pytest.approx(step_orig.item(), rel=0.15)


@pytest.mark.parametrize("opt_name", ["tiger", "lamb"])
def test_the_twins_step_does_not_grow_with_the_weight_the_originals_does(opt_name):
    """Scale every matrix by 10 after the first step: the original's second step is ~10x larger, the twin's is not."""
    sizes = {}
    for relative in ("all", "none"):
        model = _tiny_model()
        _, opt = _steps(opt_name, relative, model, n=1)
        with torch.no_grad():
            for p in model.parameters():
                if p.dim() >= 2:
                    p.mul_(10)
        before = model.transformer.h[0].mlp.c_fc.weight.detach().clone()
        for p in model.parameters():
            p.grad = torch.ones_like(p)
        opt.step()
        sizes[relative] = (model.transformer.h[0].mlp.c_fc.weight.detach() - before).abs().mean().item()
    assert sizes["all"] > 5 * sizes["none"]


def test_lambs_twin_is_adamw_with_lambs_betas_eps_and_decay_at_lr_times_the_frozen_scale():
    p = torch.nn.Parameter(W.clone())
    q = torch.nn.Parameter(W.clone())
    s = (W.pow(2).mean().sqrt()).item()
    twin = Lamb([dict(params=[p], relative=False, weight_decay=0.01)], lr=0.01)
    adamw = torch.optim.AdamW([q], lr=0.01 * s, betas=LAMB_BETAS, eps=LAMB_EPS, weight_decay=0.01)
    for t in range(3):
        g = G * (t + 1) - W
        p.grad, q.grad = g.clone(), g.clone()
        twin.step()
        adamw.step()
        torch.testing.assert_close(p.detach(), q.detach())


def test_the_twins_frozen_scale_travels_with_the_optimizer_state():
    """A resumed twin must step by the scale frozen at the run's FIRST step, not by the RMS of the weights it resumes."""
    model = _tiny_model()
    _, opt = _steps("tiger", "none", model, n=2)
    from train import Config
    again = make_optimizer(model, Config(optimizer="tiger", relative="none", lr=0.01, out_dir=""))
    again.load_state_dict(opt.state_dict())
    w = model.transformer.h[0].mlp.c_fc.weight
    assert again.state[w]["scale"].item() == opt.state[w]["scale"].item()


@pytest.mark.parametrize("kw", [dict(optimizer="adamw", relative="none"), dict(optimizer="lamb", relative="body"),
                                dict(optimizer="tiger", relative="half")])
def test_a_relative_setting_an_optimizer_does_not_have_is_refused(kw):
    from train import Config
    with pytest.raises(ValueError, match="relative"):
        Config(**kw)


