"""What tiedgpt.py promises, one test per idea. Read the names top to bottom: they are the lesson."""
import math
import os

import pytest
import torch
import torch.nn.functional as F

from fused_loss import FusedLoss
from tiedgpt import (HEADS, NORMS, GPT, GPTConfig, predicted_initial_loss, refined_initial_loss,
                     repeat_fraction, seed_initial_loss)

N = 50257


def tiny(head="tied", **kw):
    kw = {**dict(n_layer=2, n_head=2, n_embd=32, block_size=16, vocab_size=97), **kw}
    return GPT(GPTConfig(head=head, **kw))


def batch(tokens, B, T, seed=0):
    g = torch.Generator().manual_seed(seed)
    ix = torch.randint(len(tokens) - T - 1, (B,), generator=g)
    t = torch.as_tensor(tokens)
    x = torch.stack([t[i:i + T] for i in ix])
    y = torch.stack([t[i + 1:i + T + 1] for i in ix])
    return x, y


# --- tying --------------------------------------------------------------------------------------------

def test_tied_head_shares_storage():
    m = tiny("tied")
    assert m.lm_head.weight is m.transformer.wte.weight
    assert m.lm_head.weight.data_ptr() == m.transformer.wte.weight.data_ptr()


def test_tied_gradient_sums_input_and_output_uses():
    """One tensor, one .grad: it must equal the embedding-lookup gradient plus the output-head gradient,
    which we compute separately on an untied twin with identical weights."""
    torch.manual_seed(0)
    tied = tiny("tied", zero_init_residual=False)
    twin = tiny("untied", zero_init_residual=False)
    sd = tied.state_dict()
    twin.load_state_dict({**sd, "lm_head.weight": sd["transformer.wte.weight"].clone()})
    x = torch.randint(0, 97, (4, 16))
    y = torch.randint(0, 97, (4, 16))
    tied(x, y)[1].backward()
    twin(x, y)[1].backward()
    both = twin.transformer.wte.weight.grad + twin.lm_head.weight.grad
    assert twin.transformer.wte.weight.grad.abs().sum() > 0 and twin.lm_head.weight.grad.abs().sum() > 0
    torch.testing.assert_close(tied.transformer.wte.weight.grad, both, rtol=1e-5, atol=1e-7)


def test_untied_model_has_exactly_n_times_d_more_parameters():
    cfg = dict(n_embd=64, vocab_size=500)
    extra = tiny("untied", **cfg).get_num_params(False) - tiny("tied", **cfg).get_num_params(False)
    assert extra == 500 * 64


def test_non_embedding_count_leaves_out_the_tied_table():
    m = tiny("tied")
    assert m.get_num_params(True) == m.get_num_params(False) - 97 * 32


# --- every head ------------------------------------------------------------------------------------

@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("head", HEADS)
def test_every_head_returns_logits_of_the_right_shape(head, norm):
    m = tiny(head, norm=norm)
    x = torch.randint(0, 97, (3, 16))
    logits, loss = m(x, x)  # nanoGPT's contract: the logits and the textbook loss
    assert logits.shape == (3, 16, 97) and loss.ndim == 0 and torch.isfinite(loss)
    assert torch.equal(loss, F.cross_entropy(logits.view(-1, 97), x.view(-1)))
    logits2, loss2 = m(x, x, return_logits=False)  # the same loss, the logits left out of what is handed back
    assert logits2 is None and torch.equal(loss2, loss)
    logits, loss = FusedLoss(m)(x, x)  # train.py's: the same loss without building the logits
    assert logits is None and torch.isfinite(loss)
    logits, loss = m(x)  # inference: last position only
    assert logits.shape == (3, 1, 97) and loss is None


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("head", HEADS)
def test_every_head_trains_a_step(head, norm):
    torch.manual_seed(0)
    m = tiny(head, norm=norm)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    x = torch.randint(0, 97, (4, 16))
    before = m(x, x)[1].item()
    for _ in range(3):
        opt.zero_grad()
        m(x, x)[1].backward()
        opt.step()
    assert m(x, x)[1].item() < before


