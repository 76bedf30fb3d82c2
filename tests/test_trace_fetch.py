"""Fetching the public traces, offline: a local HTTP server started here serves an archive built
from ../shared in the authors' repository layout, and the fetch runs against it end to end, then
against a corrupted byte, a truncated archive, a 404, a dropped connection and no server at all."""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from slim.traces.fetch import (
    TraceFetchError,
    TraceSource,
    build_manifest,
    download,
    fetch_source,
    read_manifest,
    write_manifest,
)
from tests.conftest import REPO, copy_workflow

COMMIT = "a9186347e6146b4547ed25674b4e9034eb1e9abf"
TOP = f"vLLMBatchingMemoryGap-{COMMIT}"
CONFIG = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
FOLDERS = CONFIG["trace_sources"]["vllm-h100-public"]["folders"]
CHECKSUMS = REPO / CONFIG["trace_sources"]["vllm-h100-public"]["checksums"]
SMALL_FOLDER = "background/opt-1.3b"   # a subset of the manifest for the failure cases


def _archive(shared: Path, only: str = "", corrupt: str | None = None) -> bytes:
    """A .tar.gz of `shared` in the repository's layout (plus files the manifest does not name);
    `corrupt` flips one byte of that file."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as archive:
        def add(name: str, data: bytes) -> None:
            member = tarfile.TarInfo(name)
            member.size, member.mtime = len(data), 0
            archive.addfile(member, io.BytesIO(data))
        add(f"{TOP}/README.md", b"not a trace\n")
        add(f"{TOP}/benchmarks/definitive_results/other/_1_/x.json", b"{}")
        for local, archived in FOLDERS.items():
            for path in sorted((shared / local).rglob("*")):
                relative = path.relative_to(shared).as_posix()
                if path.is_file() and relative.startswith(only):
                    data = path.read_bytes()
                    if relative == corrupt:
                        data = data[:10] + bytes([data[10] ^ 0xFF]) + data[11:]
                    add(f"{TOP}/{archived}/{relative[len(local) + 1:]}", data)
    return buffer.getvalue()


class _Server:
    """Serves `files` (path -> bytes) on 127.0.0.1 with HTTP Range support; `drop_after` cuts the
    first response after that many bytes, as a dropped connection would."""

    def __init__(self, files: dict[str, bytes], drop_after: int | None = None):
        self.files, self.drop_after, self.ranges, self.requests = files, drop_after, [], 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep the test output clean
                pass

            def do_GET(self):
                server.requests += 1
                data = server.files.get(self.path)
                if data is None:
                    self.send_error(404, "Not Found")
                    return
                start = 0
                requested = self.headers.get("Range")
                server.ranges.append(requested)
                if requested:
                    start = int(requested.split("=")[1].split("-")[0])
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                self.send_header("Content-Length", str(len(data) - start))
                self.end_headers()
                body = data[start:]
                if server.drop_after is not None:
                    body, server.drop_after = body[:server.drop_after], None
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}{path}"

    def __enter__(self) -> "_Server":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def full_archive(shared_traces_dir) -> bytes:
    return _archive(shared_traces_dir)


@pytest.fixture
def small_source(tmp_path, shared_traces_dir):
    """A source of one model's ShareGPT runs: its manifest is the committed one's subset."""
    entries = [entry for entry in read_manifest(CHECKSUMS) if entry.path.startswith(SMALL_FOLDER + "/")]
    assert entries
    write_manifest(entries, tmp_path / "small.tsv")

    def source(url: str) -> TraceSource:
        return TraceSource("vllm-h100-public", url, FOLDERS, tmp_path / "small.tsv")
    return source


def _leftovers(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.iterdir()) if cache.exists() else []


def test_the_committed_manifest_is_the_shared_traces_byte_for_byte(shared_traces_dir):
    assert read_manifest(CHECKSUMS) == build_manifest(shared_traces_dir)


def _local_source_config(tmp_path: Path, url: str, **fetch) -> Path:
    """A config file to merge over the shipped one: the source's URL on the local server."""
    override = tmp_path / "local_source.yaml"
    entry = {**CONFIG["trace_sources"]["vllm-h100-public"], "url": url}
    override.write_text(yaml.safe_dump({"trace_sources": {"vllm-h100-public": entry},
                                        **({"fetch": fetch} if fetch else {})}))
    return override


def _snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=workdir, capture_output=True, text=True)


def _assert_fetched_and_planned(workdir: Path) -> None:
    fetched = workdir / "raw_traces" / "fetched" / "vllm-h100-public"
    files = [entry for entry in build_manifest(fetched) if entry.path != ".snakemake_timestamp"]  # Snakemake's mark
    assert files == read_manifest(CHECKSUMS)                     # exactly the manifest's files
    assert _leftovers(fetched.parent) == ["vllm-h100-public"]    # no archive, no staging folder left
    planned = _snakemake(workdir, "-n", "all")
    assert planned.returncode == 0, planned.stderr[-3000:]
    assert not _skipped_public_datasets(planned.stderr)
    assert "wildcards: dataset=h100-public" in planned.stdout


