"""``rlvr-lab bench --peer trl``: rlvr_lab's GRPO step against TRL's ``GRPOTrainer``, one workload.

The workload is the ``rl_step_mfu`` step (:func:`rlvr_lab.benchmarks.rl_step.step_config`):
a ~0.8M-parameter decoder (4 layers, d_model 128, 4 heads, the task's 26-token vocabulary),
8 prompts x 8 completions of at most 32 new tokens, one full-batch PPO-clip update per step,
beta 0 (no reference model on either side), float32, CPU, randomly initialised weights.

- **rlvr_lab**: :meth:`rlvr_lab.train.sequence.Trainer.train_step` (rollout with the KV-cache
  sampler, host verification, update), one seed, as the studies call it.
- **TRL**: ``trl.GRPOTrainer`` on a randomly initialised ``transformers`` GPT-2 of the same
  shape (:meth:`Workload.hf_config`: tied embeddings, learned positions, pre-LayerNorm, tanh
  GELU, 4x MLP; GPT-2's attention has biases, ours not: :meth:`Workload.hf_num_params`),
  with a character tokenizer of the same vocabulary, ``GRPOConfig(num_generations=8,
  per_device_train_batch_size=64, max_completion_length=32, beta=0.0,
  steps_per_generation=1, num_iterations=1, use_cpu=True)``, no logging, no saving, no
  gradient checkpointing, float32 (TRL's defaults would turn both bf16 and gradient
  checkpointing on). Its reward function is rlvr_lab's own verifier of the same arithmetic
  task, on the same problem pool, reading TRL's ``completion_ids`` (so a completion cut off
  without EOS scores 0 on both sides).

Both run in one plain Python process, alternately: TRL's training loop drives, and after each
of its steps (a ``TrainerCallback.on_step_end``) one rlvr_lab step runs, so load drifts hit
both sides alike (TRL, rlvr_lab, TRL, rlvr_lab, ...), each after an untimed pause of
:data:`SETTLE_S` in which the other library's spinning worker threads go to sleep. A TRL
step's time is the loop's wall time from the end of that pause after the previous rlvr_lab
step to the end of TRL's optimizer step (data loading,
generation, rewards, loss, backward, AdamW, the trainer's own work); an rlvr_lab step's is
``train_step`` until its results are ready. The first ``warmup`` steps of each side (rlvr_lab
compiles in its first) are run and not counted.

The update's scoring pass: TRL's runs every row's prompt + completion; rlvr_lab's runs each
prompt once for its group of completions (``SequenceRLConfig.share_prompt_prefix``, on by
default), the same log-probs up to float rounding with fewer FLOPs; the line prints both
sides' model FLOPs. Where time goes that the model FLOPs do not count: rlvr_lab's rollout
(decode) and update are timed on their own after the alternation (medians of a few calls;
the ``rl_step_mfu`` line prints the same split), the rest of its step is host work
(verification, keys, dispatch); TRL's generation (``_generate_single_turn``) and reward call
(``_calculate_rewards``) are timed inside its steps, the rest is its scoring pass, update
and loop.

The ratio is TRL's median step time over rlvr_lab's: above 1, rlvr_lab's step is that many
times faster on this machine. The two libraries share the cores, so run it on idle ones.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import statistics
import tempfile
import time
from collections.abc import Callable

from rlvr_lab.benchmarks import Measure

# peer name -> the modules it needs (installed by the ``peer`` extra of the package)
PEERS: dict[str, tuple[str, ...]] = {"trl": ("trl", "torch", "transformers")}
EXTRA = "peer"
INSTALL_HINT = f"pip install 'rlvr-lab[{EXTRA}]'"


def missing_modules(peer: str) -> list[str]:
    """The modules ``peer`` needs that cannot be imported here (found without importing)."""
    missing = []
    for name in PEERS[peer]:
        try:
            if importlib.util.find_spec(name) is None:
                missing.append(name)
        except (ImportError, ValueError):
            missing.append(name)
    return missing


def check_peer(name: str) -> str:
    """``name`` if it is a peer whose modules are installed; else ValueError, one line naming
    the allowed peers or the extra to install."""
    if name not in PEERS:
        raise ValueError(f"unknown peer {name!r}; allowed: {', '.join(PEERS)}")
    missing = missing_modules(name)
    if missing:
        raise ValueError(f"peer {name!r} needs {', '.join(missing)}, which are not installed "
                         f"here; install the {EXTRA!r} extra: {INSTALL_HINT}")
    return name


@dataclasses.dataclass(frozen=True)
class Workload:
    """The step both sides run: ``config`` is rlvr_lab's (the ``rl_step_mfu`` bench step)."""

    config: object   # sequence.SequenceRLConfig

    @property
    def model_config(self):
        return self.config.base.model_config()

    @property
    def num_prompts(self) -> int:
        return self.config.num_prompts

    @property
    def num_generations(self) -> int:
        return self.config.num_generations

    @property
    def completions(self) -> int:
        return self.num_prompts * self.num_generations

    @property
    def max_new_tokens(self) -> int:
        return self.config.base.max_new_tokens

    @property
    def prompt_width(self) -> int:
        return self.config.base.prompt_width

    def num_params(self) -> int:
        return self.model_config.num_params()

    def hf_config(self) -> dict:
        """Keyword arguments of ``transformers.GPT2Config`` for the same architecture."""
        from rlvr_lab.envs import tokenizer

        mc = self.model_config
        return dict(vocab_size=mc.vocab_size, n_positions=mc.max_len, n_embd=mc.d_model,
                    n_layer=mc.n_layers, n_head=mc.n_heads, n_inner=mc.ff,
                    activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0,
                    attn_pdrop=0.0, tie_word_embeddings=True, bos_token_id=tokenizer.BOS,
                    eos_token_id=tokenizer.EOS, pad_token_id=tokenizer.PAD)

    def hf_num_params(self) -> int:
        """Parameters of that GPT-2: ours plus its attention biases (4 x d_model a layer)."""
        mc = self.model_config
        return self.num_params() + mc.n_layers * 4 * mc.d_model

    def step_flops(self) -> float:
        """rlvr_lab's model FLOPs per step (:func:`rlvr_lab.benchmarks.rl_step.step_flops`)."""
        from rlvr_lab.benchmarks import rl_step

        return rl_step.step_flops(self.config)

    def per_row_flops(self) -> float:
        """The model FLOPs of the same step with every row's prompt in the update's pass,
        as TRL computes it (``share_prompt_prefix=False``)."""
        from rlvr_lab.benchmarks import rl_step

        return rl_step.step_flops(dataclasses.replace(self.config, share_prompt_prefix=False))

    def sharing(self) -> str:
        from rlvr_lab.train import sequence

        shared = sequence.prompt_group(self.config, self.model_config,
                                       self.num_generations) is not None
        return ("the update runs each prompt's pass once for its group: share_prompt_prefix"
                if shared else "every row's prompt + completion, as TRL")


