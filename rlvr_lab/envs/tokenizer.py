"""Character-level tokenizer shared by the synthetic tasks.

Ids: ``PAD=0``, ``BOS=1``, ``EOS=2``, then one id per character of :data:`CHARS`. Decoding
never raises and stops at the first EOS:

- :func:`decode` (any row, e.g. for display) skips the **leading** PAD/BOS (a prompt's left
  padding and its BOS); a PAD/BOS after the text has begun is ``"?"``, like an unknown id;
- :func:`decode_completion` (what the verifier reads) allows no PAD/BOS before the EOS at all --
  a completion has no left padding, so a sampled PAD or BOS is a token the model produced and
  becomes ``"?"`` (the text is then malformed for every task) instead of being silently dropped
  (``1<PAD>53`` would otherwise read as ``153``) -- and returns None for a row without EOS (a
  completion cut off by the generation budget) unless ``allow_truncated``.
Batches are encoded with prompts **left**-padded (so all prompts end in the same column, the
layout :mod:`rlvr_lab.models.transformer` samples from) and completions right-padded.
"""
from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

PAD, BOS, EOS = 0, 1, 2
CHARS = "0123456789+-*/()=>,:ACS"  # append only: ids of existing characters stay
_SPECIAL = 3
VOCAB_SIZE = _SPECIAL + len(CHARS)
_ID = {c: i + _SPECIAL for i, c in enumerate(CHARS)}


def encode(text: str) -> list[int]:
    """Ids of ``text``; a character outside :data:`CHARS` raises ValueError (task bug)."""
    try:
        return [_ID[c] for c in text]
    except KeyError as err:
        raise ValueError(f"character {err.args[0]!r} is not in the vocabulary {CHARS!r}") from None


def _char(i: int) -> str:
    j = i - _SPECIAL
    return CHARS[j] if 0 <= j < len(CHARS) else "?"


def decode(ids: npt.ArrayLike) -> str:
    """Text of ``ids`` up to the first EOS. Leading PAD/BOS (a left-padded prompt) are skipped;
    a PAD/BOS after the first character, and any unknown id, become ``"?"``."""
    out: list[str] = []
    for i in np.asarray(ids).reshape(-1).tolist():
        if i == EOS:
            break
        if i in (PAD, BOS) and not out:
            continue
        out.append(_char(i))
    return "".join(out)


def decode_completion(ids: npt.ArrayLike, *, allow_truncated: bool = False) -> str | None:
    """The text a verifier reads from one completion row: the characters before the first
    EOS, where PAD, BOS and unknown ids are ``"?"`` (never skipped). A row without EOS was cut
    off by the generation budget: None (not a finished answer), or, with
    ``allow_truncated=True``, the text of the whole row."""
    out: list[str] = []
    for i in np.asarray(ids).reshape(-1).tolist():
        if i == EOS:
            return "".join(out)
        out.append(_char(i))
    return "".join(out) if allow_truncated else None


def encode_prompts(texts: Iterable[str], width: int | None = None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """``BOS + text`` left-padded to ``width`` -> ``(ids [B, W] int32, valid [B, W] bool)``."""
    rows = [[BOS] + encode(t) for t in texts]
    need = max((len(r) for r in rows), default=1)
    width = need if width is None else width
    if need > width:
        raise ValueError(f"prompt of {need} tokens does not fit width={width}")
    ids = np.full((len(rows), width), PAD, np.int32)
    for i, r in enumerate(rows):
        ids[i, width - len(r):] = r
    return ids, ids != PAD


def encode_completions(texts: Iterable[str], width: int | None = None
                       ) -> tuple[np.ndarray, np.ndarray]:
    """``text + EOS`` right-padded to ``width`` -> ``(ids [B, N] int32, mask [B, N] bool)``."""
    rows = [encode(t) + [EOS] for t in texts]
    need = max((len(r) for r in rows), default=1)
    width = need if width is None else width
    if need > width:
        raise ValueError(f"completion of {need} tokens does not fit width={width}")
    ids = np.full((len(rows), width), PAD, np.int32)
    mask = np.zeros((len(rows), width), bool)
    for i, r in enumerate(rows):
        ids[i, :len(r)] = r
        mask[i, :len(r)] = True
    return ids, mask


def decode_batch(ids: npt.ArrayLike) -> list[str]:
    return [decode(row) for row in np.asarray(ids)]
