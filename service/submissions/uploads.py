"""Reading a submission's files from an upload: ``.py`` files, a notebook (kept without its
outputs), or one zip checked entry by entry."""

from __future__ import annotations

import io
import stat
import unicodedata
import zipfile
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from werkzeug.datastructures import FileStorage

from grader.notebook import NOTEBOOK_SUFFIX, NotebookError, read_notebook, without_outputs
from service.core.errors import ServiceError, TooLarge, UnsupportedMedia

ZIP_MAGIC = b"PK\x03\x04"


@dataclass(frozen=True)
class UploadLimits:
    max_files: int
    max_file_bytes: int
    zip_max_entries: int
    zip_max_uncompressed_bytes: int

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> UploadLimits:
        return cls(config["MAX_FILES"], config["MAX_FILE_BYTES"], config["ZIP_MAX_ENTRIES"],
                   config["ZIP_MAX_UNCOMPRESSED_BYTES"])


MAX_NAME_BYTES = 255


def read_upload(parts: Iterable[FileStorage], limits: UploadLimits) -> dict[str, bytes]:
    """The files of a multipart upload by plain name (every part: pass them all, e.g.
    ``request.files.getlist("files")``); problems raise ServiceError (4xx)."""
    parts = list(parts)
    if len(parts) > limits.max_files:
        raise ServiceError(f"{len(parts)} files submitted; at most {limits.max_files} are "
                           "accepted per submission.")
    files: dict[str, bytes] = {}
    for part in parts:
        name = PurePosixPath((part.filename or "").replace("\\", "/")).name
        check_name(name)
        data = part.read(limits.max_file_bytes * 4 + 1)
        if name.endswith(".zip") or data.startswith(ZIP_MAGIC):
            _merge(files, read_zip(data, limits))
        elif name.endswith(".py"):
            _merge(files, {name: data})
        elif name.endswith(NOTEBOOK_SUFFIX):
            _merge(files, {name: read_notebook_upload(name, data, limits)})
        else:
            raise UnsupportedMedia(f"{name or 'an unnamed part'!r} is neither a .py file, a "
                                   ".ipynb notebook nor a .zip archive; submit Python source "
                                   "files, one notebook or one zip of them.")
    if not files:
        raise ServiceError("No files were submitted: send one or more .py files (form field "
                           "`files`), one .ipynb notebook or a .zip of them.")
    if sum(name.endswith(NOTEBOOK_SUFFIX) for name in files) > 1:
        raise ServiceError("Several notebooks were submitted; submit one notebook (with any "
                           ".py files it imports).")
    if len(files) > limits.max_files:
        raise ServiceError(f"{len(files)} files submitted; at most {limits.max_files} are "
                           "accepted per submission.")
    for name, data in files.items():
        if len(data) > limits.max_file_bytes:
            raise TooLarge(f"{name} is {len(data) // 1024} KiB; a file may have at most "
                           f"{limits.max_file_bytes // 1024} KiB.")
    return files


def read_notebook_upload(name: str, data: bytes, limits: UploadLimits) -> bytes:
    """The notebook as it is stored: checked to be gradable and its outputs stripped. The part
    may be larger than a file (outputs take room) up to what is read of a part; what is kept
    is a file like any other and meets the file limit."""
    if len(data) > limits.max_file_bytes * 4:
        raise TooLarge(f"{name} is more than {limits.max_file_bytes * 4 // 1024} KiB; clear "
                       "its outputs (Edit > Clear outputs of all cells) and submit it again.")
    try:
        stored = without_outputs(data)
        read_notebook(stored)  # gradable: code cells with code in them
        return stored
    except NotebookError as error:
        raise UnsupportedMedia(f"{name}: {error}") from None


def read_zip(data: bytes, limits: UploadLimits) -> dict[str, bytes]:
    """The ``.py`` files of a zip, refusing anything that could escape or explode."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        entries = archive.infolist()
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise UnsupportedMedia(f"The zip archive cannot be read ({exc}).") from exc
    if len(entries) > limits.zip_max_entries:
        raise TooLarge(f"The zip has {len(entries)} entries; at most {limits.zip_max_entries} "
                       "are accepted.")
    declared = sum(entry.file_size for entry in entries)
    if declared > limits.zip_max_uncompressed_bytes:
        raise TooLarge(f"The zip unpacks to {declared // 1024} KiB; at most "
                       f"{limits.zip_max_uncompressed_bytes // 1024} KiB are accepted.")
    files: dict[str, bytes] = {}
    for entry in entries:
        _check_entry(entry)
        if entry.is_dir() or _ignored(entry.filename):
            continue
        name = PurePosixPath(entry.filename.replace("\\", "/")).name
        if not name.endswith(".py"):
            raise UnsupportedMedia(f"The zip holds {entry.filename!r}; only .py files are "
                                   "accepted.")
        content = _entry_bytes(archive, entry, limits.max_file_bytes + 1)
        if len(content) > limits.max_file_bytes:
            raise TooLarge(f"{entry.filename} unpacks to more than "
                           f"{limits.max_file_bytes // 1024} KiB.")
        _merge(files, {name: content})
    return files


def _entry_bytes(archive: zipfile.ZipFile, entry: zipfile.ZipInfo, limit: int) -> bytes:
    """An entry's bytes (at most ``limit``): a damaged, encrypted or exotic entry is a 4xx."""
    if entry.flag_bits & 0x1:
        raise UnsupportedMedia(f"The zip entry {entry.filename!r} is encrypted; zip the files "
                               "without a password.")
    if entry.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise UnsupportedMedia(f"The zip entry {entry.filename!r} uses a compression method "
                               f"({entry.compress_type}) that is not accepted; use the usual "
                               "deflate (or none).")
    try:
        with archive.open(entry) as handle:
            return handle.read(limit)
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError,
            ValueError, OSError) as exc:
        raise UnsupportedMedia(f"The zip entry {entry.filename!r} cannot be read: it is "
                               f"damaged ({type(exc).__name__}: {exc}"[:300] + ").") from None


