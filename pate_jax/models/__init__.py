"""Flax (Linen) teacher and student networks, chosen by name from a config."""

from pate_jax.models._nets import MLP, MnistCNN, SvhnCNN, get_model

__all__ = ["MLP", "MnistCNN", "SvhnCNN", "get_model"]
