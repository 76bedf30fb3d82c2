"""Fetching a public trace set from its source archive, verified file by file against a manifest.

A trace source (config ``trace_sources.<name>``) is a ``.tar.gz`` archive at a fixed commit (a
GitHub archive URL), the archive folders to take from it and a committed checksum manifest: the
relative path, size and SHA-256 of every file, generated from a copy known to be right
(``python -m slim.traces.fetch manifest <folder> <manifest.tsv>``).

`fetch_source` downloads the archive with the standard library (timeouts, retries, an HTTP
``Range`` request to resume a partial download), extracts exactly the manifest's files into a
staging folder, checks each one's size and SHA-256, and only then renames the staging folder to
its final place: the fetched folder exists only when complete. Every failure (no network, a 404,
a truncated or corrupt archive, a file that does not match) raises `TraceFetchError` naming the
URL or the file, and leaves no half-written folder; a rerun resumes the download.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import logging
import os
import shutil
import sys
import tarfile
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from slim.atomic import write_atomic
from slim.errors import SlimError

logger = logging.getLogger(__name__)

MANIFEST_HEADER = "path\tsize_bytes\tsha256"
DOWNLOADS_FOLDER = ".downloads"
"""Beside the fetched folders, the archives being (or already) downloaded; hidden from ingest."""
_CHUNK_BYTES = 1 << 20
# HTTP statuses worth another try: the server is busy or briefly down, not "this does not exist".
_TRANSIENT_HTTP_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})


class TraceFetchError(SlimError):
    """A trace source could not be fetched or verified; the message names the URL or the file."""


class CorruptArchiveError(TraceFetchError):
    """The downloaded archive cannot be read to its end: truncated, or its compressed data is bad."""


@dataclass(frozen=True)
class ManifestEntry:
    """One file of a trace set: its path relative to the set's folder, size and SHA-256."""

    path: str
    size_bytes: int
    sha256: str


@dataclass(frozen=True)
class TraceSource:
    """A public trace set and where it comes from (config ``trace_sources.<name>``).

    `folders` maps each local folder of the set (``output_length``) to the archive folder it is
    taken from (``benchmarks/definitive_results/advisor/output_length``), relative to the
    archive's single top folder (GitHub's ``<repo>-<commit>/``).
    """

    name: str
    url: str
    folders: Mapping[str, str]
    checksums_file: Path
    license: str = ""


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for chunk in iter(lambda: stream.read(_CHUNK_BYTES), b""):
            digest.update(chunk)
    return digest.hexdigest()


def build_manifest(root: Path) -> list[ManifestEntry]:
    """Every regular file under `root`, sorted by relative path (hidden entries included: a
    fetched set must match byte for byte)."""
    entries = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        entries.append(ManifestEntry(path.relative_to(root).as_posix(), path.stat().st_size, file_sha256(path)))
    return entries


def write_manifest(entries: Sequence[ManifestEntry], path: Path) -> None:
    lines = [MANIFEST_HEADER] + [f"{e.path}\t{e.size_bytes}\t{e.sha256}" for e in entries]
    write_atomic(path, lambda target: target.write_text("\n".join(lines) + "\n", encoding="utf-8"))


def read_manifest(path: Path) -> list[ManifestEntry]:
    """The manifest's entries; `TraceFetchError` naming the file and line if it is malformed."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise TraceFetchError(f"checksum manifest {path} cannot be read: {error}") from error
    if not lines or lines[0] != MANIFEST_HEADER:
        raise TraceFetchError(f"checksum manifest {path}: first line must be '{MANIFEST_HEADER}'")
    entries = []
    for number, line in enumerate(lines[1:], start=2):
        fields = line.split("\t")
        relative = PurePosixPath(fields[0]) if fields else PurePosixPath()
        if (len(fields) != 3 or not fields[1].isdigit() or len(fields[2]) != 64 or relative.is_absolute()
                or ".." in relative.parts):
            raise TraceFetchError(f"checksum manifest {path}, line {number}: expected a relative path, a size in "
                                  f"bytes and a SHA-256, tab-separated; got {line!r}")
        entries.append(ManifestEntry(fields[0], int(fields[1]), fields[2]))
    return entries


def _archive_file_name(source: TraceSource) -> str:
    url_digest = hashlib.sha256(source.url.encode()).hexdigest()[:12]
    return f"{source.name}-{url_digest}.tar.gz"


def _open(url: str, offset: int, timeout_s: float) -> http.client.HTTPResponse:
    headers = {"User-Agent": "slim-replication trace fetch"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    return urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout_s)


def _expected_total_bytes(response: http.client.HTTPResponse, offset: int) -> int | None:
    """The archive's full size, from Content-Range (a resumed download) or Content-Length."""
    content_range = response.headers.get("Content-Range", "")
    if response.status == 206 and "/" in content_range and content_range.rsplit("/", 1)[1].isdigit():
        return int(content_range.rsplit("/", 1)[1])
    length = response.headers.get("Content-Length")
    if length and length.isdigit():
        return int(length) + (offset if response.status == 206 else 0)
    return None


