"""
Every setting of a run, each a --key=value flag of train.py: the Config dataclass (GPTConfig's model fields, then the
training fields) with its checks, the four settings whose default stands for another value (resolved_defaults), and
the flag parser that demo.py and the research scripts share.
"""

import os
import re
import sys
from dataclasses import dataclass, fields

from optim import DEFAULT_WEIGHT_DECAY, TIGER_RESIDUAL_STD, check_settings
from tiedgpt import GPTConfig, flag

MODEL_FIELDS = [f.name for f in fields(GPTConfig)]


@dataclass
class Config(GPTConfig):
    """GPTConfig's model fields, then the training fields: each a --key=value flag, its help in its metadata. The
    defaults train a 4x256 model on Tiny Shakespeare that shows the tied-head story on a 2-core CPU in a few minutes:
    the first loss of `tied` is ~16 (d sigma = sqrt(256)), the fixes start near ln n."""
    block_size: int = flag(128, "context length T in tokens")
    # the same loss as GPT.forward's F.cross_entropy, without building the (B*T) x n logits (fused_loss.py)
    fused_loss: bool = flag(True, "compute head + cross-entropy together without building the logits (true|false)")
    # data
    dataset: str = flag("shakespeare", "shakespeare (downloaded once) | pydoc_topics (or use --input)")
    input: str = flag(None, "any UTF-8 text file to train on; prepared into data/<file stem>-<hash>/ on first use")
    # 'corpus': the softmax runs over the tokens the corpus uses (11,706 for Tiny Shakespeare), renumbered 0..n-1:
    # a speed knob for teaching; it changes n, and every result made with it must say so
    vocab: str = flag("full", "full (all 50257 tokens) | corpus (only the tokens the data use: smaller n, faster)")
    batch_size: int = flag(8, "sequences per step, over all processes")
    # optimisation: linear warmup then cosine decay to min_lr. 'adamw' steps are absolute (~lr per coordinate);
    # 'tiger' and 'lamb' step by a fraction lr of each weight's own size (optim.py, appendix B)
    optimizer: str = flag("adamw", "adamw | signum (absolute steps) | tiger | lamb (relative to each weight's size)")
    max_iters: int = flag(300, "training steps")
    lr: float = flag(1e-3, "peak learning rate (> 0)")
    min_lr: float = flag(None, "final learning rate of the cosine (None: lr/10)")
    warmup_iters: int = flag(20, "linear warmup steps")
    lr_decay_iters: int = flag(None, "steps of the cosine decay (None: max_iters)")
    weight_decay: float = flag(None, "weight decay of matrices (>= 0; None: adamw 0.1 as nanoGPT, tiger and lamb "
                                     "0.01, their references')")
    # 'none': the optimizers' absolute twins, a step scale frozen at the first step (see optim.py)
    relative: str = flag("all", "tiger/lamb: which weights step relative to their size: all (as published) | none | "
                                "embedding | body (tiger only)")
    beta1: float = flag(0.9, "AdamW beta1 in [0, 1) (tiger and lamb use their references' constants: leave it)")
    beta2: float = flag(0.95, "AdamW beta2 in [0, 1) (likewise)")
    grad_clip: float = flag(1.0, "clip the gradient norm to this (0: off)")
    # False: the foreach implementation nanoGPT gets on a CPU. Same update up to float rounding (tested)
    fused_adamw: bool = flag(True, "torch's fused AdamW, one pass per tensor (true) or the foreach one (false)")
    # evaluation and logging
    eval_interval: int = flag(50, "steps between evaluations and checkpoints")
    eval_iters: int = flag(10, "batches per loss estimate (the same batches at every evaluation)")
    # True: val_loss over every non-overlapping window of the val split (each token predicted once; 33.8K tokens on
    # Tiny Shakespeare), so that measurement noise is small next to the differences between seeds
    eval_full_val: bool = flag(False, "val loss over the whole val split instead of eval_iters batches (true|false)")
    # the first steps, where heads differ most, seen densely at a fraction of a whole-split evaluation's cost
    dense_val_until: int = flag(0, "up to this step, also val_subset_loss every log_interval steps (0: off)")
    dense_val_windows: int = flag(128, "windows of the val split in that subset (evenly spaced; >= 1)")
    log_interval: int = flag(10, "steps between logged rows")
    seed: int = flag(1337, "model init (and dropout) seed, in [0, 2**63)")
    data_seed: int = flag(None, "batch-order seed (None: the same as seed); fix it to give every run the same data")
    # system
    device: str = flag("auto", "auto (cuda, else mps, else cpu) | cpu | cuda | cuda:N | mps (Apple GPUs; untested)")
    dtype: str = flag("auto", "auto (bfloat16 on GPUs that have it, else float32) | float32 | bfloat16")
    compile: bool = flag(False, "torch.compile the model (true|false)")
    out_dir: str = flag(None, "folder for config.json, metrics.jsonl, ckpt.pt (None: out/<head>; '': write nothing)")
    resume: bool = flag(False, "continue the run checkpointed in out_dir (true|false)")
    overwrite: bool = flag(False, "replace the run in out_dir: its files are removed first (true|false)")
    sample_tokens: int = flag(100, "tokens of text to print at the end (0: none)")

    def __post_init__(self):
        if self.optimizer == "tiger" and self.zero_init_residual and self.residual_std is None:
            # Tiger moves each matrix by lr x its RMS: exact zeros never would (optim.TIGER_RESIDUAL_STD says more)
            self.residual_std = TIGER_RESIDUAL_STD
        check_settings(self)  # the optimizer's (optim.py)
        super().__post_init__()  # the model's (tiedgpt.py)
        if self.out_dir is None:
            self.out_dir = os.path.join("out", self.head)
        least = dict(batch_size=1, eval_iters=1, log_interval=1, eval_interval=1, dense_val_windows=1, max_iters=0,
                     warmup_iters=0, sample_tokens=0, dense_val_until=0, seed=0, data_seed=0, lr_decay_iters=0)
        for name, low in least.items():
            if getattr(self, name) is not None and getattr(self, name) < low:
                raise ValueError(f"{name} must be >= {low}, got {getattr(self, name)}")
        if not self.lr > 0 or (self.min_lr is not None and not 0 <= self.min_lr <= self.lr):
            raise ValueError(f"lr must be > 0 and min_lr in [0, lr] (the cosine ends at min_lr), got lr={self.lr}, "
                             f"min_lr={self.min_lr}")
        if self.vocab not in ("full", "corpus"):
            raise ValueError(f"vocab must be full or corpus, got {self.vocab!r}")
        if self.resume and not self.out_dir:
            raise ValueError("resume needs out_dir: the folder whose ckpt.pt to continue")
        if self.resume and self.overwrite:
            raise ValueError("resume and overwrite contradict each other: continue the run, or replace it")
        if self.dtype not in ("auto", "float32", "bfloat16"):  # float16 would need loss scaling, which this code omits
            raise ValueError(f"dtype must be auto, float32 or bfloat16, got {self.dtype!r}")
        if not re.fullmatch(r"auto|cpu|mps|cuda(:\d+)?", self.device):
            raise ValueError(f"device must be auto, cpu, cuda, cuda:N or mps, got {self.device!r}")

    def model_config(self):
        return GPTConfig(**{k: getattr(self, k) for k in MODEL_FIELDS})

    def resolved(self):
        """data_seed, min_lr, lr_decay_iters and weight_decay as they act (resolved_defaults)."""
        return resolved_defaults(lambda name: getattr(self, name))