def workload() -> Workload:
    from rlvr_lab.benchmarks import rl_step

    return Workload(rl_step.step_config(quick=False))


# ----------------------------------------------------------------------------- rlvr_lab side
class _Ours:
    """rlvr_lab's side: one seed of :class:`~rlvr_lab.train.sequence.Trainer` from random
    weights (the cost of a step does not depend on them)."""

    def __init__(self, work: Workload):
        import jax

        from rlvr_lab.models import transformer
        from rlvr_lab.train import sequence

        self.trainer = sequence.Trainer(
            work.config, base_policy=transformer.init(jax.random.key(0), work.model_config))
        self.state = self.trainer.init_state(1)
        self.key = jax.random.key(1)
        self.step_no = 0

    def step(self) -> float:
        import jax

        start = time.perf_counter()
        self.state, _ = self.trainer.train_step(self.key, self.state, self.step_no)
        jax.block_until_ready(self.state)
        self.step_no += 1
        return time.perf_counter() - start

    def phases(self, repeats: int) -> tuple[float, float]:
        """Median ``(rollout, update)`` seconds on their own."""
        from rlvr_lab.benchmarks import median_time, rl_step

        return rl_step._phase_seconds(self.trainer, self.key, self.state, repeats,
                                      timer=median_time)


# ----------------------------------------------------------------------------- TRL side
def char_tokenizer():
    """A ``transformers`` fast tokenizer of rlvr_lab's character vocabulary (same ids: PAD 0,
    BOS 1, EOS 2, then :data:`rlvr_lab.envs.tokenizer.CHARS`), BOS added to every prompt."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    from rlvr_lab.envs import tokenizer

    vocab = {"<pad>": tokenizer.PAD, "<bos>": tokenizer.BOS, "<eos>": tokenizer.EOS}
    vocab.update({c: tokenizer.encode(c)[0] for c in tokenizer.CHARS})
    tok = Tokenizer(models.WordLevel(vocab, unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.post_processor = processors.TemplateProcessing(
        single="<bos> $A", special_tokens=[("<bos>", tokenizer.BOS)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<bos>",
                                   eos_token="<eos>", padding_side="left")


def verifier_reward(pool, width: int) -> Callable[..., list[float]]:
    """A TRL reward function: rlvr_lab's verifier of problem ``pool[problem]`` on each
    completion's token ids (binary reward; no EOS within ``width`` tokens: 0)."""
    import numpy as np

    from rlvr_lab.envs import tasks, tokenizer

    def reward(prompts, completions, completion_ids, problem, **_):
        rows = np.full((len(completion_ids), width), tokenizer.PAD, np.int32)
        for i, ids in enumerate(completion_ids):
            ids = list(ids)[:width]
            rows[i, :len(ids)] = ids
        return [tasks.reward(tasks.verify_tokens(pool[j], row))
                for j, row in zip(problem, rows)]

    reward.__name__ = "rlvr_lab_verifier"
    return reward


