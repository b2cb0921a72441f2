"""The output files a runner sends on its stream at its end, as the host reads them back.

The runner's half (``runner.stream.send_outputs``) writes into a file here instead of the
container's exec stream; the host's half is the decoder and archive reader the Docker backend
uses, fed in chunks split anywhere, as a socket delivers them.
"""

from __future__ import annotations

import base64
import io
import os
import queue
import tarfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox import wire
from sandbox.base import Limits
from sandbox.docker_sandbox import out_archive_bytes
from sandbox.outputs import (
    CappedOutput,
    CappedStream,
    ChannelDecoder,
    collect_outputs,
    read_output_archive,
)
from sandbox.runner.stream import Channel, send_outputs

BUDGET = 4 << 20


def _folder(root: Path, files: dict[str, bytes]) -> Path:
    out = root / "out"
    (out / wire.TENSORS_DIR).mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        (out / wire.TENSORS_DIR / name).write_bytes(content)
    return out


def _sent(out: Path, budget: int = BUDGET) -> bytes:
    """What the runner's supervisor writes on its stream for the folder."""
    stream = out.parent / "stream"
    fd = os.open(stream, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        send_outputs(Channel(fd), str(out), budget, status=0)
    finally:
        os.close(fd)
    return stream.read_bytes()


def _decoded(stream: bytes, cuts: list[int], archive_limit: int = 4 * BUDGET) -> ChannelDecoder:
    decoder = ChannelDecoder(CappedStream(1 << 10), CappedStream(1 << 10),
                             archive_limit=archive_limit)
    start = 0
    for cut in sorted(c % (len(stream) + 1) for c in cuts):
        decoder.feed(stream[start:cut])
        start = cut
    decoder.feed(stream[start:])
    return decoder


def _read_back(decoder: ChannelDecoder) -> tuple[bytes, dict[str, bytes], bool]:
    assert decoder.archive_end is not None and not decoder.archive.truncated
    end = wire.parse_runner_end(decoder.archive_end)
    assert end is not None and end[0] == 0
    forged, tensors, over = read_output_archive([bytes(decoder.archive.kept)], BUDGET,
                                                stream_limit=4 * BUDGET)
    return forged, tensors, over or end[1]


names = st.from_regex(r"[0-9]{4}\.safetensors", fullmatch=True)


@settings(max_examples=40, deadline=None)
@given(files=st.dictionaries(names, st.binary(min_size=1, max_size=3000), max_size=6),
       cuts=st.lists(st.integers(min_value=0), max_size=12))
def test_the_host_reads_back_what_the_folder_holds(
    tmp_path_factory: object, files: dict[str, bytes], cuts: list[int]
) -> None:
    root = tmp_path_factory.mktemp("run")  # type: ignore[attr-defined]
    out = _folder(root, files)
    decoder = _decoded(_sent(out), cuts)
    assert decoder.events == b""  # nothing of it passes for an event
    assert _read_back(decoder) == collect_outputs(out, BUDGET)


def test_files_larger_than_a_frame_arrive_whole(tmp_path: Path) -> None:
    big = os.urandom(3 * wire.OUTPUTS_FRAME_BYTES + 17)
    out = _folder(tmp_path, {"0000.safetensors": big})
    stream = _sent(out)
    assert stream.count(b"\n") >= 5  # four frames of files and the end
    assert _read_back(_decoded(stream, []))[1] == {"tensors/0000.safetensors": big}


def test_a_file_over_what_is_left_of_the_budget_is_left_out_and_said_so(tmp_path: Path) -> None:
    out = _folder(tmp_path, {"0000.safetensors": b"a" * 100, "0001.safetensors": b"b" * 200,
                             "0002.safetensors": b"c" * 40})
    decoder = _decoded(_sent(out, budget=150), [])
    assert decoder.archive_end == b"0 cut"
    _, tensors, over = _read_back(decoder)
    assert over
    # As the host reads an archive of the folder: the files after the one left out still count.
    assert tensors == {"tensors/0000.safetensors": b"a" * 100,
                       "tensors/0002.safetensors": b"c" * 40}
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as folder:
        folder.add(out, arcname="out")
    assert read_output_archive([archive.getvalue()], 150, stream_limit=BUDGET)[1:] \
        == (tensors, over)


def test_links_fifos_and_folders_are_not_sent(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_bytes(b"HOST-SECRET")
    out = _folder(tmp_path, {"0000.safetensors": b"kept"})
    (out / wire.EVENTS_FILE).symlink_to(secret)
    (out / wire.TENSORS_DIR / "0001.safetensors").symlink_to(secret)
    os.mkfifo(out / wire.TENSORS_DIR / "0002.safetensors")  # opening it must not block
    (out / wire.TENSORS_DIR / "0003.safetensors").mkdir()
    stream = _sent(out)
    assert b"HOST-SECRET" not in base64.b64decode(b"".join(
        line[len(wire.OUTPUTS_FRAME_PREFIX):-2] for line in stream.splitlines()
        if line.startswith(wire.OUTPUTS_FRAME_PREFIX)))
    forged, tensors, over = _read_back(_decoded(stream, []))
    assert (forged, tensors, over) == (b"", {"tensors/0000.safetensors": b"kept"}, False)


def test_a_linked_tensors_folder_is_not_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "0000.safetensors").write_bytes(b"HOST-SECRET")
    out = tmp_path / "out"
    out.mkdir()
    (out / wire.TENSORS_DIR).symlink_to(elsewhere)
    assert _read_back(_decoded(_sent(out), [])) == (b"", {}, False)


def test_an_events_file_in_the_folder_is_sent_as_found(tmp_path: Path) -> None:
    out = _folder(tmp_path, {})
    (out / wire.EVENTS_FILE).write_bytes(b'{"event": "done"}\n')
    forged, _, _ = _read_back(_decoded(_sent(out), []))
    assert forged == b'{"event": "done"}\n'  # student code's: the host reports it as forged


def test_a_print_of_the_students_cannot_pass_for_the_files() -> None:
    # The student's prints travel base64-encoded inside stdout frames: whatever they print,
    # no line of the stream starts with the outputs prefix but the supervisor's own.
    fake = wire.OUTPUTS_FRAME_PREFIX + b'AAAA"}\n' + wire.OUTPUTS_END_PREFIX + b'"}\n'
    stdout = CappedStream(1 << 10)
    decoder = ChannelDecoder(stdout, CappedStream(1 << 10), archive_limit=BUDGET)
    decoder.feed(wire.STDOUT_FRAME_PREFIX + base64.b64encode(fake) + b'"}\n')
    assert bytes(stdout.kept) == fake
    assert (decoder.archive_end, decoder.archive.total) == (None, 0)


def test_frames_past_the_limit_are_counted_not_kept(tmp_path: Path) -> None:
    out = _folder(tmp_path, {"0000.safetensors": os.urandom(50_000)})
    decoder = _decoded(_sent(out), [], archive_limit=10_000)
    assert decoder.archive_end == b"0"
    assert decoder.archive.truncated
    assert len(decoder.archive.kept) == 10_000


@given(status=st.integers(min_value=0, max_value=255), cut=st.booleans())
def test_the_end_frame_says_the_exit_status_and_the_cut(status: int, cut: bool) -> None:
    assert wire.parse_runner_end(wire.runner_end(status, cut)) == (status, cut)


@given(data=st.binary(max_size=12) | st.from_regex(rb"[0-9]{1,4}( cut)?", fullmatch=True))
def test_a_malformed_end_frame_says_nothing(data: bytes) -> None:
    end = wire.parse_runner_end(data)
    assert end is None or wire.runner_end(*end) == data


def _follow(stream: bytes, limits: Limits) -> tuple[CappedOutput, queue.Queue[bytes | None]]:
    """The host's reader of a container's stream, fed ``stream`` and then left open."""
    chunks: queue.Queue[bytes | None] = queue.Queue()
    chunks.put(stream)
    output = CappedOutput(((chunk, None) for chunk in iter(chunks.get, None)), limits,
                          archive_limit=out_archive_bytes(limits))
    return output, chunks


def test_the_end_frame_ends_the_wait_while_the_stream_is_still_open(tmp_path: Path) -> None:
    out = _folder(tmp_path, {"0000.safetensors": b"kept"})
    output, chunks = _follow(_sent(out), Limits())
    assert output.finished.wait(5)
    assert not output.closed.is_set()
    assert output.runner_end == (0, False)
    chunks.put(None)


def test_files_over_the_streams_limit_leave_the_end_to_the_stream(tmp_path: Path) -> None:
    limits = Limits(result_bytes=1 << 20, file_size_bytes=1 << 20)
    big = os.urandom(out_archive_bytes(limits) + 1)
    out = _folder(tmp_path, {"0000.safetensors": big})
    output, chunks = _follow(_sent(out, budget=len(big)), limits)
    assert not output.finished.wait(1)  # the engine is to say how the runner ended
    assert output.channel.archive_end == b"0" and output.channel.archive.truncated
    assert output.runner_end is None
    chunks.put(None)
    assert output.finished.wait(5) and output.closed.is_set()
