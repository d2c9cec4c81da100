"""Build a ``tokenizers.Tokenizer`` from a GGUF file's vocabulary and merges.

Only GPT-2-style byte-level BPE vocabularies (``tokenizer.ggml.model == "gpt2"``)
are handled.  The pre-tokenizer follows the GGUF's ``tokenizer.ggml.pre`` name:

* ``gpt2`` / ``default``: the GPT-2 regex split (tokenizers' ``ByteLevel`` with its regex);
* ``smollm`` / ``starcoder`` / ``refact``: each digit alone, then the GPT-2 regex
  (``Digits(individual_digits=True)`` followed by ``ByteLevel``);
* ``llama-bpe`` / ``llama3``: the Llama-3 regex, then byte-level mapping;
* ``qwen2``: Qwen2's regex (the Llama-3 one with each digit alone), then byte-level mapping
  (llama.cpp applies no Unicode normalisation, so neither does this).

Control and user-defined tokens (GGUF token types 3 and 4) become special added
tokens, so chat markers such as ``<|im_start|>`` in a text encode to their ids.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import UnsupportedModelError

_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# llama.cpp's LLAMA_VOCAB_PRE_TYPE_QWEN2 (and Qwen2's tokenizer.json): single digits, not runs of three
_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

_PRE_DIGITS = {"smollm", "starcoder", "refact"}
_PRE_GPT2 = {"gpt2", "gpt-2", "default"}
_PRE_LLAMA3 = {"llama-bpe", "llama3"}
_PRE_QWEN2 = {"qwen2"}

TOKEN_CONTROL = 3
TOKEN_USER_DEFINED = 4


def build_tokenizer(
    model: str,
    pre: str | None,
    tokens: Sequence[str],
    merges: Sequence[str],
    token_types: Sequence[int] | None = None,
):
    """A byte-level BPE ``tokenizers.Tokenizer`` equivalent to the GGUF's tokenizer.

    Raises :class:`UnsupportedModelError` for a tokenizer model other than ``gpt2``
    or an unknown pre-tokenizer name.
    """
    # start-up: tokenizers
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
    )

    if model != "gpt2":
        raise UnsupportedModelError(
            f"GGUF tokenizer model {model!r} is not supported (supported: 'gpt2' byte-level BPE)"
        )
    pre = (pre or "default").lower()
    vocab = {tok: i for i, tok in enumerate(tokens)}
    if len(vocab) != len(tokens):
        # duplicate strings: keep the first id, as llama.cpp's lookup does
        vocab = {}
        for i, tok in enumerate(tokens):
            vocab.setdefault(tok, i)
    merge_pairs = []
    for m in merges:
        a, sep, b = m.partition(" ")
        if not sep:
            raise UnsupportedModelError(f"malformed BPE merge {m!r} in the GGUF vocabulary")
        merge_pairs.append((a, b))
    bpe = models.BPE(vocab=vocab, merges=merge_pairs, fuse_unk=False, byte_fallback=False)
    tok = Tokenizer(bpe)
    if pre in _PRE_DIGITS:
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Digits(individual_digits=True),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
            ]
        )
    elif pre in _PRE_GPT2:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    elif pre in _PRE_LLAMA3 or pre in _PRE_QWEN2:
        split = _QWEN2_SPLIT if pre in _PRE_QWEN2 else _LLAMA3_SPLIT
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(split), behavior="isolated", invert=False),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
    else:
        raise UnsupportedModelError(
            f"GGUF pre-tokenizer {pre!r} is not supported "
            f"(supported: {', '.join(sorted(_PRE_DIGITS | _PRE_GPT2 | _PRE_LLAMA3 | _PRE_QWEN2))})"
        )
    tok.decoder = decoders.ByteLevel()
    if token_types is not None:
        special = [
            AddedToken(tokens[i], special=True, normalized=False)
            for i, t in enumerate(token_types)
            if int(t) in (TOKEN_CONTROL, TOKEN_USER_DEFINED)
        ]
        if special:
            tok.add_special_tokens(special)
    return tok