# Four settings whose default, None, stands for another value. Each is worked out here and nowhere else: the loop, the
# optimizer and the checkpoint's settings check (rundir.run_settings) all ask resolved_defaults.
RESOLVED = dict(data_seed="seed", min_lr="lr/10", lr_decay_iters="max_iters", weight_decay="the optimizer's")


def resolved_defaults(get):
    """{data_seed, min_lr, lr_decay_iters, weight_decay} as they act, from get(name) -> a setting (a Config's
    attribute, or a saved config's value): data_seed None is the seed, min_lr None lr/10, lr_decay_iters None
    max_iters, weight_decay None the optimizer's default (optim.DEFAULT_WEIGHT_DECAY)."""
    pick = lambda name, default: default if get(name) is None else get(name)  # noqa: E731
    return dict(data_seed=pick("data_seed", get("seed")), min_lr=pick("min_lr", get("lr") / 10),
                lr_decay_iters=pick("lr_decay_iters", get("max_iters")),
                weight_decay=pick("weight_decay", DEFAULT_WEIGHT_DECAY[get("optimizer")]))


def parse_args(argv, cls=Config, doc=None):
    """A `cls` (Config; demo.py's Demo) from --key=value flags, each read as its field's type; --help lists them."""
    known = {f.name: f for f in fields(cls)}
    kw = {}
    for arg in argv:
        if arg in ("-h", "--help"):
            width = max(len(f"--{f.name}={f.default}") for f in fields(cls))
            print((doc or __doc__).strip() + "\n\nflags (--key=value, default shown):\n" + "\n".join(
                f"  {f'--{f.name}={f.default}':{width}}  {f.metadata.get('help', '')}" for f in fields(cls)))
            sys.exit(0)
        key, eq, val = arg[2:].partition("=")
        if not arg.startswith("--") or not eq:
            raise ValueError(f"bad argument {arg!r}: flags look like --key=value (see --help)")
        if key not in known:
            raise ValueError(f"unknown flag --{key} (see --help for the list)")
        kw[key] = convert(known[key], val)
    if kw.get("vocab") == "corpus" and "vocab_size" in kw:  # else the flag would be silently replaced
        raise ValueError("--vocab_size has no effect with --vocab=corpus (the tokens the data use set n): leave it "
                         "out, or use --vocab=full")
    return cls(**kw)


def convert(f, val):
    """A flag's text as dataclass field f's type: None where that is the default, true/false, or int, float, str."""
    if val.lower() == "none" and f.default is None:
        return None
    try:
        if f.type is bool:
            return dict(true=True, yes=True, false=False, no=False, **{"1": True, "0": False})[val.lower()]
        return f.type(val)
    except (KeyError, ValueError):
        kind = "true or false" if f.type is bool else f.type.__name__
        raise ValueError(f"--{f.name} expects {kind}, got {val!r}") from None
