"""Errors written for a person: which failures mean a full disk."""

from __future__ import annotations

import errno
import sqlite3

from retrieval.errors import disk_full


def test_a_full_disk_is_told_from_its_errors_and_their_causes() -> None:
    assert disk_full(OSError(errno.ENOSPC, "No space left on device"))
    assert disk_full(OSError(errno.EDQUOT, "Disk quota exceeded"))
    assert disk_full(sqlite3.OperationalError("database or disk is full"))
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as inner:
            raise ValueError("could not save") from inner
    except ValueError as outer:
        assert disk_full(outer)
    assert not disk_full(OSError(errno.EACCES, "Permission denied"))
    assert not disk_full(sqlite3.OperationalError("database is locked"))