class _Timed:
    """Times of TRL's generation and reward calls, filled by :func:`trl_trainer`'s subclass."""

    def __init__(self):
        self.generate: list[float] = []
        self.reward: list[float] = []


def trl_trainer(work: Workload, pool, out_dir: str, max_steps: int, callbacks=(),
                timed: _Timed | None = None):
    """TRL's ``GRPOTrainer`` for ``work`` on the problems ``pool`` (random GPT-2 weights), its
    generation and reward calls timed into ``timed``; no logging, saving or printing."""
    import warnings

    import torch
    import transformers
    from datasets import Dataset
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.trainer_callback import PrinterCallback, ProgressCallback
    from trl import GRPOConfig, GRPOTrainer

    transformers.logging.set_verbosity_error()
    cfg = work.config
    timed = timed if timed is not None else _Timed()

    class TimedGRPOTrainer(GRPOTrainer):
        """GRPOTrainer whose generation and reward calls are timed (where TRL has them)."""

    for method, phase in (("_generate_single_turn", "generate"),
                          ("_calculate_rewards", "reward")):
        if hasattr(GRPOTrainer, method):
            def wrapped(self, *args, _method=method, _phase=phase, **kwargs):
                start = time.perf_counter()
                out = getattr(GRPOTrainer, _method)(self, *args, **kwargs)
                getattr(timed, _phase).append(time.perf_counter() - start)
                return out
            setattr(TimedGRPOTrainer, method, wrapped)

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(**work.hf_config()))
    data = Dataset.from_dict({"prompt": [p.prompt for p in pool],
                              "problem": list(range(len(pool)))})
    with warnings.catch_warnings():
        # transformers renames gradient checkpointing; TRL's config still sets the old name
        warnings.simplefilter("ignore", FutureWarning)
        args = GRPOConfig(
            output_dir=out_dir, use_cpu=True, bf16=False, fp16=False,
            gradient_checkpointing=False, num_generations=cfg.num_generations,
            per_device_train_batch_size=work.completions, gradient_accumulation_steps=1,
            steps_per_generation=1, num_iterations=1, max_completion_length=work.max_new_tokens,
            beta=0.0, epsilon=0.2, loss_type="dapo",   # dapo: token-mean over the batch, as ours
            temperature=cfg.temperature, top_p=1.0, top_k=0, learning_rate=cfg.learning_rate,
            lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0,
            max_grad_norm=cfg.max_grad_norm, max_steps=max_steps, report_to="none",
            logging_strategy="no", save_strategy="no", disable_tqdm=True, log_completions=False,
            remove_unused_columns=False, dataloader_num_workers=0, dataloader_pin_memory=False,
            seed=0)
        trainer = TimedGRPOTrainer(
            model=model, reward_funcs=verifier_reward(pool, work.max_new_tokens), args=args,
            train_dataset=data, processing_class=char_tokenizer(), callbacks=list(callbacks))
    for printer in (PrinterCallback, ProgressCallback):   # the end-of-training summary
        trainer.remove_callback(printer)
    return trainer


