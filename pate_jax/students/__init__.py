"""Students: what PATE publishes, trained on the public pool and a few noisy labels.

Every student is a :class:`Student` (pure ``init`` / ``step`` / ``logits``
functions over a pytree state) trained by the one loop :func:`fit` (``lax.scan``
segments, ``fold_in(key, step)`` randomness, orbax checkpoints; float32 matrix
products on every backend unless :attr:`Student.matmul_precision` says otherwise):

  supervised    the noisily labelled subset only (the paper's baseline)
  distillation  ``supervised`` on the ensemble's averaged probabilities at a
                temperature (non-private comparison point, Appendix B.1)
  pate_g        the semi-supervised GAN with feature matching (Section 3.1)
  vat           virtual adversarial training (Papernot et al. 2018's student)

:func:`fit_seeds` trains several seeds' students side by side in one vmapped program,
and :func:`active_learning` (Appendix B.2) retrains a student in rounds, querying
the teachers for its least confident pool inputs first. New students: write the
three functions, add the name to ``STUDENTS`` in ``_registry.py``.
"""

from pate_jax.students._active import ActiveResult, active_learning, least_confident
from pate_jax.students._data import (UNNOISED_LABELS, StudentData, answered_labels, epoch_batch,
                                     epoch_batches, load_public_data, make_student_data,
                                     with_labels)
from pate_jax.students._loop import (MATMUL_PRECISIONS, FitResult, GameCheck, GameFailed,
                                     SeedsFitResult, Student, accuracy,
                                     checked_matmul_precision, compile_fit, fit, fit_seeds,
                                     init_state, judge, matmul_precision, predict,
                                     probabilities, seeds_accuracy, training_segment)
from pate_jax.students._pate_g import discriminator_losses, feature_matching_loss, pate_g
from pate_jax.students._registry import STUDENTS, build_student
from pate_jax.students._supervised import (Classifier, class_loss, classifier, ema_update,
                                           supervised)
from pate_jax.students._vat import kl_divergence, vat, virtual_adversarial_perturbation
