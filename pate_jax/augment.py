"""Image augmentation shared by the teachers and the students."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from pate_jax import _checks


def random_shift(key: jax.Array, images: jax.Array, max_shift: int) -> jax.Array:
  """Translates each image ``[B, H, W, C]`` by up to ``max_shift`` pixels (zero fill).

  Raises:
    ValueError: ``max_shift`` is negative or not smaller than the images.
  """
  _checks.positive_int(max_shift, "max_shift", minimum=0)
  if max_shift == 0:
    return images
  _, h, w, _ = images.shape
  if max_shift >= min(h, w):
    raise ValueError(f"max_shift must be smaller than the images ({h}×{w}); got {max_shift}")
  padded = jnp.pad(images, ((0, 0), (max_shift, max_shift), (max_shift, max_shift), (0, 0)))
  offsets = jax.random.randint(key, (images.shape[0], 2), 0, 2 * max_shift + 1)

  def crop(img, off):
    return jax.lax.dynamic_slice(img, (off[0], off[1], 0), (h, w, img.shape[-1]))

  return jax.vmap(crop)(padded, offsets)
