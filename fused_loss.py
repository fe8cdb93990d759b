"""
The output projection and the cross-entropy in one step, without building the logits: train.py's fast default
(--fused_loss=true). GPT.forward in tiedgpt.py computes the textbook loss, F.cross_entropy(h' W^T, targets); FusedLoss
computes the same number (up to float rounding, tested in tests/test_model.py) and the same gradients, chunk by chunk.
"""

import torch

# The output projection and the loss in one step. For logits z = h W^T and loss L = mean_i(lse(z_i) - z_i,t_i)
# the gradient w.r.t. the logits is G = (softmax(z) - onehot(t)) / N, so dL/dh = G W and dL/dW = G^T h.
# Autograd would keep z (N x n, 400 MB at N = 2048, n = 50257) for the backward pass, fill a second N x n
# buffer for the gradient of the nll, and read both again. Here each chunk of rows goes
# matmul -> max -> exp in place -> sum -> two matmuls, and only dL/dh (N x d) and dL/dW (n x d) are kept.
#
# Two things make it fast on a CPU, where the matmuls are near the machine's peak and everything else is
# memory traffic over the N x n buffer:
# - the buffer is allocated once and reused (a fresh 250 MB tensor per chunk costs a page fault per 4 KB
#   page: the CPU allocator hands big blocks straight back to the OS);
# - softmax(z) - onehot(t) is never written out. With e = exp(z - max) and s = sum_k e_k (per row),
#       G W   = diag(1/s) (e W) - W[t]                 (scale N x d rows, subtract N looked-up rows)
#       G^T h = e^T (diag(1/s) h) - sum_i onehot(t_i)^T h_i   (scale h first, index_add the targets)
#   so the 1/s and the -onehot act on N x d arrays instead of another pass over N x n.

class LinearCrossEntropy(torch.autograd.Function):
    CHUNK_ELEMENTS = 2 ** 26  # rows per chunk * n: bounds the one N x n buffer (256 MB in fp32)
    _workspace = {}  # (device, n) -> the reused fp32 buffer, CPU only (CUDA's caching allocator reuses for us)

    @staticmethod
    def buffer(rows, n, device):
        if device.type != "cpu":
            return torch.empty(rows, n, device=device)
        key = (str(device), n)
        buf = LinearCrossEntropy._workspace.get(key)
        if buf is None or buf.size(0) < rows:
            LinearCrossEntropy._workspace.clear()  # keep at most one: a new shape replaces the old
            buf = LinearCrossEntropy._workspace[key] = torch.empty(rows, n)
        return buf[:rows]

    @staticmethod
    def forward(ctx, h, weight, targets, want_grad=True):
        shape, h = h.shape, h.reshape(-1, h.size(-1))
        t = targets.reshape(-1)
        n = weight.size(0)
        # under autocast the matmuls run in the autocast dtype, the softmax in fp32, as autocast would do
        dt = torch.get_autocast_dtype(h.device.type) if torch.is_autocast_enabled(h.device.type) else h.dtype
        w = weight.to(dt)
        valid = t != -1
        count = valid.sum().clamp(min=1)
        # (want_grad: grad mode as the caller saw it; inside forward it is always off)
        need_grad = want_grad and (ctx.needs_input_grad[0] or ctx.needs_input_grad[1])
        need_w = need_grad and ctx.needs_input_grad[1]
        grad_h = torch.empty_like(h) if need_grad else None
        grad_w = None  # dL/dW in fp32, created by the first chunk's matmul (no zero-fill pass)
        loss = torch.zeros((), device=h.device, dtype=torch.float32)
        rows = min(h.size(0), max(1, LinearCrossEntropy.CHUNK_ELEMENTS // n))
        buf = LinearCrossEntropy.buffer(rows, n, h.device)
        with torch.autocast(h.device.type, enabled=False):
            for i in range(0, h.size(0), rows):
                hc, tc, vc = h[i:i + rows].to(dt), t[i:i + rows], valid[i:i + rows]
                tgt = tc.clamp(min=0)
                z = buf[:hc.size(0)]
                if dt == torch.float32:
                    torch.mm(hc, w.T, out=z)  # the logits, written into the reused buffer
                else:
                    z.copy_(hc @ w.T)
                z_t = z.gather(1, tgt.unsqueeze(1)).squeeze(1)  # the target's logit, read before z is overwritten
                m = z.amax(dim=1, keepdim=True)
                e = z.sub_(m).exp_()  # e^{z - max}: the only exp of the N x n buffer, in place
                s = e.sum(dim=1, keepdim=True)
                lse = m.squeeze(1) + s.log().squeeze(1)  # log sum_k e^{z_k}
                loss += ((lse - z_t) * vc).sum()
                if not need_grad:
                    continue
                # the mean's 1/N rides on the N x 1 and N x d factors: vf is 1/N for a real target, 0 for
                # ignore_index (that row then gives no gradient), and scale = vf / s turns e into softmax / N
                vf = vc.float().unsqueeze(1) / count
                scale = vf / s
                e = e.to(dt)
                # dL/dh rows: (e W) / (s N) - W[t] / N
                grad_h[i:i + rows] = ((e @ w).float() * scale - w[tgt].float() * vf).to(h.dtype)
                if need_w:  # dL/dW += e^T (h / (s N)) - onehot(t)^T h / N
                    hs = (hc.float() * scale).to(dt)
                    if grad_w is None:
                        grad_w = (e.T @ hs).float()  # .float() is a no-op in fp32
                    elif dt == torch.float32:
                        grad_w.addmm_(e.T, hs)
                    else:
                        grad_w += (e.T @ hs).float()
                    grad_w.index_add_(0, tgt, hc.float() * -vf)
        ctx.shape = shape
        if need_grad:
            grad_w = None if grad_w is None else grad_w.to(weight.dtype)
            ctx.save_for_backward(grad_h, grad_w)
        return loss / count

    @staticmethod
    def backward(ctx, grad_loss):
        grad_h, grad_w = ctx.saved_tensors
        if grad_loss.device.type == "cpu" and grad_loss.item() == 1.0:  # loss.backward(): skip a pass over n x d
            grad_loss = None
        dh = grad_h if grad_loss is None else grad_h * grad_loss
        dh = dh.reshape(ctx.shape) if ctx.needs_input_grad[0] else None
        dw = grad_w if grad_loss is None or grad_w is None else grad_w * grad_loss
        return dh, dw, None, None


class FusedLoss(torch.nn.Module):
    """model(idx, targets) with the loss from LinearCrossEntropy: what train.py steps and evaluates with when
    fused_loss is on. Everything up to the head's own transform runs as in the model; only the projection and the
    loss are fused, so logits is None. The softcap head's tanh sits between projection and loss: it keeps the
    textbook path."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, idx, targets):
        model = self.model
        if model.config.head_spec.cap:
            return None, model(idx, targets)[1]
        h = model.head(model.hidden(idx))
        return None, LinearCrossEntropy.apply(h, model.lm_head.weight, targets, torch.is_grad_enabled())