@pytest.mark.parametrize("head", ["shuffle", "channel"])
def test_shuffles_are_parameter_free_permutations(head):
    m, ref = tiny(head), tiny("tied")
    assert m.get_num_params(False) == ref.get_num_params(False)
    d = 32
    perm = m.head(torch.arange(d, dtype=torch.float32)).long()
    assert sorted(perm.tolist()) == list(range(d)) and perm.tolist() != list(range(d))
    h = torch.randn(5, d)
    torch.testing.assert_close(m.head(h), h[:, perm])  # it acts on any vector as that permutation


def test_half_swap_is_the_two_halves_exchanged():
    h = torch.arange(6.0)
    assert tiny("shuffle", n_embd=6, n_head=1, pos="none").head(h).tolist() == [3, 4, 5, 0, 1, 2]


@pytest.mark.parametrize("head, spread", [("shuffle", "sqrt(2/d)"), ("channel", "sqrt(1/d)")])
def test_shuffled_vector_is_nearly_orthogonal_to_itself(head, spread):
    """cos(S(w), w) has mean ~0 and spread sqrt(2/d) for the half swap (each pair counted twice) and
    sqrt(1/d) for the channel shuffle (long cycles): at d = 1024 it stays well under 0.2."""
    d = 1024
    m = tiny(head, n_embd=d, n_head=4)
    w = torch.randn(500, d, generator=torch.Generator().manual_seed(0))
    cos = torch.nn.functional.cosine_similarity(m.head(w), w, dim=-1)
    assert cos.abs().max() < 0.2 and cos.mean().abs() < 0.01
    assert cos.std().item() == pytest.approx(eval(spread, {"sqrt": math.sqrt, "d": d}), rel=0.15)


def test_ortho_projection_is_orthogonal_at_init():
    P = tiny("ortho", n_embd=64).head.proj.weight
    torch.testing.assert_close(P @ P.T, torch.eye(64), atol=1e-5, rtol=0)


def test_ortho_and_bert_heads_add_their_parameters():
    base = tiny("tied", n_embd=64).get_num_params(False)
    assert tiny("ortho", n_embd=64).get_num_params(False) - base == 64 * 64
    assert tiny("bert", n_embd=64).get_num_params(False) - base == 64 * 64 + 64 + 2 * 64


def test_logn_really_initialises_at_ln_n_over_d():
    d, n = 512, N
    m = GPT(GPTConfig(head="logn", n_layer=1, n_embd=d, vocab_size=n))
    assert m.transformer.wte.weight.std().item() == pytest.approx(math.log(n) / d, rel=0.01)


def test_emb_std_default_is_inverse_sqrt_d_and_can_be_overridden():
    assert GPT(GPTConfig(n_layer=1, n_embd=256)).transformer.wte.weight.std().item() == pytest.approx(
        1 / 16, rel=0.01)
    assert GPT(GPTConfig(n_layer=1, n_embd=256, emb_std=0.02)).transformer.wte.weight.std().item() == \
        pytest.approx(0.02, rel=0.01)


def test_scale_head_turns_the_self_logit_into_ln_n():
    m = GPT(GPTConfig(head="scale", n_layer=1, n_embd=256, vocab_size=N))
    w = m.transformer.wte.weight[:50]
    with torch.no_grad():
        self_logits = m.logits(m.transformer.ln_f(w)).diagonal()  # logit of token i for input i
    eps_shrink = 1 / math.sqrt(1 + 1e-5 * 256)  # LayerNorm's eps, see refined_initial_loss
    assert self_logits.mean().item() == pytest.approx(math.log(N) * eps_shrink, rel=0.02)


def test_reinitialising_after_tying_reinitialises_both():
    m = tiny("tied")
    torch.nn.init.zeros_(m.lm_head.weight)
    assert m.transformer.wte.weight.abs().sum() == 0


@pytest.mark.parametrize("head", HEADS)
def test_fused_head_and_loss_match_the_textbook_path(head):
    """FusedLoss (LinearCrossEntropy) gives F.cross_entropy(h W^T)'s loss and gradients, ignored targets included."""
    torch.manual_seed(0)
    fused = tiny(head, zero_init_residual=False, vocab_size=1000)
    plain = tiny(head, zero_init_residual=False, vocab_size=1000)
    plain.load_state_dict(fused.state_dict())
    x, y = torch.randint(0, 1000, (4, 16)), torch.randint(0, 1000, (4, 16))
    y[0, :5] = -1
    lf, lp = FusedLoss(fused)(x, y)[1], plain(x, y)[1]
    lf.backward()
    lp.backward()
    torch.testing.assert_close(lf, lp, rtol=1e-6, atol=1e-6)
    for (name, a), b in zip(fused.named_parameters(), plain.parameters()):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-7, msg=name)
    with torch.no_grad():  # evaluation takes the same path without computing gradients
        torch.testing.assert_close(FusedLoss(fused)(x, y)[1], lp, rtol=1e-6, atol=1e-6)


