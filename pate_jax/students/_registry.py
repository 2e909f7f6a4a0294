"""Students by name, built from a config's ``student`` block."""

from __future__ import annotations

import functools
from typing import Any, Callable

from pate_jax.students._loop import Student, checked_matmul_precision
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
  """The student ``name`` (see ``STUDENTS``) with its keyword arguments.

  Equal arguments (hashable ones: numbers, strings, tuples) give the same object, and so
  share its compiled programs (:func:`pate_jax.students.fit` compiles per student): what
  :func:`pate_jax.students.compile_fit` compiled ahead serves the stage that builds the
  student again from the same config. ``matmul_precision`` (any student) sets
  :attr:`Student.matmul_precision` ("float32" unless given; "default" or None: the
  backend's own).
  """
  if name not in STUDENTS:
    raise ValueError(f"student: unknown student {name!r}; known: {sorted(STUDENTS)}")
  kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in kwargs.items()}
  args = (name, int(num_classes), tuple(int(n) for n in image_shape),
          tuple(sorted(kwargs.items())))
  try:
    hash(args)
  except TypeError:  # e.g. a dict of model arguments: a new object
    return _make(name, *args[1:3], **kwargs)
  return _build(*args)


@functools.lru_cache(maxsize=16)
def _build(name: str, num_classes: int, image_shape: tuple[int, ...],
           kwargs: tuple[tuple[str, Any], ...]) -> Student:
  return _make(name, num_classes, image_shape, **dict(kwargs))


def _make(name: str, num_classes: int, image_shape: tuple[int, ...], *,
          matmul_precision: str | None = "float32", **kwargs: Any) -> Student:
  precision = checked_matmul_precision(matmul_precision, "student.matmul_precision")
  return STUDENTS[name](num_classes, image_shape, **kwargs)._replace(
      matmul_precision=precision)

