"""Students by name, built from a config's ``student`` block."""

from __future__ import annotations

from typing import Any, Callable

from pate_jax.students._loop import Student
from pate_jax.students._pate_g import pate_g
from pate_jax.students._supervised import classifier, supervised
from pate_jax.students._vat import vat


def _classifier_student(make: Callable[..., Student]) -> Callable[..., Student]:
  def build(num_classes: int, image_shape: tuple[int, ...], *, model: str = "gan_discriminator",
            model_kwargs: dict | None = None, **kwargs) -> Student:
    del image_shape
    return make(classifier(model, num_classes, **dict(model_kwargs or {})), **kwargs)
  return build


def _pate_g(num_classes: int, image_shape: tuple[int, ...], **kwargs) -> Student:
  return pate_g(num_classes, image_shape, **kwargs)


# name -> build(num_classes, image_shape, **kwargs) -> Student.
STUDENTS: dict[str, Callable[..., Student]] = {
    "supervised": _classifier_student(supervised),
    "pate_g": _pate_g,
    "vat": _classifier_student(vat),
}


def build_student(name: str, num_classes: int, image_shape: tuple[int, ...],
                  **kwargs: Any) -> Student:
  """The student ``name`` (see ``STUDENTS``) with its keyword arguments."""
  if name not in STUDENTS:
    raise ValueError(f"student: unknown student {name!r}; known: {sorted(STUDENTS)}")
  kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in kwargs.items()}
  return STUDENTS[name](num_classes, tuple(image_shape), **kwargs)
