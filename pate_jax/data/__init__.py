"""Datasets, partitions of the private data, the student split and tabular coding."""

from pate_jax.data.adult import ADULT_DOCTORATE, ADULT_LABEL, load_adult
from pate_jax.data.diabetes import load_diabetes
from pate_jax.data.uci_adult import (UCI_ADULT_CATEGORICAL, UCI_ADULT_COLUMNS, load_uci_adult,
                                     read_uci_adult)
from pate_jax.data._images import DATASETS, ImageDataset, load_image_dataset, to_float
from pate_jax.data._partition import (STUDENT_SPLITS, Partition, StudentSplit, partition,
                                      partition_indices, student_split)
from pate_jax.data._paths import ENV_VAR, resolve_data_dir
from pate_jax.data._table import (UNKNOWN_CODE, Encoder, TabularSplit, encode, fit_encoder,
                                  read_csv)

__all__ = [
    "ADULT_DOCTORATE", "ADULT_LABEL", "load_adult", "load_diabetes", "UCI_ADULT_CATEGORICAL",
    "UCI_ADULT_COLUMNS", "load_uci_adult", "read_uci_adult",
    "DATASETS", "ENV_VAR", "ImageDataset", "Partition", "STUDENT_SPLITS", "StudentSplit",
    "load_image_dataset", "partition", "partition_indices", "resolve_data_dir",
    "student_split", "to_float",
    # Tabular coding (Adult, Diabetes; re-exported by pate_jax.tabular).
    "UNKNOWN_CODE", "Encoder", "TabularSplit", "encode", "fit_encoder", "read_csv",
]