def download(url: str, destination: Path, *, timeout_s: float = 60.0, attempts: int = 4,
             backoff_s: float = 2.0, sleep: Callable[[float], None] = time.sleep) -> Path:
    """Download `url` to `destination`, resuming ``destination.part`` where a previous try stopped.

    Transient failures (no answer, a dropped connection, HTTP 5xx/429) are retried `attempts`
    times in all, each resuming with a ``Range`` request (or restarting where the server ignores
    it); a permanent one (HTTP 404) fails at once. `destination` appears only when the download
    is complete (Content-Length checked where the server sends one).
    """
    if destination.is_file():
        return destination
    destination.parent.mkdir(parents=True, exist_ok=True)
    partial = destination.with_name(destination.name + ".part")
    last_problem = "no attempt made"
    for attempt in range(1, attempts + 1):
        offset = partial.stat().st_size if partial.is_file() else 0
        try:
            with _open(url, offset, timeout_s) as response:
                if offset and response.status != 206:
                    offset = 0  # the server ignored the Range request: start again
                total_bytes = _expected_total_bytes(response, offset)
                with open(partial, "ab" if offset else "wb") as stream:
                    received = offset
                    for chunk in iter(lambda: response.read(_CHUNK_BYTES), b""):
                        stream.write(chunk)
                        received += len(chunk)
            if total_bytes is not None and received != total_bytes:
                raise http.client.IncompleteRead(b"", total_bytes - received)
            os.replace(partial, destination)
            logger.info("downloaded %s (%d bytes) to %s", url, received, destination)
            return destination
        except urllib.error.HTTPError as error:
            if error.code == 416 and offset:  # the partial file is bad or complete; start again
                partial.unlink(missing_ok=True)
                last_problem = "HTTP 416 for a resumed download"
                continue
            if error.code not in _TRANSIENT_HTTP_STATUSES:
                raise TraceFetchError(f"{url}: HTTP {error.code} {error.reason}; check the source's URL in the "
                                      "config (trace_sources)") from error
            last_problem = f"HTTP {error.code} {error.reason}"
        except (urllib.error.URLError, OSError, http.client.HTTPException) as error:
            reason = getattr(error, "reason", None) or error
            last_problem = f"{type(error).__name__}: {reason}"
        logger.warning("download of %s failed (attempt %d of %d): %s", url, attempt, attempts, last_problem)
        if attempt < attempts:
            sleep(backoff_s * 2 ** (attempt - 1))
    kept = f"; {partial.stat().st_size} bytes kept in {partial} to resume" if partial.is_file() else ""
    raise TraceFetchError(f"cannot download {url} after {attempts} attempts ({last_problem}){kept}; check the "
                          "network, then rerun `snakemake --cores 2 fetch_traces` to resume")


def _local_path(member_name: str, folders: Mapping[str, str]) -> str | None:
    """The member's path in the trace set, or None if it lies outside every configured folder."""
    parts = PurePosixPath(member_name).parts
    if len(parts) < 2:
        return None
    inside = PurePosixPath(*parts[1:]).as_posix()  # below the archive's single top folder
    for local, archived in folders.items():
        prefix = archived.strip("/") + "/"
        if inside.startswith(prefix):
            return f"{local.strip('/')}/{inside[len(prefix):]}"
    return None


