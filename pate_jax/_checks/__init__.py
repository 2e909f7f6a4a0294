"""The one validation layer of pate_jax: checks at the public boundary (private module).

Every public function validates its concrete arguments here and raises a
``ValueError`` in one style, naming the argument and the bad value::

  "<name> must <requirement>; got <value>"            (a scalar, a shape, a dtype)
  "<name> must <requirement>; found <value> at <idx>" (the first bad array entry)

Values are checked only where they are concrete: under ``jit``/``vmap``/``grad`` the
arguments are tracers and only static facts (shapes) are checked, so the public
functions compose with JAX transformations; the jitted cores never validate.

Concrete scalars, orders and moments come back as float64 numpy values (handed to the
jitted cores as they are: no eager device op per argument), traced ones as float64
tracers: call the converters inside ``jax.enable_x64`` where float64 matters (the
accountants do). Votes come back in their own dtype (cast inside the cores).
"""

from pate_jax._checks._arrays import (
    CorruptFileError,
    any_nan,
    batch_shape,
    finite_array,
    float64_array,
    moments,
    npz_arrays,
    num_queries,
    orders,
    positive_array,
    positive_vector,
)
from pate_jax._checks._common import default_platform, first_bad, is_traced
from pate_jax._checks._scalars import (
    boolean,
    budget,
    choice,
    delta,
    int_tuple,
    is_sha256,
    positive,
    positive_int,
    probability,
    real_number,
    scalar,
)
from pate_jax._checks._votes import (
    INT32_MAX_TOTAL,
    MAX_NOISY_TOTAL,
    check_equal_totals,
    frequencies,
    histograms,
    labels,
    query_ids,
    votes,
)