def check_name(name: str) -> None:
    """Refuse a file name that breaks ``name_problem``'s rule, saying why."""
    problem = name_problem(name)
    if problem is not None:
        raise ServiceError(problem)


_DEVICES = {"CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$",
            *(f"{kind}{digit}" for kind in ("COM", "LPT") for digit in "123456789¹²³")}


def hidden_in_names(char: str) -> bool:
    """Whether a file name may not hold ``char``: a control, format (bidirectional, zero-width)
    or separator character, or a lone surrogate; the zero-width joiner of emoji is allowed."""
    return unicodedata.category(char) in ("Cc", "Cf", "Cs", "Zl", "Zp") and char != "\u200d"


def name_problem(name: str) -> str | None:
    """What is wrong with a file name as a stored submission file, or None.

    The one rule for every name that is stored, shown and written into archives: at most 255
    bytes of valid Unicode; one plain component (no ``/`` or ``\\``, not ``.`` or ``..``); no
    control, bidirectional or invisible character; not a Windows device name (``CON.py``) nor
    ending in a dot or space, which Windows cannot create; not starting like a spreadsheet
    formula or a command-line option (``=``, ``+``, ``-``, ``@``).
    """
    if not name:
        return None  # an unnamed part: its reader says what it lacks
    shown = ascii(name)[:80]
    if any(0xd800 <= ord(c) <= 0xdfff for c in name):
        return f"The file name {shown} is not valid Unicode; rename the file."
    if any(hidden_in_names(c) for c in name):
        return (f"The file name {shown} holds a control character or an invisible character; "
                "rename the file with letters, digits, `_`, `-` and `.`.")
    if len(name.encode()) > MAX_NAME_BYTES:
        return (f"The file name {shown}... is {len(name.encode())} bytes long; at most "
                f"{MAX_NAME_BYTES} are accepted.")
    if name in (".", "..") or "/" in name or "\\" in name:
        return f"{shown} is not a plain file name; rename the file."
    if name.split(".", 1)[0].rstrip(" ").upper() in _DEVICES:
        return (f"The file name {shown} is a Windows device name, which cannot be unpacked "
                "there; rename the file.")
    if name[-1] in ". ":
        return f"The file name {shown} ends in a dot or a space; rename the file."
    if name[0] in "=+-@":
        return (f"The file name {shown} starts with `{name[0]}`, as a formula or an option "
                "would; rename the file.")
    return None


def _check_entry(entry: zipfile.ZipInfo) -> None:
    name = entry.filename.replace("\\", "/")
    check_name(PurePosixPath(name).name if name.strip("/") else name)
    if len(name.encode("utf-8", "surrogateescape")) > 4096:
        raise ServiceError("A zip entry has a path over 4096 bytes long.")
    path = PurePosixPath(name)
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise ServiceError(f"The zip entry {entry.filename!r} has an absolute path; zip the files "
                           "themselves, with relative names.")
    if ".." in path.parts:
        raise ServiceError(f"The zip entry {entry.filename!r} points outside the archive (`..`).")
    kind = stat.S_IFMT(entry.external_attr >> 16)
    if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
        raise ServiceError(f"The zip entry {entry.filename!r} is a link or a special file; only "
                           "regular files are accepted.")


def _ignored(name: str) -> bool:
    """Clutter that zip tools add: macOS resource forks and caches."""
    parts = PurePosixPath(name).parts
    return "__MACOSX" in parts or "__pycache__" in parts or PurePosixPath(name).name.startswith(".")


def _merge(files: dict[str, bytes], new: dict[str, bytes]) -> None:
    for name in new:
        if name in files:
            raise ServiceError(f"Two files are called {name}; file names must be unique.")
        check_case_twins([*files, name])
    files.update(new)


def check_case_twins(names: Iterable[str], required: Iterable[str] = ()) -> None:
    """Refuse names that differ only in case from each other or from a required file's name
    (``Attention.py`` beside ``attention.py``): unpacked where case does not count, one would
    overwrite the other, and the grader would read a file the student did not mean."""
    seen: dict[str, str] = {}
    for name in required:
        seen[name.casefold()] = name
    for name in names:
        twin = seen.get(name.casefold())
        if twin is not None and twin != name:
            raise ServiceError(f"{ascii(name)[:80]} differs from {ascii(twin)[:80]} only in "
                               "case; name the file exactly as the assignment does.")
        seen.setdefault(name.casefold(), name)
