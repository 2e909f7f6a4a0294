"""Flax (Linen) teacher and student networks, chosen by name from a registry."""

from pate_jax.models._gan import GanDiscriminator, GanGenerator, WNDense
from pate_jax.models._nets import (COMPUTE_DTYPES, MLP, BatchNormMLP, MnistCNN, SvhnCNN,
                                   check_kwargs, get_model, model_names, register_model)

register_model("gan_discriminator", GanDiscriminator)

__all__ = ["COMPUTE_DTYPES", "MLP", "BatchNormMLP", "GanDiscriminator", "GanGenerator",
           "MnistCNN", "SvhnCNN", "WNDense", "check_kwargs", "get_model", "model_names",
           "register_model"]