def extract_verified(archive: Path, source: TraceSource, manifest: Sequence[ManifestEntry], staging: Path) -> None:
    """Extract exactly the manifest's files of `archive` into `staging`, checking each one's size
    and SHA-256 as it is written; `TraceFetchError` on a corrupt or truncated archive, a file
    that does not match, or a manifest file the archive lacks."""
    wanted = {entry.path: entry for entry in manifest}
    written: set[str] = set()
    try:
        with tarfile.open(archive, mode="r|gz") as stream:
            for member in stream:
                local = _local_path(member.name, source.folders)
                if local is None or local not in wanted or not member.isfile():
                    continue
                entry = wanted[local]
                target = staging / local
                target.parent.mkdir(parents=True, exist_ok=True)
                digest = hashlib.sha256()
                size = 0
                reader = stream.extractfile(member)
                with open(target, "wb") as output:
                    for chunk in iter(lambda: reader.read(_CHUNK_BYTES), b""):
                        digest.update(chunk)
                        size += len(chunk)
                        output.write(chunk)
                if size != entry.size_bytes or digest.hexdigest() != entry.sha256:
                    raise TraceFetchError(
                        f"{source.name}: {local} (archive member {member.name}) does not match the checksum "
                        f"manifest {source.checksums_file}: {size} bytes, sha256 {digest.hexdigest()}; expected "
                        f"{entry.size_bytes} bytes, sha256 {entry.sha256}")
                written.add(local)
    except (tarfile.TarError, EOFError, zlib.error) as error:
        problem = f"{type(error).__name__}: {error}"
        raise CorruptArchiveError(f"{source.name}: archive {archive} (from {source.url}) is truncated or corrupt "
                                  f"({problem}); it was removed: rerun to download it again") from error
    missing = sorted(set(wanted) - written)
    if missing:
        raise TraceFetchError(f"{source.name}: {len(missing)} file(s) of the checksum manifest are not in the archive "
                              f"from {source.url}, e.g. {', '.join(missing[:3])}")


def fetch_source(source: TraceSource, destination: Path, *, downloads: Path | None = None,
                 timeout_s: float = 60.0, attempts: int = 4, backoff_s: float = 2.0) -> Path:
    """Fetch `source` into `destination` (created only when every file is verified) and return it.

    The archive is downloaded into `downloads` (default ``<destination's folder>/.downloads``),
    where an interrupted download is resumed by the next call; it is removed once the folder is
    complete, and also when it fails verification, so that a rerun downloads it again.
    """
    manifest = read_manifest(source.checksums_file)
    if destination.is_dir():
        logger.info("%s is already fetched at %s", source.name, destination)
        return destination
    downloads = downloads or destination.parent / DOWNLOADS_FOLDER
    archive = download(source.url, downloads / _archive_file_name(source), timeout_s=timeout_s,
                       attempts=attempts, backoff_s=backoff_s)
    staging = destination.with_name(f".{destination.name}.staging-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        try:
            extract_verified(archive, source, manifest, staging)
        except TraceFetchError:
            archive.unlink(missing_ok=True)  # a rerun downloads it again rather than failing the same way
            raise
        os.replace(staging, destination)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    archive.unlink(missing_ok=True)
    try:
        downloads.rmdir()  # only if no other source's download is in it
    except OSError:
        pass
    logger.info("%s: %d files verified in %s", source.name, len(manifest), destination)
    return destination


def trace_source(name: str, entry: Mapping[str, object], base_dir: Path = Path(".")) -> TraceSource:
    """A `TraceSource` from its config entry (``trace_sources.<name>``, schema-validated)."""
    return TraceSource(name=name, url=str(entry["url"]), folders=dict(entry["folders"]),  # type: ignore[arg-type]
                       checksums_file=base_dir / str(entry["checksums"]), license=str(entry.get("license", "")))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m slim.traces.fetch",
                                     description="Write the checksum manifest of a trace folder.")
    commands = parser.add_subparsers(dest="command", required=True)
    manifest = commands.add_parser("manifest", help="path, size and SHA-256 of every file under FOLDER")
    manifest.add_argument("folder", type=Path)
    manifest.add_argument("output", type=Path)
    args = parser.parse_args(argv)
    if not args.folder.is_dir():
        print(f"error: {args.folder} is not a folder", file=sys.stderr)
        return 2
    entries = build_manifest(args.folder)
    write_manifest(entries, args.output)
    print(f"{args.output}: {len(entries)} files, {sum(e.size_bytes for e in entries)} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
