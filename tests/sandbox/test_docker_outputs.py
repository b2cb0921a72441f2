"""Reading the output volume's tar stream: only regular files with the runner's names, capped."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterator

from sandbox.outputs import EVENTS_LIMIT_BYTES, read_output_archive


def _archive(*members: tuple[str, bytes | tarfile.TarInfo]) -> list[bytes]:
    """A tar stream of ``out/...`` members, in small chunks as the engine sends it."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, content in members:
            if isinstance(content, tarfile.TarInfo):
                content.name = name
                archive.addfile(content)
            else:
                info = tarfile.TarInfo(name)
                info.size = len(content)
                archive.addfile(info, io.BytesIO(content))
    data = buffer.getvalue()
    return [data[start : start + 1000] for start in range(0, len(data), 1000)]


def _read(chunks: list[bytes], limit: int) -> tuple[bytes, dict[str, bytes], bool]:
    return read_output_archive(chunks, limit, stream_limit=64 << 20)


def _special(kind: bytes, target: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo()
    info.type = kind
    info.linkname = target
    return info


def test_regular_files_with_runner_names_are_read() -> None:
    events, tensors, over = _read(
        _archive(
            ("out/events.jsonl", b'{"event": "done"}\n'),
            ("out/tensors/0001.safetensors", b"one"),
            ("out/tensors/0000.safetensors", b"zero"),
            ("out/ready", b""),
        ),
        1 << 20,
    )
    assert events == b'{"event": "done"}\n'
    assert list(tensors.items()) == [
        ("tensors/0000.safetensors", b"zero"),
        ("tensors/0001.safetensors", b"one"),
    ]
    assert not over


def test_links_devices_and_stray_paths_are_skipped() -> None:
    events, tensors, over = _read(
        _archive(
            ("out/events.jsonl", _special(tarfile.SYMTYPE, "/etc/shadow")),
            ("out/tensors/0000.safetensors", _special(tarfile.LNKTYPE, "out/ready")),
            ("out/tensors/0001.safetensors", _special(tarfile.CHRTYPE)),
            ("out/tensors/0002.safetensors", _special(tarfile.FIFOTYPE)),
            ("out/tensors/deeper/0003.safetensors", b"nested"),
            ("elsewhere/events.jsonl", b"not ours"),
            ("out/../events.jsonl", b"escape"),
        ),
        1 << 20,
    )
    assert events == b""
    assert tensors == {}
    assert not over


def test_results_over_the_limit_are_reported() -> None:
    events, tensors, over = _read(
        _archive(
            ("out/events.jsonl", b"e" * 100),
            ("out/tensors/0000.safetensors", b"a" * 600),
            ("out/tensors/0001.safetensors", b"b" * 600),
        ),
        1000,
    )
    assert events == b"e" * 100
    assert list(tensors) == ["tensors/0000.safetensors"]
    assert over


def test_an_oversized_events_file_is_dropped() -> None:
    events, _, over = _read(
        _archive(("out/events.jsonl", b"x" * (EVENTS_LIMIT_BYTES + 1))), 64 << 20
    )
    assert events == b""
    assert over


def test_a_stream_longer_than_any_volume_is_not_read_to_its_end() -> None:
    chunks = _archive(("out/tensors/0000.safetensors", b"z" * (16 << 20)))
    consumed = 0

    def counted() -> Iterator[bytes]:
        nonlocal consumed
        for chunk in chunks:
            consumed += len(chunk)
            yield chunk

    _, tensors, over = read_output_archive(counted(), 1 << 10, stream_limit=4 << 20)
    assert tensors == {}
    assert over
    assert consumed < 8 << 20


def test_a_malformed_stream_yields_what_came_before() -> None:
    chunks = _archive(("out/events.jsonl", b"{}\n"))
    events, _, _ = _read([*chunks, b"\x00garbage" * 100], 1 << 20)
    assert events == b"{}\n"