# An untimed pause before each side's step. Both libraries leave worker threads spinning
# for a while after a parallel region (torch's OpenMP pool, XLA's Eigen pool); without the
# pause those threads take cores from the step that follows, the other library's. Measured
# on a 2-core Intel Xeon: rlvr_lab's step 194 ms right after TRL's, 156 ms when TRL's threads
# sleep (OMP_WAIT_POLICY=PASSIVE, which in turn slowed TRL's own step from 322 to 591 ms);
# the pause lets both start on idle cores, as each would when run alone.
SETTLE_S = 0.2


def _run_alternating(work: Workload, ours: _Ours, warmup: int, steps: int) -> dict:
    """TRL's training loop with one rlvr_lab step after each of its steps; per-step times."""
    import warnings

    import torch
    from transformers import TrainerCallback

    times: dict = {"trl": [], "ours": [], "trl_length": []}
    clock = {"start": 0.0}
    timed = _Timed()
    holder = {}

    class Alternate(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            clock["start"] = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            times["trl"].append(time.perf_counter() - clock["start"])
            lengths = holder["trainer"]._metrics.get("train", {}).get(
                "completions/mean_length", [])
            times["trl_length"].append(lengths[-1] if lengths else float("nan"))
            time.sleep(SETTLE_S)
            times["ours"].append(ours.step())
            time.sleep(SETTLE_S)
            clock["start"] = time.perf_counter()

    with tempfile.TemporaryDirectory() as out:
        trainer = trl_trainer(work, ours.trainer.pool, out, warmup + steps, [Alternate()],
                              timed)
        holder["trainer"] = trainer
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            checkpointing = bool(getattr(trainer.model, "is_gradient_checkpointing", False))
            trainer.train()
    if checkpointing:
        raise RuntimeError("TRL's model trained with gradient checkpointing; the comparison "
                           "assumes it off")
    times["generate"], times["reward"] = timed.generate, timed.reward
    times["hf_params"] = sum(p.numel() for p in trainer.model.parameters())
    times["torch_threads"] = torch.get_num_threads()
    times["versions"] = f"trl {_version('trl')}, torch {torch.__version__}"
    return times


def _version(name: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "?"


def _quartiles(xs: list[float]) -> tuple[float, float, float]:
    if len(xs) < 2:
        return xs[0], xs[0], xs[0]
    q1, q2, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return q1, q2, q3


def _ms(x: float) -> str:
    return f"{x * 1e3:.0f} ms" if x >= 0.0095 else f"{x * 1e3:.1f} ms"


def compare(steps: int = 20, warmup: int = 2, phase_repeats: int = 10) -> Measure:
    """Time both sides alternately, ``warmup`` + ``steps`` steps each; the bench line."""
    import os

    import jax

    from rlvr_lab.benchmarks.rl_step import _malloc_setting

    check_peer("trl")
    work = workload()
    ours = _Ours(work)
    times = _run_alternating(work, ours, warmup, steps)
    trl = times["trl"][warmup:]
    mine = times["ours"][warmup:]
    if not trl or len(trl) != len(mine):
        raise RuntimeError(f"TRL ran {len(times['trl'])} steps, rlvr_lab "
                           f"{len(times['ours'])}; expected {warmup + steps} each")
    t1, t2, t3 = _quartiles(trl)
    o1, o2, o3 = _quartiles(mine)
    paired = _quartiles([a / b for a, b in zip(trl, mine)])
    ratio = t2 / o2

    roll, update = ours.phases(phase_repeats)
    host = max(o2 - roll - update, 0.0)

    def share(x, total):
        return f"{_ms(x)} ({x / total:.0%})"

    gen = times["generate"][warmup:]
    rew = times["reward"][warmup:]
    if gen and rew:
        g, r = statistics.median(gen), statistics.median(rew)
        trl_where = (f"TRL generate {share(g, t2)}, rewards {share(r, t2)}, the rest (scoring, "
                     f"loss, backward, AdamW, trainer loop) {share(max(t2 - g - r, 0.0), t2)}")
    else:
        trl_where = "TRL's generation and reward calls not found to time in this TRL version"
    lengths = [x for x in times["trl_length"][warmup:] if x == x]
    length = (f"TRL's completions end at EOS, mean length {statistics.mean(lengths):.1f}; "
              f"ours decode all {work.max_new_tokens} in the compiled loop"
              if lengths else f"ours decode all {work.max_new_tokens}")
    counted = ("each side's first step run and not counted" if warmup == 1 else
               f"each side's first {warmup} steps run and not counted" if warmup else
               "no warm-up step excluded")
    details = (
        f"TRL GRPOTrainer / rlvr_lab Trainer.train_step, median per-step wall time (above 1: "
        f"rlvr_lab faster): rlvr_lab {_ms(o2)} (IQR {_ms(o1)}-{_ms(o3)}), TRL {_ms(t2)} (IQR "
        f"{_ms(t1)}-{_ms(t3)}); per-step paired ratios IQR {paired[0]:.2f}-{paired[2]:.2f}; "
        f"{len(trl)} step{'s' if len(trl) > 1 else ''} each, alternating TRL/rlvr_lab in one "
        f"process, {counted} "
        f"(rlvr_lab compiles in its first); same workload: {work.num_params() / 1e6:.2f}M-param "
        f"decoder ({work.model_config.n_layers} layers, d={work.model_config.d_model}, vocab "
        f"{work.model_config.vocab_size}; TRL: a GPT-2 of {times['hf_params'] / 1e6:.2f}M, ours "
        f"plus attention biases), random weights, {work.num_prompts}x{work.num_generations} "
        f"completions of <= {work.max_new_tokens} tokens ({length}), one full-batch update "
        f"per step, beta 0, float32; reward: rlvr_lab's arithmetic verifier on the same problem "
        f"pool on both sides (TRL via completion_ids); model FLOPs per step: TRL "
        f"~{work.per_row_flops() / 1e9:.1f} GFLOP (every row's prompt + completion), "
        f"rlvr_lab ~{work.step_flops() / 1e9:.1f} ({work.sharing()}), so where time goes that "
        f"they do not count: "
        f"rlvr_lab decode {share(roll, o2)}, update {share(update, o2)}, host work (verify, "
        f"keys, dispatch) {share(host, o2)} (phases timed on their own after the alternation); "
        f"{trl_where}; {times['versions']} (threads: {times['torch_threads']}), jax "
        f"{jax.__version__}, {os.cpu_count()} cores, {jax.devices()[0].platform}, "
        f"{_malloc_setting()}; only meaningful on idle cores")
    return Measure("peer_trl", ratio, details)


def run(name: str, quick: bool = False) -> Measure:
    """The bench line of peer ``name``: 20 timed steps each after 2 warm-up steps (``quick``:
    5 after 1)."""
    check_peer(name)
    if quick:
        return compare(steps=5, warmup=1, phase_repeats=3)
    return compare()
