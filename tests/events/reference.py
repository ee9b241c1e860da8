"""Reference decoders: the whole input at once, one msgspec call per line or frame.

They state what :class:`events.EventDecoder` must return, whatever the chunking
and whatever its batching does: no batches, no buffers, nothing incremental.
Error texts follow the documented formats.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from events import DEFAULT_MAX_FRAME, MAX_NAME_LENGTH, BadEvent, InputEvent

__all__ = ["msgpack_alone", "ndjson_alone"]


def _describe(exc: Exception, what: str) -> str:
    if isinstance(exc, RecursionError):
        return f"value nested too deeply: {exc}"
    if isinstance(exc, msgspec.ValidationError):
        return str(exc)
    text = str(exc)
    for prefix in ("JSON is malformed: ", "MessagePack data is malformed: "):
        if text.startswith(prefix):
            return f"malformed {what}: {text.removeprefix(prefix)}"
    return f"malformed {what}: {text[:1].lower()}{text[1:]}"


class _Named(msgspec.Struct):
    type: Any = None
    job_id: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_NAME_LENGTH)] | None = None


def _job_id(item: bytes, module: Any) -> str | None:
    """The job a bad item names: a well-formed value whose ``type`` is a job
    event and whose ``job_id`` is a valid name (other fields not looked at)."""
    try:
        named = module.decode(item, type=_Named)
    except (msgspec.DecodeError, RecursionError):
        return None
    if named.type in ("job_submitted", "job_finished", "job_cancelled"):
        return named.job_id  # type: ignore[no-any-return]
    return None


def ndjson_alone(data: bytes, max_frame: int = DEFAULT_MAX_FRAME) -> list[Any]:
    """Each line decoded on its own; blank lines skipped; long lines rejected."""
    decode = msgspec.json.Decoder(InputEvent).decode
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()  # the final newline ends the last line; it starts none
    out: list[Any] = []
    for number, line in enumerate(lines, start=1):
        if len(line) > max_frame:
            out.append(BadEvent(len(out), number, f"line exceeds the {max_frame}-byte limit"))
        elif line.strip(b" \t\r"):
            try:
                out.append(decode(line))
            except (msgspec.DecodeError, RecursionError) as exc:
                error = _describe(exc, "JSON")
                out.append(BadEvent(len(out), number, error, _job_id(line, msgspec.json)))
    return out


def msgpack_alone(data: bytes, max_frame: int = DEFAULT_MAX_FRAME) -> list[Any]:
    """Each frame decoded on its own; oversize frames skipped by their length."""
    decode = msgspec.msgpack.Decoder(InputEvent).decode
    out: list[Any] = []
    pos = 0
    while pos < len(data):
        index = len(out)
        if len(data) - pos < 4:
            have = len(data) - pos
            out.append(BadEvent(index, None, f"truncated frame: {have} of 4 length-prefix bytes"))
            break
        size = int.from_bytes(data[pos : pos + 4], "big")
        body, stop = pos + 4, pos + 4 + size
        if size == 0:
            out.append(BadEvent(index, None, "empty frame"))
        elif size > max_frame:
            error = f"frame of {size} bytes exceeds the {max_frame}-byte limit"
            out.append(BadEvent(index, None, error + "; skipping that many bytes"))
            if stop > len(data):
                missing = stop - len(data)
                error = (
                    f"truncated frame: input ended {missing} bytes before the end of"
                    f" the {size}-byte frame skipped as over the limit (event {index})"
                )
                out.append(BadEvent(index + 1, None, error))
                break
        elif stop > len(data):
            error = f"truncated frame: {len(data) - body} of {size} payload bytes"
            out.append(BadEvent(index, None, error))
            break
        else:
            try:
                out.append(decode(data[body:stop]))
            except (msgspec.DecodeError, RecursionError) as exc:
                error = _describe(exc, "msgpack")
                job_id = _job_id(data[body:stop], msgspec.msgpack)
                out.append(BadEvent(index, None, error, job_id))
        pos = stop
    return out
