"""Image datasets: tensorflow-datasets when reachable, else a local directory.

Search order for ``load_image_dataset(name, data_dir)``:

1. the offline directory (``data_dir`` argument / config field, else
   ``$PATE_JAX_DATA_DIR``), sub-directory ``<name>/`` holding any of
   * ``train.npz`` and ``test.npz`` with arrays ``image`` (uint8 N×H×W×C) and
     ``label`` (the layout of ``shared/data``),
   * the original idx files (``train-images-idx3-ubyte[.gz]`` ...; MNIST and
     Fashion-MNIST), or
   * SVHN's ``train_32x32.mat``, ``test_32x32.mat`` (and ``extra_32x32.mat``);
2. well-known system locations (Debian's ``dataset-fashion-mnist`` package);
3. tensorflow-datasets (``tfds.builder(...).as_data_source``), which downloads
   and prepares the dataset when it can reach its source (probed first with one
   short TCP connection, so that an offline machine falls through at once instead
   of sitting through tensorflow-datasets' download retries);
4. only if ``allow_fallback=True``: scikit-learn's bundled 8×8 digits, with a
   loud warning and ``ImageDataset.fallback = True`` so results record it (not where
   the data directory given does not exist: a mistyped path is an error).

If nothing works, a ``FileNotFoundError`` names the dataset, every place looked
and how to provide the data.
"""

from __future__ import annotations

import dataclasses
import gzip
import logging
import os
import pathlib
import struct
import warnings

import numpy as np

from pate_jax.data._paths import ENV_VAR, resolve_data_dir

# name -> (image shape, number of classes, tfds name)
DATASETS = {
    "mnist": ((28, 28, 1), 10, "mnist"),
    "fashion_mnist": ((28, 28, 1), 10, "fashion_mnist"),
    "svhn": ((32, 32, 3), 10, "svhn_cropped"),
    "cifar10": ((32, 32, 3), 10, "cifar10"),
    "digits": ((8, 8, 1), 10, None),
}
OFFLINE_ENV_VAR = "PATE_JAX_OFFLINE"
SYSTEM_DIRS = {"fashion_mnist": ["/usr/share/datasets/fashion-mnist"]}
# Where tensorflow-datasets downloads each dataset from (its builders' URLs), probed
# before a download.
TFDS_SOURCES = {
    "mnist": "https://storage.googleapis.com/cvdf-datasets/mnist/",
    "fashion_mnist": "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
    "svhn": "http://ufldl.stanford.edu/housenumbers/",
    "cifar10": "https://www.cs.toronto.edu/~kriz/",
}
PROBE_TIMEOUT_S = 5.0
_log = logging.getLogger(__name__)
_IDX_NAMES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


@dataclasses.dataclass(frozen=True)
class ImageDataset:
  """A labelled image dataset as host numpy arrays (uint8 images, int32 labels)."""
  name: str
  train_images: np.ndarray
  train_labels: np.ndarray
  test_images: np.ndarray
  test_labels: np.ndarray
  num_classes: int
  source: str
  extra_images: np.ndarray | None = None  # SVHN's 531,131 "extra" images.
  extra_labels: np.ndarray | None = None
  fallback: bool = False

  @property
  def image_shape(self) -> tuple[int, ...]:
    return tuple(self.train_images.shape[1:])


def _check_name(name: str) -> None:
  if name not in DATASETS:
    raise ValueError(f"dataset: unknown dataset {name!r}; known: {sorted(DATASETS)}")


def _check_split(name: str, split: str, images: np.ndarray, labels: np.ndarray,
                 where: str) -> tuple[np.ndarray, np.ndarray]:
  shape, num_classes, _ = DATASETS[name]
  if images.ndim == 3:
    images = images[..., None]
  if images.shape[1:] != shape:
    raise ValueError(f"{name} {split} images from {where} have shape {images.shape[1:]}, "
                     f"expected {shape} (N×H×W×C)")
  if images.dtype != np.uint8:
    raise ValueError(f"{name} {split} images from {where} have dtype {images.dtype}, "
                     "expected uint8 (raw 0..255)")
  labels = np.asarray(labels).reshape(-1)
  if len(labels) != len(images):
    raise ValueError(f"{name} {split} from {where}: {len(images)} images but "
                     f"{len(labels)} labels")
  return images, class_labels(labels, num_classes, f"{where}: 'label'")


