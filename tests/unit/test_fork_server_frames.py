"""The host's side of a fork server's stream: frames parsed whatever their chunking, the output
files' tar read within its caps, and a stream that is not the server's framing refused with a
bound on what it can make the host hold."""

from __future__ import annotations

import io
import itertools
import tarfile
import threading
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox.base import Limits
from sandbox.docker_sandbox import out_archive_bytes
from sandbox.fork_server import _Frames
from sandbox.outputs import read_output_archive

LIMITS = Limits()


def _tar(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w|", format=tarfile.PAX_FORMAT) as archive:
        for name, content in files.items():
            member = tarfile.TarInfo(name)
            member.size = len(content)
            archive.addfile(member, io.BytesIO(content))
    return buffer.getvalue()


def _frame(kind: bytes, number: int, payload: bytes) -> bytes:
    return kind + f" {number} {len(payload)}\n".encode() + payload


def _chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(cut, len(data)) for cut in cuts} | {0, len(data)})
    return [data[start:end] for start, end in itertools.pairwise(points)]


def _frames_of(chunks: list[bytes]) -> _Frames:
    """A parser fed ``chunks`` of the server's stream during job 0, once it has read them all."""
    begun = threading.Event()

    def stream() -> Iterator[tuple[bytes | None, bytes | None]]:
        begun.wait(5)
        for chunk in chunks:
            yield chunk, None

    frames = _Frames(stream())
    frames.begin(0, LIMITS)
    begun.set()
    assert frames.closed.wait(30)
    return frames


tensor_files = st.dictionaries(
    st.from_regex(r"[a-z0-9.]{1,12}", fullmatch=True).filter(lambda n: n not in {".", ".."}),
    st.binary(max_size=3000), max_size=5)


@settings(max_examples=60, deadline=None)
@given(files=tensor_files, events=st.binary(max_size=500), cuts=st.lists(
    st.integers(min_value=0, max_value=20000), max_size=12), frame_bytes=st.sampled_from(
    [7, 512, 10240]))
def test_the_output_files_come_back_whatever_the_chunking(
        files: dict[str, bytes], events: bytes, cuts: list[int], frame_bytes: int) -> None:
    archive = _tar({"out/events.jsonl": events,
                    **{f"out/tensors/{name}": content for name, content in files.items()}})
    stream = b"".join(_frame(b"T", 0, archive[start:start + frame_bytes])
                      for start in range(0, len(archive), frame_bytes))
    stream += _frame(b"O", 0, b"printed") + _frame(b"E", 0, b"0")
    frames = _frames_of(_chunked(stream, cuts))
    assert frames.job_done.is_set() and frames.status == 0
    assert frames.archive == archive and not frames.archive_cut
    got_events, tensors, over = read_output_archive(
        [frames.archive], LIMITS.result_bytes, stream_limit=out_archive_bytes(LIMITS))
    assert got_events == events
    assert tensors == {f"tensors/{name}": content for name, content in sorted(files.items())}
    assert not over


def test_files_past_the_archive_limit_are_dropped_and_reported_cut() -> None:
    chunk = b"\0" * (1 << 20)
    count = out_archive_bytes(LIMITS) // len(chunk) + 2
    frames = _frames_of([_frame(b"T", 0, chunk) for _ in range(count)] + [_frame(b"E", 0, b"0")])
    assert frames.archive_cut
    assert frames.archive is not None and len(frames.archive) <= out_archive_bytes(LIMITS)


def test_the_servers_own_cut_is_reported() -> None:
    frames = _frames_of([_frame(b"T", 0, _tar({})), _frame(b"L", 0, b""),
                         _frame(b"E", 0, b"0")])
    assert frames.archive_cut and frames.status == 0


def test_a_frame_of_another_job_is_not_this_jobs() -> None:
    frames = _frames_of([_frame(b"T", 3, _tar({"out/events.jsonl": b"x"})),
                         _frame(b"E", 0, b"0")])
    assert frames.archive is None  # the host then reads the volume, as without a server's tar


@pytest.mark.parametrize("stream", [
    b"T 0 " + str((1 << 20) + 1).encode() + b"\n",  # a frame larger than any the server sends
    b"T 0 " + b"9" * 100,  # a header that never ends
    b"T 0 -5\n",
    b"T zero 5\n",
])
def test_a_stream_that_is_not_the_servers_framing_ends_it(
        stream: bytes, caplog: pytest.LogCaptureFixture) -> None:
    frames = _frames_of([stream, _frame(b"E", 0, b"0")])
    assert not frames.job_done.is_set()  # the run then finds its server gone
    assert "not in its framing" in caplog.text


@pytest.mark.timeout(30)
def test_a_large_single_chunk_is_read_in_linear_time() -> None:
    # One 64 MiB chunk read 10 KiB at a time: copying the rest at each read took 90 s.
    content = b"\1" * (64 << 20)
    archive = _tar({"out/tensors/big": content})
    _, tensors, over = read_output_archive([archive], 128 << 20, stream_limit=256 << 20)
    assert tensors == {"tensors/big": content} and not over