def test_fused_loss_gives_the_same_answer_in_any_number_of_chunks(monkeypatch):
    """The chunk size is a memory knob only: 1 chunk, 7 uneven chunks and 1-row chunks agree."""
    from fused_loss import LinearCrossEntropy
    torch.manual_seed(0)
    h, w = torch.randn(50, 8, dtype=torch.float64), torch.randn(300, 8, dtype=torch.float64)
    t = torch.randint(0, 300, (50,))
    t[[3, 17, 49]] = -1  # ignored targets in several chunks
    results = []
    for rows in (50, 8, 1):
        monkeypatch.setattr(LinearCrossEntropy, "CHUNK_ELEMENTS", rows * 300)
        hh, ww = h.clone().requires_grad_(), w.clone().requires_grad_()
        LinearCrossEntropy.apply(hh, ww, t, True).backward()
        results.append((hh.grad, ww.grad))
    ref = torch.nn.functional.cross_entropy(h @ w.T, t, ignore_index=-1)
    for gh, gw in results:
        hh, ww = h.clone().requires_grad_(), w.clone().requires_grad_()
        torch.nn.functional.cross_entropy(hh @ ww.T, t, ignore_index=-1).backward()
        torch.testing.assert_close(gh, hh.grad)
        torch.testing.assert_close(gw, ww.grad)
    assert torch.isfinite(ref)


def test_fused_loss_under_bf16_autocast_matches_the_textbook_path():
    """Under autocast the fused head runs its matmuls in bf16 and the softmax in fp32, as autocast would."""
    torch.manual_seed(0)
    fused = tiny("tied", vocab_size=1000)
    plain = tiny("tied", vocab_size=1000)
    plain.load_state_dict(fused.state_dict())
    x, y = torch.randint(0, 1000, (4, 16)), torch.randint(0, 1000, (4, 16))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        lf, lp = FusedLoss(fused)(x, y)[1], plain(x, y)[1]
    lf.backward()
    lp.backward()
    assert lf.dtype == torch.float32 and fused.lm_head.weight.grad.dtype == torch.float32
    torch.testing.assert_close(lf, lp, rtol=1e-2, atol=1e-2)
    g1, g2 = fused.lm_head.weight.grad, plain.lm_head.weight.grad
    assert (g1 - g2).norm() / g2.norm() < 0.03


def test_fused_loss_keeps_a_short_training_curve_unchanged():
    curves = []
    for fused_loss in (True, False):
        torch.manual_seed(0)
        m = tiny("tied", vocab_size=500)
        loss_of = FusedLoss(m) if fused_loss else m
        opt = torch.optim.AdamW(m.parameters(), lr=3e-3)
        g = torch.Generator().manual_seed(1)
        curve = []
        for _ in range(20):
            x, y = torch.randint(0, 500, (4, 16), generator=g), torch.randint(0, 500, (4, 16), generator=g)
            loss = loss_of(x, y)[1]
            opt.zero_grad()
            loss.backward()
            opt.step()
            curve.append(loss.item())
        curves.append(curve)
    assert curves[0] == pytest.approx(curves[1], rel=1e-4)


# --- bad configurations are refused ---------------------------------------------------------------

@pytest.mark.parametrize("kw, words", [
    (dict(head="nope"), "choose one of: tied, untied"),
    (dict(head="shuffle", n_embd=33, n_head=1, pos="none"), "even n_embd"),
    (dict(head="channel", n_embd=30, n_head=2, pos="none", channel_groups=4), "divisible by channel_groups"),
    (dict(n_embd=30, n_head=4), "divisible by n_head"),
    (dict(emb_std=-1.0), "emb_std must be > 0"),
])
def test_impossible_configurations_are_refused_with_the_valid_choices(kw, words):
    with pytest.raises(ValueError, match=words):
        GPTConfig(**kw)