def class_labels(labels: np.ndarray, num_classes: int, name: str) -> np.ndarray:
  """``labels`` as int32 class ids in ``[0, num_classes)``.

  Integer arrays, and float arrays holding whole numbers (``3.0``), are accepted; NaN,
  infinities, fractions (``3.7``), booleans and strings are not (casting would turn
  NaN into -2**31 and truncate 3.7 to 3).

  Raises:
    ValueError: naming ``name``, the first bad value and its index.
  """
  labels = np.asarray(labels)
  kind = labels.dtype.kind
  if kind not in "iuf":
    raise ValueError(f"{name} must hold integer class ids; got dtype {labels.dtype}")
  if kind == "f":
    whole = np.isfinite(labels) & (labels == np.round(labels))
    if not whole.all():
      i = int(np.flatnonzero(~whole)[0])
      raise ValueError(f"{name} must hold whole-number class ids; found {labels[i]} at "
                       f"index {i}")
  out_of_range = (labels < 0) | (labels >= num_classes)
  if out_of_range.any():
    i = int(np.flatnonzero(out_of_range)[0])
    raise ValueError(f"{name} must lie in [0, {num_classes}); found {labels[i]} at index {i}")
  return labels.astype(np.int32)


def _read_npz(path: pathlib.Path, keys: tuple[str, ...]) -> dict[str, np.ndarray]:
  """The arrays ``keys`` of an .npz file; a damaged file or a missing key is a
  ``ValueError`` naming the file (and the key)."""
  import zipfile  # pylint: disable=g-import-not-at-top
  import zlib  # pylint: disable=g-import-not-at-top
  try:
    with np.load(path, allow_pickle=False) as f:
      missing = [k for k in keys if k not in f.files]
      if missing:
        raise ValueError(f"{path}: missing key(s) {missing} (has {f.files}); the file must "
                         f"hold arrays {list(keys)}")
      out = {k: f[k] for k in keys}
  except (OSError, EOFError, KeyError, zipfile.BadZipFile, zlib.error) as e:
    raise ValueError(f"{path}: not a readable .npz file ({type(e).__name__}: {e})") from None
  except ValueError as e:
    if str(e).startswith(str(path)):
      raise
    raise ValueError(f"{path}: not a readable .npz file ({type(e).__name__}: {e})") from None
  for k, v in out.items():
    if not isinstance(v, np.ndarray):  # numpy hands back a damaged member's raw bytes
      raise ValueError(f"{path}: key {k!r} is not a .npy array (damaged file?)")
  return out


def _read_idx(path: pathlib.Path) -> np.ndarray:
  opener = gzip.open if path.suffix == ".gz" else open
  with opener(path, "rb") as f:
    data = f.read()
  zero, dtype_code, ndim = struct.unpack(">HBB", data[:4])
  if zero != 0 or dtype_code != 0x08:
    raise ValueError(f"{path} is not an unsigned-byte idx file")
  dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
  return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def _find(directory: pathlib.Path, stem: str) -> pathlib.Path | None:
  for candidate in (stem, stem + ".gz", stem.replace("-idx", ".idx")):
    if (directory / candidate).exists():
      return directory / candidate
  return None


