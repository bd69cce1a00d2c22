"""The files of a sweep's output folder: chunk files written atomically, the manifest, the
checks that a loaded chunk belongs to this sweep."""

import json
import os
import re
from pathlib import Path
from typing import Any

import jax
import numpy as np
from jax.experimental import multihost_utils

from ._fingerprint import digest


def _flat_names(tree) -> dict[str, Any]:
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    return {jax.tree_util.keystr(path).strip("[]'\"."): leaf for path, leaf in leaves}


def _point_stamp(index: int, point: dict) -> str:
    """What a chunk file is stamped with besides the fingerprint: its grid point."""
    return f"{index}:{digest({k: point[k] for k in sorted(point)})}"


def _fill(shape, dtype) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype.kind == "f" or dtype.kind == "c":
        return np.full(shape, np.nan, dtype)
    if dtype.kind == "b":
        return np.zeros(shape, dtype)
    return np.full(shape, -1, dtype)


def _atomic_savez(path: Path, arrays: dict):
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    with open(tmp, "wb") as f:
        np.savez(f, **arrays)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


# what a chunk file records besides its stamps: the seconds its computation took
# (compilation included where it happened); NaN on loading a file written before it did
_SECONDS = "__seconds__"


def _load_chunk(path: Path, stamps: dict, expected: dict):
    """The chunk's arrays and its `_SECONDS`, or None when missing, partial, corrupt, or
    stamped for another sweep, grid point or seed range."""
    if not path.exists():
        return None
    try:
        # the file opened here and closed here, whatever np.load does with a damaged one
        # (it left a truncated chunk's handle open: a ResourceWarning)
        with open(path, "rb") as handle, np.load(handle, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
        for key, value in stamps.items():
            if np.asarray(data.pop(key)).tolist() != value:
                return None
        lo, hi = stamps["__seeds__"]
        for name, (shape, dtype) in expected.items():
            if data[name].shape != (hi - lo, *shape) or data[name].dtype != dtype:
                return None
        seconds = float(data[_SECONDS]) if _SECONDS in data else float("nan")
        return {**{name: data[name] for name in expected}, _SECONDS: seconds}
    except Exception:  # noqa: BLE001 - any unreadable file is recomputed, never merged
        return None


def _read_manifest(path: Path) -> dict | None:
    """`sweep.json`, or None when it is missing or damaged (then it is rewritten)."""
    try:
        manifest = json.loads(path.read_text())
        ok = (
            isinstance(manifest, dict)
            and isinstance(manifest.get("fingerprint"), str)
            and isinstance(manifest.get("spec"), dict)
            and isinstance(manifest.get("chunk_size"), int)
            and manifest["chunk_size"] >= 1
        )
        return manifest if ok else None
    except (OSError, ValueError):
        return None


def _write_json(path: Path, value: dict) -> None:
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(value, indent=1, default=str))
    os.replace(tmp, path)


def _chunk_ranges(counts, chunk_size: int) -> list[tuple[int, int]]:
    """The seed ranges `(lo, hi)` of a grid point's chunks. `counts`: the seed counts the sweep
    was run at, increasing (`_counts`); each run's new seeds [counts[k-1], counts[k]) are cut
    into chunks from counts[k-1], so that the chunks of the earlier runs keep their ranges."""
    ranges, start = [], 0
    for count in counts:
        ranges += [(lo, min(count, lo + chunk_size)) for lo in range(start, count, chunk_size)]
        start = count
    return ranges


def _chunks(fingerprint: str, index: int, point: dict, counts, chunk_size: int):
    """The chunks of one grid point: `(lo, hi, stamps)`, the stamps a valid file must carry
    (ranges from `_chunk_ranges`)."""
    stamp = _point_stamp(index, point)
    for lo, hi in _chunk_ranges(counts, chunk_size):
        yield lo, hi, {"__fingerprint__": fingerprint, "__point__": stamp, "__seeds__": [lo, hi]}


def _counts(manifest: dict) -> list[int]:
    """The seed counts a sweep folder was run at, increasing (older manifests: their one)."""
    return [int(c) for c in manifest.get("counts", [manifest["spec"]["seeds"]])]


# a chunk's file name (its failure record: the suffix `.failed.json` instead), and the one
# pattern that reads the grid point and seed range back
_CHUNK_NAME = "p{index:03d}_s{lo:07d}-{hi:07d}.npz"
_CHUNK_FIELDS = re.compile(r"p(\d+)_s(\d+)-(\d+)")


def _chunk_path(out: Path, index: int, lo: int, hi: int) -> Path:
    return out / "chunks" / _CHUNK_NAME.format(index=index, lo=lo, hi=hi)


def _failure_records(out: Path) -> list[tuple[int, int, int, Path]]:
    """(grid point, lo, hi, path) of every failure record in the folder, by name."""
    found = []
    for path in sorted((out / "chunks").glob("*.failed.json")):
        match = _CHUNK_FIELDS.fullmatch(path.name.removesuffix(".failed.json"))
        if match:
            found.append((int(match[1]), int(match[2]), int(match[3]), path))
    return found


def _drop_failure_records(out: Path, index: int, lo: int, hi: int) -> None:
    """Remove the failure records of grid point `index` whose seed range meets [lo, hi) (a
    chunk saved there: they are stale, whatever ranges they had)."""
    for point, first, end, path in _failure_records(out):
        if point == index and first < hi and lo < end:
            path.unlink(missing_ok=True)


def _agree_on_loading(data, path):
    """With several processes, all follow process 0's decision to load or compute a chunk
    (they take part in every computation together)."""
    if jax.process_count() == 1:
        return data
    load = bool(multihost_utils.broadcast_one_to_all(np.array(data is not None)))
    if load and data is None:
        raise RuntimeError(
            f"process 0 loaded {path} but process {jax.process_index()} cannot read it: "
            "`out` must be a folder that every process can read"
        )
    return data if load else None


def _with_counts(manifest: dict, more) -> dict:
    """The manifest with the seed counts `more` added (its `spec["seeds"]`: the largest)."""
    counts = sorted(set(_counts(manifest)) | {int(c) for c in more})
    return {**manifest, "counts": counts, "spec": {**manifest["spec"], "seeds": counts[-1]}}


def _refusal(out: Path, manifest: dict, identity: dict) -> str:
    """Why the folder `out`, whose manifest has another fingerprint, is refused."""
    old = manifest.get("identity", {})
    differs = sorted(k for k in set(old) | set(identity) if old.get(k) != identity.get(k))
    older = (
        " It was written by an older version, whose configuration counted the seeds."
        if differs == ["seeds"]
        else ""
    )
    return (
        f"{out} holds a sweep with a different configuration (differs in: "
        f"{', '.join(differs) or 'fingerprint'}).{older} Use another --out folder, or "
        "delete this one to start over; results of two configurations are never merged."
    )


def _record_batch_size(out: Path, manifest: dict, batch_size: int) -> None:
    """Write the batch size that ran into the manifest, re-read first: another process may
    have extended the sweep meanwhile (its seed counts are kept)."""
    now = _read_manifest(out / "sweep.json")
    if now is not None and now.get("fingerprint") == manifest["fingerprint"]:
        manifest = _with_counts(manifest, _counts(now))
    _write_json(out / "sweep.json", {**manifest, "batch_size": batch_size})


def _read_failure_records(out: Path, n_points: int) -> list[list[dict]]:
    """Per grid point, the failure records of its chunks that raised (and were not redone)."""
    records = _failure_records(out)
    return [
        [json.loads(path.read_text()) for point, _, _, path in records if point == i]
        for i in range(n_points)
    ]
