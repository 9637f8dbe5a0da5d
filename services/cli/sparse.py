"""Copy a file as sparsely as it lies: only its data extents (SEEK_DATA/SEEK_HOLE), so
Kafka's preallocated index files (10 MB of holes each) cost what they hold, not their size."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator


def copy_sparse(src: str, dst: str, chunk: int = 1 << 20) -> int:
    """Copy a file's data and leave its holes holes; the bytes of data copied. Kafka
    preallocates each partition's active index files to 10 MB of holes: a plain copy of a
    mesh's log writes gigabytes of zeros for a few megabytes of records."""
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        size, copied = os.fstat(fin.fileno()).st_size, 0
        for start, end in _extents(fin.fileno(), size):
            for at in range(start, end, chunk):
                data = os.pread(fin.fileno(), min(chunk, end - at), at)
                os.pwrite(fout.fileno(), data, at)
                copied += len(data)
        os.ftruncate(fout.fileno(), size)
    return copied


def _extents(fd: int, size: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each run of data in the file (what the page cache holds included);
    the whole file where the filesystem cannot tell (no SEEK_DATA)."""
    at = 0
    while at < size:
        try:
            start = os.lseek(fd, at, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # only a hole is left
                return
            yield at, size
            return
        end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
        yield start, end
        at = end