# --- the premise: at init the network is a 2-gram model -------------------------------------------

def test_fresh_model_is_a_two_gram_model():
    """Zero-initialised residual branches + rotary positions: the logits at a position depend on the
    current token alone, and equal the tied head applied to LayerNorm(w_i)."""
    m = tiny("tied", n_layer=3)
    x = torch.randint(0, 97, (2, 16))
    logits = m.logits(m.hidden(x))
    w = m.transformer.wte.weight
    expected = torch.nn.functional.layer_norm(w[x], (32,), eps=m.config.norm_eps) @ w.T
    torch.testing.assert_close(logits, expected, rtol=1e-5, atol=1e-5)


def test_learned_positions_break_the_two_gram_premise():
    m = tiny("tied", pos="learned")
    x = torch.full((1, 16), 5)  # the same token everywhere
    logits = m.logits(m.hidden(x))
    assert (logits[0, 0] - logits[0, 1]).abs().max() > 1e-3


def test_seed_prediction_of_the_classic_example():
    """sigma = 0.02, d = 768, n = 50257: log(e^{15.36} + n - 1) ~ 15.4 against ln n ~ 10.8."""
    assert seed_initial_loss(N, 768, 0.02) == pytest.approx(15.37, abs=0.01)
    assert math.log(N) == pytest.approx(10.82, abs=0.01)


def test_refined_prediction_reduces_to_the_seed_when_logit_noise_and_repeats_vanish():
    assert refined_initial_loss(N, 768, 0.02) > seed_initial_loss(N, 768, 0.02)  # the e^{d sigma^2/2}
    assert refined_initial_loss(N, 768, 0.02, r=0.02) < refined_initial_loss(N, 768, 0.02)
    tiny_sigma = 1e-4
    assert refined_initial_loss(N, 768, tiny_sigma) == pytest.approx(seed_initial_loss(N, 768, tiny_sigma))


def test_repeat_fraction_counts_targets_equal_to_their_input():
    assert repeat_fraction([1, 1, 2, 3, 3, 3]) == pytest.approx(3 / 5)


@pytest.mark.corpus
@pytest.mark.parametrize("norm", NORMS)
# d = 768 (GPT-2 small's width) costs ~4 s a case: with -m slow; the default run checks the theory at 256 and 512
@pytest.mark.parametrize("d", [256, 512, pytest.param(768, marks=pytest.mark.slow)])
@pytest.mark.parametrize("sigma", ["inv_sqrt_d", 0.02])
def test_initial_loss_matches_two_gram_theory(corpus_tokens, d, sigma, norm):
    """The tied model's first loss on real text, within 2% of log(e^{d s} + (n-1) e^{d s^2/2}) - r d s,
    with LayerNorm (GPT-2) or RMSNorm (LLaMA and most tied models today) before the head."""
    sigma = d ** -0.5 if sigma == "inv_sqrt_d" else sigma
    torch.manual_seed(d)
    m = GPT(GPTConfig(head="tied", n_layer=1, n_embd=d, emb_std=sigma, block_size=128, norm=norm))
    # 4 x 128 tokens: the mean loss's noise (~0.5%) sits well inside the 2% (the logits, 512 x 50257, are the cost)
    x, y = batch(corpus_tokens, 4, 128, seed=d)
    r = (x == y).float().mean().item()
    with torch.no_grad():
        loss = m(x, y, return_logits=False)[1].item()
    predicted = predicted_initial_loss(m.config, r)
    assert loss == pytest.approx(predicted, rel=0.02), (loss, predicted)
    # and it is the seed's story: far above ln n whenever d sigma >> ln n
    if d * sigma > 2 * math.log(N):
        assert loss > math.log(N) + 4


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("head", HEADS)
def test_initial_loss_of_every_head_matches_its_own_prediction(generated_tokens, head, norm):
    """On the generated corpus (tests/helpers.py), so every case runs on every machine, offline."""
    d = 256
    torch.manual_seed(1)
    m = GPT(GPTConfig(head=head, n_layer=1, n_embd=d, block_size=128, norm=norm))
    x, y = batch(generated_tokens, 4, 128, seed=1)  # 512 tokens, as above
    r = (x == y).float().mean().item()
    # the predictions of the heads that hide the self-logit treat it as one random logit among n, which needs few
    # tokens equal to their input (pydoc's topics, the offline fallback of the default corpus, repeat ~15%)
    assert r < 0.05
    with torch.no_grad():
        loss = m(x, y, return_logits=False)[1].item()
    assert loss == pytest.approx(predicted_initial_loss(m.config, r), rel=0.02)
    if head not in ("tied", "softcap"):  # every fix starts within ln 2 + a little of the uniform ln n
        assert loss < math.log(2 * N) + 0.2


