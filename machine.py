"""
What a run needs of the machine: its processes (one, or torchrun's) and device, the environment config.json records,
whether a notebook is running it, whether the run fits in memory, and the FLOPs MFU is counted against.
"""

import os
import platform
import re
import subprocess
import sys
from contextlib import nullcontext

import torch

from fused_loss import LinearCrossEntropy


def setup_processes():
    """(ddp, rank, world, local_rank): one process (False, 0, 1, 0), or this one's place among torchrun's
    processes, which torchrun passes in the environment (RANK, WORLD_SIZE, LOCAL_RANK)."""
    if int(os.environ.get("RANK", -1)) == -1:
        return False, 0, 1, 0
    return True, int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])


def setup_device(c, local_rank=0, ddp=False):
    """The torch.device, the compute dtype's name and the autocast context that Config c asks for.
    Under torchrun each process takes the GPU of its LOCAL_RANK."""
    mps = getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()
    if c.device == "auto":
        device = f"cuda:{local_rank}" if torch.cuda.is_available() else "mps" if mps and not ddp else "cpu"
    elif c.device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ValueError(f"device={c.device} but this machine has no CUDA GPU; use --device=cpu")
        # torch.cuda.set_device needs an index: plain 'cuda' means this process's GPU (LOCAL_RANK, 0 without torchrun)
        device = f"cuda:{local_rank}" if ddp or c.device == "cuda" else c.device
    elif c.device == "mps":  # Apple silicon. Untested by this project (no such machine): float32, foreach AdamW
        if not mps:
            raise ValueError("device=mps but this machine has no usable Apple GPU (torch.backends.mps); use "
                             "--device=cpu")
        if ddp:
            raise ValueError("device=mps runs one process; torchrun needs cuda or cpu")
        device = "mps"
    else:
        device = "cpu"
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    dtype = c.dtype
    if dtype == "auto":
        dtype = "bfloat16" if device.type == "cuda" and torch.cuda.is_bf16_supported() else "float32"
    autocast = torch.autocast(device.type, dtype=torch.bfloat16) if dtype == "bfloat16" else nullcontext()
    return device, dtype, autocast


def check_device_settings(c):
    """Refuse, in one line, a device or dtype that setup_device can't give."""
    if c.dtype == "float16":
        raise ValueError("dtype float16 is not supported: its narrow range needs loss scaling (a GradScaler), "
                         "which this code leaves out; use bfloat16 (same speed on GPUs that have it) or float32")
    if c.dtype not in ("auto", "float32", "bfloat16"):
        raise ValueError(f"dtype must be auto, float32 or bfloat16, got {c.dtype!r}")
    if c.device not in ("auto", "cpu", "mps", "cuda") and not re.fullmatch(r"cuda:\d+", c.device):
        raise ValueError(f"device must be auto, cpu, cuda, cuda:N or mps, got {c.device!r}")


def environment(device, world_size):
    """What config.json records of the machine: torch and Python versions, device, processes, the git commit."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                                cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        commit = None
    return dict(torch=torch.__version__, device=str(device), world_size=world_size, git_commit=commit,
                cuda_device=torch.cuda.get_device_name(device) if device.type == "cuda" else None,
                threads=torch.get_num_threads(), python=sys.version.split()[0])


def in_notebook():
    """True when IPython is running a shell here (a notebook). Merely imported, as a test run that executed
    notebooks leaves it, it is not one."""
    ipython = sys.modules.get("IPython")
    return ipython is not None and ipython.get_ipython() is not None


def estimate_memory(c):
    """Rough bytes a training step needs: 16 per parameter (weight, gradient, AdamW's two moments, fp32), the
    activations kept for backward (about 34 d + 5 T n_head floats per token per layer), and the output head's
    buffer (the fused path's chunk, or the textbook path's logits, their softmax and gradient)."""
    d, n, L, T = c.n_embd, c.vocab_size, c.n_layer, c.block_size
    params = n * d * (1 if c.head_spec.tied else 2) + L * 12 * d * d + 2 * d * d
    tokens = c.batch_size * T
    acts = tokens * L * (34 * d + 5 * T * c.n_head) * 4
    head = LinearCrossEntropy.CHUNK_ELEMENTS * 4 if c.fused_loss else 3 * tokens * n * 4
    return 16 * params + acts + head


def available_memory():
    """MemAvailable from /proc/meminfo in bytes (None where there is no such file)."""
    try:
        with open("/proc/meminfo") as f:
            return next(int(l.split()[1]) * 1024 for l in f if l.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        return None


def check_memory(c, device):
    """Refuse, in one line, a CPU run that would not fit in the memory the machine has free."""
    need, have = estimate_memory(c), available_memory()
    if device.type == "cpu" and have is not None and need > have:
        raise ValueError(f"this run needs about {need / 2 ** 30:.1f} GiB but only {have / 2 ** 30:.1f} GiB of memory "
                         f"is available; lower n_embd, n_layer, batch_size or block_size (or use --vocab=corpus)")


PEAK_TFLOPS = 790.0  # measured bf16 dense matmul peak of an H100/H200; MFU on a GPU is reported against it


def flops_per_token(model):
    """Training FLOPs per token, PaLM-style: 6 per weight that multiplies (the head counts even when tied;
    the lookup does not) plus attention's 12 L T d."""
    c = model.config
    head = c.vocab_size * c.n_embd if model.tied else 0  # untied: lm_head is in the non-embedding count
    return 6 * (model.get_num_params(non_embedding=True) + head) + 12 * c.n_layer * c.block_size * c.n_embd


def available_cores():
    """The cores this process may use (its affinity where the system says, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def cpu_name():
    """The processor's model name, for records of where a run was timed."""
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def loadavg():
    """The 1-minute load average (None where the platform has none): how busy the machine was."""
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):  # not on every platform
        return None