def _load_local(name: str, directory: pathlib.Path) -> dict[str, tuple] | None:
  """Returns ``{split: (images, labels)}`` from ``directory`` or ``None``."""
  if (directory / "train.npz").exists() and (directory / "test.npz").exists():
    out = {}
    for split in ("train", "test", "extra"):
      path = directory / f"{split}.npz"
      if path.exists():
        arrays = _read_npz(path, ("image", "label"))
        out[split] = _check_split(name, split, arrays["image"], arrays["label"], str(path))
    return out
  if all(_find(directory, stem) for names in _IDX_NAMES.values() for stem in names):
    out = {}
    for split, (img_stem, lbl_stem) in _IDX_NAMES.items():
      img_path, lbl_path = _find(directory, img_stem), _find(directory, lbl_stem)
      out[split] = _check_split(name, split, _read_idx(img_path), _read_idx(lbl_path),
                                str(img_path))
    return out
  if (directory / "train_32x32.mat").exists() and (directory / "test_32x32.mat").exists():
    import scipy.io  # pylint: disable=g-import-not-at-top
    out = {}
    for split in ("train", "test", "extra"):
      path = directory / f"{split}_32x32.mat"
      if path.exists():
        mat = scipy.io.loadmat(path)
        images = np.ascontiguousarray(np.transpose(mat["X"], (3, 0, 1, 2)))
        labels = mat["y"].reshape(-1).astype(np.int64) % 10  # SVHN stores digit 0 as 10.
        out[split] = _check_split(name, split, images, labels, str(path))
    return out
  return None


def unreachable(url: str, timeout: float = PROBE_TIMEOUT_S) -> str | None:
  """Why ``url``'s host cannot be reached (one TCP connection, ``timeout`` seconds at
  most), or ``None`` if it can."""
  import socket  # pylint: disable=g-import-not-at-top
  import urllib.parse  # pylint: disable=g-import-not-at-top
  parts = urllib.parse.urlsplit(url)
  port = parts.port or (443 if parts.scheme == "https" else 80)
  try:
    with socket.create_connection((parts.hostname, port), timeout=timeout):
      return None
  except OSError as e:
    return f"{parts.hostname}:{port}: {type(e).__name__}: {e}"


class SourceUnreachableError(ConnectionError):
  """tensorflow-datasets would have to download a dataset whose source is unreachable."""


def _load_tfds(name: str, download: bool) -> dict[str, tuple]:
  """Loads ``name`` with tensorflow-datasets (its own cache: ``$TFDS_DATA_DIR``)."""
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  tfds_name = DATASETS[name][2]
  builder = tfds.builder(tfds_name, file_format="array_record")
  if not builder.is_prepared():
    if not download:
      raise FileNotFoundError(f"not prepared in {builder.data_dir} and downloads are off "
                              f"(${OFFLINE_ENV_VAR}=1)")
    url = getattr(builder, "URL", None) or TFDS_SOURCES.get(name)
    why = unreachable(url) if url else None
    if why:  # tfds would retry for minutes (3 min 24 s measured) before failing
      raise SourceUnreachableError(f"not prepared in {builder.data_dir} and its source {url} "
                                   f"is unreachable ({why})")
    builder.download_and_prepare()
  splits = ["train", "test"] + (["extra"] if name == "svhn" else [])
  out = {}
  for split in splits:
    source = builder.as_data_source(split=split)
    images = np.stack([source[i]["image"] for i in range(len(source))])
    labels = np.array([source[i]["label"] for i in range(len(source))])
    out[split] = _check_split(name, split, images, labels, f"tfds:{tfds_name}")
  return out


def _load_digits() -> dict[str, tuple]:
  from sklearn.datasets import load_digits  # pylint: disable=g-import-not-at-top
  digits = load_digits()
  # Pixel values are 0..16; rescale to 0..255 so preprocessing is shared.
  images = np.round(digits.images * (255.0 / 16.0)).astype(np.uint8)[..., None]
  labels = digits.target.astype(np.int32)
  n_train = 1_297  # 1,797 images: 1,297 private / 500 public+evaluation.
  return {"train": (images[:n_train], labels[:n_train]),
          "test": (images[n_train:], labels[n_train:])}