# --- it learns and it samples ---------------------------------------------------------------------

def test_tiny_model_overfits_one_batch():
    torch.manual_seed(0)
    m = tiny("tied", n_layer=2, n_embd=64, vocab_size=97)
    x = torch.randint(0, 97, (4, 16))
    y = torch.randint(0, 97, (4, 16))
    opt = torch.optim.AdamW(m.parameters(), lr=3e-3)
    for _ in range(300):
        opt.zero_grad()
        loss = m(x, y)[1]
        loss.backward()
        opt.step()
    assert loss.item() < 0.1


def test_generate_returns_tokens_in_range():
    torch.manual_seed(0)
    m = tiny("ortho")
    out = m.generate(torch.zeros(2, 3, dtype=torch.long), max_new_tokens=20, temperature=0.8, top_k=5)
    assert out.shape == (2, 23)
    assert out.min() >= 0 and out.max() < 97
    assert (out[:, :3] == 0).all()  # the prompt is kept


def test_sequence_longer_than_block_size_is_refused():
    with pytest.raises(ValueError, match="exceeds block_size"):
        tiny()(torch.zeros(1, 17, dtype=torch.long))


def test_the_readme_model_snippet_runs_as_pasted():
    """The README's first code block is what a student pastes first: it must run, and give real logits."""
    import re
    from helpers import ROOT
    with open(os.path.join(ROOT, "README.md")) as f:
        block = re.search(r"## The model\s+```python\n(.*?)```", f.read(), re.S).group(1)
    scope = {}
    exec(block, scope)
    logits, loss = scope["logits"], scope["loss"]
    assert logits is not None and logits.shape[-1] == scope["model"].config.vocab_size
    assert torch.isfinite(loss)



# --- the theory against runs nobody here made, and the variants people use today -------------------------------

def test_the_modded_nanogpt_record_first_loss_is_predicted():
    """modded-nanogpt's 2024-10-14_ModernArch record (KellerJordan/modded-nanogpt, records/track_1_short/
    2024-10-14_ModernArch): tied, zero-initialised output projections, rotary, RMSNorm (F.rms_norm, eps = float32's
    machine epsilon) before the head, d = 768, n = 50304, and no explicit init of the shared matrix, so it keeps
    nn.Linear's U(+-1/sqrt(d)): sigma = 1/sqrt(3d). Its log: `step:0/5100 val_loss:16.0058` (FineWeb val)."""
    c = GPTConfig(head="tied", norm="rmsnorm", n_embd=768, vocab_size=50304, emb_std=(3 * 768) ** -0.5,
                  norm_eps=torch.finfo(torch.float32).eps)
    assert predicted_initial_loss(c) == pytest.approx(16.0058, rel=5e-4)
    # with our default eps = 1e-5 the prediction would be ~1% lower: at sigma ~ 0.02 eps is 2% of sigma^2
    import dataclasses
    assert predicted_initial_loss(dataclasses.replace(c, norm_eps=1e-5)) == pytest.approx(16.0058 * 0.989, rel=2e-3)


def test_a_zero_initialised_untied_head_starts_at_exactly_ln_n():
    """modded-nanogpt's 2024-11-03_UntieEmbed record zero-initialises its untied head: every logit is 0, the loss is
    ln n exactly. Its log: `step:0/4578 val_loss:10.8258` = ln 50304."""
    assert math.log(50304) == pytest.approx(10.8258, abs=5e-5)
    m = GPT(GPTConfig(head="untied", n_layer=1, n_embd=32, vocab_size=50304, block_size=16))
    torch.nn.init.zeros_(m.lm_head.weight)
    x = torch.randint(0, 50304, (2, 16))
    assert m(x, x)[1].item() == pytest.approx(math.log(50304), abs=1e-4)


