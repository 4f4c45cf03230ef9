"""The archive in a local directory (the default backend).

Layout: ``<root>/keys/<hex of the key's UTF-8>/`` holds ``manifest.json`` (the headers,
ascending) and one file per segment holding its canonical bytes. Hex of UTF-8 sorts as
the keys' code points do, so a listing in name order is in key order. A write takes the
key's lock (``flock``, which also excludes other processes), writes new files first and
then replaces the manifest atomically (``os.replace``, fsynced): a crash leaves the old
manifest or the new one, never half of one, and at worst a segment file nothing names.
"""

from __future__ import annotations

import fcntl
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from streams.archive.api import ArchiveStore, KeyPage, Segment, SegmentHeader
from streams.archive.exceptions import ArchiveCorruptError
from streams.archive.rules import (
    DIGEST_PREFIX,
    canonical_bytes,
    check_unchanged,
    classify_append,
    verified,
)
from streams.infra.durable_file import make_folder_durably, write_durably

MANIFEST = "manifest.json"
_LOCK = ".lock"


class DirectoryArchive(ArchiveStore):
    def __init__(self, root: Path) -> None:
        self.root = root
        self._keys = root / "keys"
        make_folder_durably(self._keys)

    # --- layout -------------------------------------------------------------------

    def _folder(self, key: str) -> Path:
        return self._keys / key.encode().hex()

    @staticmethod
    def segment_file(folder: Path, header: SegmentHeader) -> Path:
        digest = header.digest.removeprefix(DIGEST_PREFIX)[:16]
        return folder / f"{header.from_suid}-{header.through_suid}-{digest}.segment"

    @contextmanager
    def _locked(self, key: str, exclusive: bool) -> Iterator[Path]:
        folder = self._folder(key)
        make_folder_durably(folder)
        with open(folder / _LOCK, "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            yield folder  # the lock goes with the file's closing

    @staticmethod
    def _manifest(folder: Path) -> list[SegmentHeader]:
        try:
            text = (folder / MANIFEST).read_text()
        except FileNotFoundError:
            return []
        try:
            return [SegmentHeader.model_validate(h) for h in json.loads(text)]
        except (ValueError, TypeError) as exc:
            raise ArchiveCorruptError(f"{folder / MANIFEST} does not parse: {exc}") from exc

    def _publish(self, folder: Path, headers: Sequence[SegmentHeader]) -> None:
        manifest = json.dumps([h.model_dump() for h in headers], indent=1)
        write_durably(folder / MANIFEST, manifest.encode())

    # --- the store ----------------------------------------------------------------

    def _append(self, key: str, segment: Segment) -> None:
        with self._locked(key, exclusive=True) as folder:
            held = self._manifest(folder)
            if classify_append(key, held, segment.header) == "noop":
                return
            body = canonical_bytes(segment.records)
            write_durably(self.segment_file(folder, segment.header), body)
            self._publish(folder, [*held, segment.header])

    def _headers(self, key: str) -> list[SegmentHeader]:
        if not self._folder(key).exists():
            return []
        return self._manifest(self._folder(key))

    def _read(
        self, key: str, from_suid: str | None = None, through_suid: str | None = None
    ) -> list[Segment]:
        if not self._folder(key).exists():
            return []
        with self._locked(key, exclusive=False) as folder:
            wanted = [h for h in self._manifest(folder) if h.overlaps(from_suid, through_suid)]
            try:
                bodies = [self.segment_file(folder, h).read_bytes() for h in wanted]
            except FileNotFoundError as exc:
                raise ArchiveCorruptError(
                    f"archive {key!r}: a segment its manifest names is gone: {exc.filename}",
                    key=key,
                ) from exc
        return [
            Segment(header=h, records=tuple(verified(key, h, body)))
            for h, body in zip(wanted, bodies, strict=True)
        ]

    def _list_keys(self, cursor: str | None = None, limit: int = 100) -> KeyPage:
        after = None if cursor is None else cursor.encode().hex()
        keys: list[str] = []
        for name in sorted(f.name for f in self._keys.iterdir()):
            if (after is None or name > after) and self._manifest(self._keys / name):
                keys.append(bytes.fromhex(name).decode())
                if len(keys) > limit:
                    break
        page = keys[:limit]
        return KeyPage(keys=page, next_cursor=page[-1] if len(keys) > limit else None)

    def _replace_all(
        self, key: str, expected: Sequence[SegmentHeader], segments: Sequence[Segment]
    ) -> None:
        with self._locked(key, exclusive=True) as folder:
            held = self._manifest(folder)
            check_unchanged(key, held, expected)
            for segment in segments:
                write_durably(
                    self.segment_file(folder, segment.header), canonical_bytes(segment.records)
                )
            self._publish(folder, [s.header for s in segments])
            self._remove_unlisted(folder, [s.header for s in segments])

    def _delete_key(self, key: str) -> None:
        if not self._folder(key).exists():
            return
        with self._locked(key, exclusive=True) as folder:
            self._publish(folder, [])
            self._remove_unlisted(folder, [])

    def _remove_unlisted(self, folder: Path, kept: Sequence[SegmentHeader]) -> None:
        keep = {self.segment_file(folder, h).name for h in kept}
        for file in folder.glob("*.segment"):
            if file.name not in keep:
                file.unlink()
