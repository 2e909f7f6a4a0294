"""The stages' figures, small PNGs drawn with matplotlib's object API (no pyplot).

Owns :func:`plot_privacy` (ε vs queries answered: aggregate stage), :func:`plot_gap`
(the vote gap: teachers stage, private), :func:`plot_history` (the student's accuracy:
main job) and :func:`stamp_private` (a copy of a PNG under a banner that says it is private:
the reproduction report's copies of private figures).
"""

from __future__ import annotations

import pathlib
from typing import Any

import numpy as np

from pate_jax import experiment
from pate_jax import io


def plot_privacy(curve: dict[str, Any], title: str, path: str | pathlib.Path) -> pathlib.Path:
  """ε vs queries answered, one line per accounting (a small PNG); ``curve`` from
  :func:`privacy_curve`."""
  fig = _figure(figsize=(5, 3.4))
  ax = fig.subplots()
  for name, eps in curve["epsilon"].items():
    ax.plot(curve["queries_answered"], eps, label=name, lw=1.5)
  ax.set_xlabel("queries answered")
  ax.set_ylabel(f"ε at δ = {curve['delta']:g}")
  ax.set_title(title, fontsize=9)
  ax.grid(alpha=0.3)
  ax.legend(fontsize=7, frameon=False)
  fig.tight_layout()
  io.save_figure(fig, path, dpi=100)
  return pathlib.Path(path)


def plot_gap(gap: np.ndarray, num_teachers: int, path: str | pathlib.Path) -> None:
  """Histogram of the normalized gap between the top two vote counts (``gap [Q]``)."""
  fig = _figure(figsize=(5, 3.5))
  ax = fig.subplots()
  ax.hist(gap * 100, bins=50, color="tab:blue")
  ax.set_xlabel("normalized gap between top two vote counts (%)")
  ax.set_ylabel("test queries")
  ax.set_title(f"{experiment.PRIVATE_TITLE}{num_teachers} teachers, mean gap {gap.mean():.1%}",
               fontsize=9)
  fig.tight_layout()
  io.save_figure(fig, path, dpi=120)


def plot_history(history: list[dict[str, Any]], title: str, path: str | pathlib.Path) -> None:
  """The student's held-out accuracy against training steps (its ``history``)."""
  fig = _figure(figsize=(5, 3.5))
  ax = fig.subplots()
  ax.plot([h["step"] for h in history], [100 * h["eval_accuracy"] for h in history], "o-")
  ax.set_xlabel("training step")
  ax.set_ylabel("held-out accuracy (%)")
  ax.set_title(title, fontsize=9)
  ax.grid(alpha=0.3)
  fig.tight_layout()
  io.save_figure(fig, path, dpi=120)


def stamp_private(src: str | pathlib.Path, dst: str | pathlib.Path,
                  text: str = experiment.PRIVATE_TITLE.rstrip(": ")) -> pathlib.Path:
  """Writes ``src`` (a PNG) to ``dst`` under a red banner reading ``text``: the image
  itself then says it is private, whatever its own title (a figure drawn before its title
  said so, or one shown away from its caption). The figure's pixels are kept as they are;
  the banner adds a strip of the same width on top (its text not anti-aliased, so that a
  palette PNG stays one, exactly, where its colours allow). ``dst`` is written owner-only.
  """
  from matplotlib import font_manager  # pylint: disable=g-import-not-at-top
  from PIL import Image, ImageDraw, ImageFont  # pylint: disable=g-import-not-at-top
  with Image.open(src) as opened:
    image = opened.convert("RGBA")
  width, height = image.size
  band = max(24, height // 18)
  path = font_manager.findfont("DejaVu Sans:bold")
  size = int(0.6 * band)  # then shrunk to fit the width
  fit = int(size * 0.95 * width / ImageFont.truetype(path, size).getlength(text))
  size = max(6, min(size, fit))
  out = Image.new("RGBA", (width, height + band), (178, 34, 34, 255))  # firebrick
  out.paste(image, (0, band))
  draw = ImageDraw.Draw(out)
  draw.fontmode = "1"
  draw.text((width / 2, band / 2), text, fill="white", font=ImageFont.truetype(path, size),
            anchor="mm")
  # Owner-only, as the private report beside it (the banner marks it; the mode keeps it
  # the owner's until they choose to show it). The directory is the owner's choice.
  with io.open_private(dst, narrow_directory=False) as f:
    _palette_if_exact(out).save(f, format="PNG", optimize=True)
  return pathlib.Path(dst)


def _palette_if_exact(image):
  """``image`` (RGBA) as a palette image when that loses nothing (opaque, at most 256
  colours: a quarter of the bytes), else itself."""
  from PIL import Image  # pylint: disable=g-import-not-at-top
  rgba = np.asarray(image)
  if (rgba[..., 3] != 255).any():
    return image
  packed = rgba[..., :3].astype(np.uint32) @ np.array([1 << 16, 1 << 8, 1], np.uint32)
  colours, index = np.unique(packed, return_inverse=True)
  if colours.size > 256:
    return image
  out = Image.fromarray(index.reshape(packed.shape).astype(np.uint8), "P")
  out.putpalette(np.stack([colours >> 16, (colours >> 8) & 255, colours & 255], -1)
                 .astype(np.uint8).ravel().tolist())
  return out


def _figure(**kwargs):
  """A ``matplotlib.figure.Figure`` (the object API, not pyplot: no global backend or figure
  state is touched, so a notebook's backend stays as it was)."""
  from matplotlib.figure import Figure  # pylint: disable=g-import-not-at-top
  return Figure(**kwargs)