def test_rmsnorm_and_layernorm_differ_only_by_the_mean_at_init():
    """LayerNorm removes w's mean (one of d directions); RMSNorm doesn't. Their outputs for a fresh row agree
    to ~ 1/sqrt(d) in direction, and the LayerNorm output sums to zero."""
    torch.manual_seed(0)
    w = torch.randn(1000, 768) * 0.02
    ln = torch.nn.functional.layer_norm(w, (768,), eps=1e-5)
    rms = torch.nn.functional.rms_norm(w, (768,), eps=1e-5)
    cos = torch.nn.functional.cosine_similarity(ln, rms, dim=-1)
    assert ln.sum(-1).abs().max() < 1e-3 and rms.sum(-1).abs().mean() > 1.0
    assert (1 - cos).mean().item() == pytest.approx(1 / (2 * 768), rel=0.2)  # 1 - cos ~ (mean^2/rms^2)/2 ~ 1/(2d)


def test_the_self_logit_spreads_by_one_over_sqrt_2d_after_layernorm():
    """Lesson 02's spread: after LayerNorm the self-logit a = h . w = sqrt(d) |w - mean| has relative sd
    1/sqrt(2d) (|w|^2 has relative sd sqrt(2/d); the square root halves it)."""
    d = 768
    torch.manual_seed(0)
    w = torch.randn(20000, d) * 0.02
    a = (torch.nn.functional.layer_norm(w, (d,), eps=0.0) * w).sum(-1)
    assert (a.std() / a.mean()).item() == pytest.approx(1 / math.sqrt(2 * d), rel=0.05)


@pytest.mark.corpus
@pytest.mark.parametrize("cap", [3.0, 10.0, 30.0])
def test_a_softcap_bounds_the_self_logit_but_removes_the_blowup_only_when_small(corpus_tokens, cap):
    """c tanh(d sigma / c): at c = 30 the cap is nearly idle (d sigma = 16 -> 14.6), at c = 3 the self-logit can't
    beat ln n and the first loss is near the uniform ln n."""
    torch.manual_seed(2)
    m = GPT(GPTConfig(head="softcap", softcap=cap, n_layer=1, n_embd=256, block_size=128))
    x, y = batch(corpus_tokens, 8, 128, seed=2)
    with torch.no_grad():
        logits, loss = m(x, y)
    assert logits.abs().max().item() < cap
    r = (x == y).float().mean().item()
    assert loss.item() == pytest.approx(predicted_initial_loss(m.config, r), rel=0.02)
    v = m.config.n_embd * m.config.sigma ** 2  # the other logits' variance: untied's first loss is ln n + v/2
    if cap <= math.log(N) / 3:  # the capped self-logit is small next to ln n: as good as untying
        assert loss.item() < math.log(N) + v / 2 + 0.05
    if cap >= m.config.n_embd * m.config.sigma:  # the cap is barely engaged: still the tied blow-up, which lives
        # where the next token is not the current one (the self-logit *rewards* a repeat, so on a repetitive
        # corpus such as the offline fallback the mean loss hides it)
        per_token = torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1), reduction="none")
        assert per_token[(x != y).view(-1)].mean().item() > math.log(N) + 2


def test_the_channel_shuffle_is_its_own_inverse_when_groups_is_sqrt_d():
    """The ShuffleNet shuffle is a transpose of a g x (d/g) grid: with g = sqrt(d) the grid is square and
    transposing twice is the identity, so every cycle has length 1 or 2, like the half swap."""
    from tiedgpt import ChannelShuffle
    for d, g in [(16, 4), (64, 8), (256, 16)]:
        shuffle = ChannelShuffle(GPTConfig(head="channel", n_embd=d, channel_groups=g))
        x = torch.arange(d, dtype=torch.float32)
        assert torch.equal(shuffle(shuffle(x)), x)
    perm = ChannelShuffle(GPTConfig(head="channel", n_embd=256, channel_groups=4))(torch.arange(256.0)).long()
    cycles, seen = [], set()
    for i in range(256):
        if i in seen:
            continue
        j, n = i, 0
        while j not in seen:
            seen.add(j)
            j, n = perm[j].item(), n + 1
        cycles.append(n)
    assert cycles.count(2) == 6  # d = 256, g = 4: six 2-cycles among long ones (lesson 03 used to say "all long")
