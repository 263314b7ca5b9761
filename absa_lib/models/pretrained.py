"""Saving and loading trained models the Hugging Face way, with strict key checks.

Every model of this package is a :class:`AbsaPreTrainedModel`, a ``transformers.PreTrainedModel``
with :class:`~absa_lib.models.model_config.AbsaConfig`, so the usual calls work on a trained run's
checkpoint (``runs/<dataset>/<model>/<run id>/checkpoints/best``)::

    model = AbsaModel.from_pretrained("path/to/checkpoints/best")   # or a hub repo id
    model = AutoModel.from_pretrained("path/to/checkpoints/best")   # the same class
    model.save_pretrained("my-model")                                # config.json + model.safetensors
    model.push_to_hub("me/qacg-bert-sentihood")

``from_pretrained`` picks the class from the saved ``absa_model`` (QACG-BERT, MAN-BERT, a set of
bert-single classifiers, ...), whichever class it is called on, and loads with transformers' own
loader (``dtype``, ``device_map`` and the hub options work), then checks the keys: a missing,
unexpected or mis-shaped weight is an :class:`~absa_lib.errors.AbsaError` naming the keys, never a
randomly initialised layer with a warning. Weights are safetensors only.

Initialisation is the models' own, in ``__init__`` and in a fixed order (a run's results depend on
the random draws); :meth:`AbsaPreTrainedModel.init_weights` therefore draws nothing.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError
from transformers import AutoModel, PreTrainedModel
from transformers.utils import logging as hf_logging

from absa_lib.errors import AbsaError, one_line
from absa_lib.models.backbones import bad_keys, check_keys
from absa_lib.models.model_config import DAMAGED, AbsaConfig, as_absa_config, read_saved_config
from absa_lib.models.registry import MODELS, PER_CONTEXT, model_class, resolve


@dataclass
class AbsaOutput:
    """``logits`` (B, C); ``loss`` (scalar) when labels were given; ``components`` per layer when asked.

    ``aux_losses``: unweighted regularisers already included in ``loss`` (MAN: ``ortho``);
    ``attentions``: the attention maps of the other attention systems (see their modules).
    """

    logits: torch.Tensor
    loss: torch.Tensor | None = None
    components: list[dict[str, torch.Tensor]] | None = None
    aux_losses: dict[str, torch.Tensor] | None = None
    attentions: dict[str, torch.Tensor] | None = None



_HUB_KEYS = ("cache_dir", "force_download", "local_files_only", "proxies", "revision", "subfolder", "token")


class AbsaPreTrainedModel(PreTrainedModel):
    """Base of every model here: :class:`AbsaConfig`, HF saving and hub upload, checked loading."""

    config_class = AbsaConfig
    base_model_prefix = "absa"           # no bare-encoder checkpoints are loaded through this class
    _supports_sdpa = True

    def __init__(self, config: AbsaConfig, *args, **kwargs) -> None:
        if type(self) is AbsaPreTrainedModel:      # e.g. AutoModel.from_config: which model is unknown here
            raise AbsaError(f"{config.absa_model if hasattr(config, 'absa_model') else 'this config'}: build a new "
                            "model with absa_lib.models.build_model(...), load a saved one with "
                            "AbsaModel.from_pretrained(...)")
        super().__init__(config, *args, **kwargs)

    @staticmethod
    def class_for(config: AbsaConfig, source: str = "the model's config") -> type[AbsaPreTrainedModel]:
        """The class that implements a saved ``config``: a set of bert-single classifiers or one model,
        looked up in :data:`absa_lib.models.registry.MODELS` as it is now (a model added later loads too)."""
        if getattr(config, "per_context_models", None) is not None:
            return resolve(PER_CONTEXT)
        if config.absa_model not in MODELS:
            raise AbsaError(f"{source}: absa_model {config.absa_model!r} is not one of "
                            f"{', '.join(MODELS)}; not a model saved by absa_lib")
        return model_class(config.absa_model)

    def init_weights(self) -> None:
        """Nothing to do: the subclasses initialise their layers in ``__init__`` (see the module
        docstring), and no weights are tied."""

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path: str | os.PathLike, *model_args,
                        config: AbsaConfig | None = None, **kwargs) -> AbsaPreTrainedModel:
        """The model saved in a folder (or hub repo) by :meth:`save_pretrained`, in eval mode.

        Also loads the checkpoints that runs wrote before the models were ``PreTrainedModel``\\ s.
        Keyword arguments are transformers' (``dtype``, ``device_map``, ``revision``, ``token``, ...).
        """
        source = Path(pretrained_model_name_or_path)
        local = source.is_dir()
        if config is None:
            config = (read_saved_config(source) if local else
                      _hub_config(str(pretrained_model_name_or_path), {k: kwargs[k] for k in _HUB_KEYS if k in kwargs}))
        target = cls.class_for(config, f"{pretrained_model_name_or_path}/config.json")
        for key in ("output_loading_info", "ignore_mismatched_sizes", "use_safetensors"):
            kwargs.pop(key, None)                                  # always: report, do not raise, safetensors
        try:
            with quiet_transformers():                             # the key check below reports instead
                model, info = PreTrainedModel.from_pretrained.__func__(
                    target, pretrained_model_name_or_path, *model_args, config=config, output_loading_info=True,
                    ignore_mismatched_sizes=True, use_safetensors=True, **kwargs)
        except SafetensorError as err:                            # a corrupt header, truncated data
            raise AbsaError(f"{pretrained_model_name_or_path}/model.safetensors: not a readable safetensors file "
                            f"({one_line(err)}); {DAMAGED}") from None
        except (OSError, ValueError, RuntimeError) as err:
            raise AbsaError(f"{pretrained_model_name_or_path}: the weights cannot be loaded ({one_line(err)}); "
                            f"{DAMAGED}") from None
        check_keys({"missing from": sorted(info["missing_keys"]), "unexpected in": sorted(info["unexpected_keys"]),
                    "of the wrong shape in": sorted(k for k, *_ in info["mismatched_keys"])},
                   str(pretrained_model_name_or_path), f"the weights of a {config.absa_model} model")
        with torch.no_grad():   # own, aligned memory: the file's mapped bytes change the last bits of some
            for tensor in [*model.parameters(), *model.buffers()]:          # kernels' results (~1e-8)
                tensor.data = tensor.data.clone()
        return model.eval()

    def save_pretrained(self, save_directory: str | os.PathLike, **kwargs) -> None:
        """transformers' ``save_pretrained`` (``config.json`` + ``model.safetensors``), without its
        progress bar (training logs and the CLI's one-line errors stay clean)."""
        with quiet_transformers():
            super().save_pretrained(save_directory, **kwargs)

    def load_checked(self, state: dict[str, torch.Tensor], source: str) -> None:
        """``load_state_dict(strict=True)`` after :func:`check_keys` (one clear error)."""
        check_keys(bad_keys(self.state_dict(), state), source, f"the weights of a {self.config.absa_model} model")
        self.load_state_dict(state, strict=True)

    def step_routing(self, sampler: str) -> str | None:
        """How a training step routes a batch that ``sampler`` drew (``device.compiled``'s ``routing``):
        None, the model as it is (bert-single routes its K classifiers,
        :meth:`~absa_lib.models.bert_single.PerContextModel.step_routing`)."""
        return None

    def after_backward(self, step_model: torch.nn.Module, context_ids: torch.Tensor | None) -> None:
        """After a training step's backward pass through ``step_model`` (``device.compiled``'s): nothing
        to do (bert-single drops the gradients of the classifiers with no row in the batch,
        :meth:`~absa_lib.models.bert_single.PerContextModel.after_backward`)."""


@contextmanager
def quiet_transformers():
    """transformers' warnings and progress bars off for the block, then as they were."""
    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def _hub_config(repo_id: str, hub_kwargs: dict) -> AbsaConfig:
    """The checked config of a model on the Hugging Face hub."""
    try:
        raw, _ = AbsaConfig.get_config_dict(repo_id, **hub_kwargs)
    except (OSError, ValueError) as err:
        raise AbsaError(f"{repo_id}: neither a local model folder nor a readable hub repository "
                        f"({one_line(err)})") from None
    return as_absa_config(raw, f"{repo_id}/config.json")


AutoModel.register(AbsaConfig, AbsaPreTrainedModel)