def _skipped_public_datasets(stderr: str) -> list[str]:
    """The lines skipping a dataset of the fetched source (NVIDIA's sweep, with no download configured, is
    still skipped in a clone without ../shared)."""
    return [line for line in stderr.splitlines() if "skipped" in line and "vllm-h100-public" in line]


@pytest.mark.integration
def test_fetch_traces_end_to_end_in_a_clone_without_shared(tmp_path, full_archive, shared_traces_dir):
    workdir = copy_workflow(tmp_path / "repo")    # no ../shared beside it
    with _Server({"/archive.tar.gz": full_archive}) as server:
        override = _local_source_config(tmp_path, server.url("/archive.tar.gz"))
        result = _snakemake(workdir, "--cores", "2", "fetch_traces", "--configfile", "config/config.yaml",
                            str(override))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "dataset 'h100-public' skipped" in result.stderr   # said while planning: not fetched yet
    _assert_fetched_and_planned(workdir)


@pytest.mark.integration
def test_fetch_auto_fetches_missing_traces_while_planning(tmp_path, full_archive, shared_traces_dir):
    workdir = copy_workflow(tmp_path / "repo")
    with _Server({"/archive.tar.gz": full_archive}) as server:
        override = _local_source_config(tmp_path, server.url("/archive.tar.gz"), auto=True)
        result = _snakemake(workdir, "-n", "all", "--configfile", "config/config.yaml", str(override))
        assert server.requests == 1
    assert result.returncode == 0, result.stderr[-3000:]
    assert "fetch.auto: fetching trace source 'vllm-h100-public'" in result.stderr
    assert not _skipped_public_datasets(result.stderr)
    _assert_fetched_and_planned(workdir)


def test_one_corrupted_byte_names_the_file_and_leaves_nothing(tmp_path, small_source, shared_traces_dir):
    bad = sorted((shared_traces_dir / SMALL_FOLDER).rglob("*.json"))[0].relative_to(shared_traces_dir).as_posix()
    with _Server({"/a.tar.gz": _archive(shared_traces_dir, SMALL_FOLDER, corrupt=bad)}) as server:
        with pytest.raises(TraceFetchError, match=f"{bad}.*does not match the checksum manifest"):
            fetch_source(small_source(server.url("/a.tar.gz")), tmp_path / "cache" / "vllm-h100-public")
    assert _leftovers(tmp_path / "cache") == [".downloads"]
    assert _leftovers(tmp_path / "cache" / ".downloads") == []     # the bad archive is not kept


def test_a_truncated_archive_is_an_error_and_a_rerun_fetches_again(tmp_path, small_source, shared_traces_dir):
    archive = _archive(shared_traces_dir, SMALL_FOLDER)
    destination = tmp_path / "cache" / "vllm-h100-public"
    with _Server({"/a.tar.gz": archive[: len(archive) // 2]}) as server:
        with pytest.raises(TraceFetchError, match="truncated or corrupt"):
            fetch_source(small_source(server.url("/a.tar.gz")), destination)
        assert not destination.exists()
        server.files["/a.tar.gz"] = archive                           # the source is repaired
        fetch_source(small_source(server.url("/a.tar.gz")), destination)
    assert build_manifest(destination) == read_manifest(tmp_path / "small.tsv")


def test_a_404_names_the_url_at_once(tmp_path, small_source):
    with _Server({}) as server:
        url = server.url("/missing.tar.gz")
        with pytest.raises(TraceFetchError, match=f"{url}: HTTP 404"):
            fetch_source(small_source(url), tmp_path / "cache" / "vllm-h100-public", attempts=3, backoff_s=0)
        assert server.requests == 1                                   # not retried
    assert not (tmp_path / "cache" / "vllm-h100-public").exists()


def test_no_server_is_an_error_naming_the_url(tmp_path, small_source):
    with _Server({}) as server:
        url = server.url("/a.tar.gz")
    # the server is shut: nothing listens on that port any more
    with pytest.raises(TraceFetchError, match=f"cannot download {url} after 2 attempts"):
        fetch_source(small_source(url), tmp_path / "cache" / "vllm-h100-public", attempts=2, backoff_s=0,
                     timeout_s=5)
    assert not (tmp_path / "cache" / "vllm-h100-public").exists()


def test_a_dropped_download_resumes_where_it_stopped(tmp_path, shared_traces_dir):
    archive = _archive(shared_traces_dir, SMALL_FOLDER)
    with _Server({"/a.tar.gz": archive}, drop_after=len(archive) // 3) as server:
        target = download(server.url("/a.tar.gz"), tmp_path / "a.tar.gz", attempts=2, backoff_s=0)
    assert target.read_bytes() == archive
    assert server.ranges == [None, f"bytes={len(archive) // 3}-"]   # the second request resumed