def load_image_dataset(name: str, data_dir: str | os.PathLike | None = None, *,
                       use_tfds: bool = True, download: bool | None = None,
                       allow_fallback: bool = False) -> ImageDataset:
  """Loads ``name`` ("mnist", "fashion_mnist", "svhn", "cifar10", "digits").

  See the module docstring for the search order.

  Args:
    name: dataset name.
    data_dir: offline data directory; defaults to ``$PATE_JAX_DATA_DIR``.
    use_tfds: try tensorflow-datasets when the local directory has no copy.
    download: let tensorflow-datasets download and prepare the dataset; default
      True unless ``$PATE_JAX_OFFLINE=1`` (without a network, tfds retries for
      minutes before giving up).
    allow_fallback: return scikit-learn's 8×8 digits (flagged ``fallback=True``)
      when ``name`` cannot be found anywhere; not when the data directory given does not
      exist (a mistyped path).

  Raises:
    ValueError: unknown name, or files of the wrong shape/dtype.
    FileNotFoundError: nothing found and ``allow_fallback`` is False, or the data
      directory given does not exist.
  """
  _check_name(name)
  if download is None:
    download = os.environ.get(OFFLINE_ENV_VAR, "0") != "1"
  if name == "digits":
    splits = _load_digits()
    return _assemble(name, splits, "sklearn.datasets.load_digits", fallback=False)
  root = resolve_data_dir(data_dir)
  looked = []
  candidates = ([root / name] if root is not None else []) + [
      pathlib.Path(p) for p in SYSTEM_DIRS.get(name, [])]
  if root is None:
    looked.append(f"no offline directory: neither `data_dir` nor ${ENV_VAR} is set")
  for directory in candidates:
    splits = _load_local(name, directory) if directory.is_dir() else None
    if splits is not None:
      # No absolute path: results files record where the data came from, not the machine.
      where = "the data directory" if root is not None and directory == root / name else (
          "a system directory")
      return _assemble(name, splits, f"local:{name}/ in {where}")
    looked.append(f"{directory}: " + ("no train/test npz, idx or *_32x32.mat files"
                                      if directory.is_dir() else "does not exist"))
  if use_tfds:
    try:
      return _assemble(name, _load_tfds(name, download), f"tfds:{DATASETS[name][2]}")
    except Exception as e:  # pylint: disable=broad-except
      looked.append(f"tensorflow-datasets '{DATASETS[name][2]}': {type(e).__name__}: "
                    f"{str(e).splitlines()[0][:200] if str(e) else ''}")
      if isinstance(e, SourceUnreachableError):
        _log.warning("%s: tensorflow-datasets cannot reach its source; to use a local copy, "
                     "set %s=DIR with %s/train.npz and %s/test.npz (e.g. ../shared/data)",
                     name, ENV_VAR, name, name)
  else:
    looked.append("tensorflow-datasets: disabled (use_tfds=False)")
  message = (f"Dataset {name!r} not found. Looked in:\n  - " + "\n  - ".join(looked) +
             f"\nProvide it by setting ${ENV_VAR} (or the config field data_dir) to a "
             f"directory containing {name}/train.npz and {name}/test.npz (arrays 'image' "
             "uint8 N×H×W×C and 'label'), or the original idx / *_32x32.mat files, or run "
             "on a machine where tensorflow-datasets can download it.")
  if allow_fallback and root is not None and not root.is_dir():
    raise FileNotFoundError(f"{message}\nNo fallback: the data directory given ({root}) does "
                            "not exist, which looks like a mistyped path rather than a "
                            "machine without the data.")
  if allow_fallback:
    warnings.warn(message + "\nFALLING BACK to scikit-learn's 8x8 digits: results are NOT "
                  f"{name} results.", stacklevel=2)
    logging.warning("FALLBACK: using sklearn 8x8 digits instead of %s", name)
    return _assemble("digits", _load_digits(), "sklearn.datasets.load_digits (FALLBACK for "
                     f"{name})", fallback=True)
  raise FileNotFoundError(message)


def _assemble(name: str, splits: dict[str, tuple], source: str, fallback: bool = False
              ) -> ImageDataset:
  extra = splits.get("extra", (None, None))
  return ImageDataset(name=name, train_images=splits["train"][0],
                      train_labels=splits["train"][1], test_images=splits["test"][0],
                      test_labels=splits["test"][1], num_classes=DATASETS[name][1],
                      source=source, extra_images=extra[0], extra_labels=extra[1],
                      fallback=fallback)


def to_float(images: np.ndarray) -> np.ndarray:
  """uint8 images → float32 in [0, 1]."""
  return np.asarray(images, dtype=np.float32) / np.float32(255.0)
