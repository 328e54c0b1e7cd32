"""The bounds of Gradio's file-upload route besides its bytes: files per request, the size of
each form field that is not a file, and uploads per visitor per minute.

Gradio's upload route keeps every field that is not a file in memory, whole, and takes up to
1,000 files a request; the page's own uploads send one file and no other field. `FormCount`
reads the multipart body as it streams in, with the parser and the test Gradio's route uses (a
part with a filename is a file), and says why it is refused as soon as a bound is passed.
"""

from __future__ import annotations

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header

from specviz.app.config import PageConfig
from specviz.app.per_minute import PerMinute

FILES_ENV = "SPECVIZ_MAX_UPLOAD_FILES"
FIELD_ENV = "SPECVIZ_MAX_UPLOAD_FIELD_BYTES"
PER_MINUTE_ENV = "SPECVIZ_MAX_UPLOADS_PER_MINUTE"
HEADER_BYTES = 8_192  # of one part's headers: Gradio's own bound (GradioMultiPartParser.max_header_size)


class FormCount:
    """Files and fields of one multipart body, counted as it streams in."""

    def __init__(self, content_type: bytes, config: PageConfig):
        self.max_files, self.max_field = config.max_upload_files, config.max_upload_field_bytes
        self.files, self.field_bytes, self.why = 0, 0, None
        self._header, self._disposition, self._in_field = b"", b"", False
        _, params = parse_options_header(content_type)
        boundary = params.get(b"boundary")
        callbacks = {
            "on_part_begin": self._begin,
            "on_header_field": self._header_name,
            "on_header_value": self._header_value,
            "on_header_end": self._header_end,
            "on_headers_finished": self._headers_done,
            "on_part_data": self._data,
        }
        # No boundary, no form: Gradio's route answers that itself, within the bytes' bound.
        self.parser = MultipartParser(boundary, callbacks) if boundary else None

    def feed(self, chunk: bytes) -> str | None:
        """Why the body is refused once `chunk` is read, or None."""
        if self.parser is not None and self.why is None and chunk:
            try:
                self.parser.write(chunk)
            except MultipartParseError:
                self.parser = None  # a malformed form: Gradio's route refuses it
        return self.why

    def _begin(self) -> None:
        self._header, self._disposition, self._in_field, self.field_bytes = b"", b"", False, 0

    def _header_name(self, data: bytes, start: int, end: int) -> None:
        self._header = (self._header + data[start:end])[:HEADER_BYTES]

    def _header_value(self, data: bytes, start: int, end: int) -> None:
        if self._header.lower() == b"content-disposition":
            self._disposition = (self._disposition + data[start:end])[:HEADER_BYTES]

    def _header_end(self) -> None:
        self._header = b""

    def _headers_done(self) -> None:
        _, options = parse_options_header(self._disposition)
        if b"filename" not in options:
            self._in_field = True
            return
        self.files += 1
        if self.files > self.max_files:
            self.why = f"the upload has more than {self.max_files} files; the limit is {self.max_files} ({FILES_ENV})"

    def _data(self, data: bytes, start: int, end: int) -> None:
        if not self._in_field:
            return
        self.field_bytes += end - start
        if self.field_bytes > self.max_field:
            self.why = (
                f"a form field of the upload that is not a file is more than {self.max_field:,} bytes; "
                f"the limit is {self.max_field:,} bytes ({FIELD_ENV})"
            )


class Uploads:
    """Each visitor's uploads over the last minute, at most `per_minute`."""

    def __init__(self, per_minute: int):
        self.per_minute, self.sent = per_minute, PerMinute()

    def admit(self, visitor: str, now: float) -> str | None:
        """Count an upload of `visitor`'s at `now` (seconds), or say why it is refused."""
        n = len(self.sent.recent(visitor, now))
        if n >= self.per_minute:
            return f"you have sent {n} uploads in the last minute; the limit is {self.per_minute} per visitor ({PER_MINUTE_ENV})"
        self.sent.add(visitor, now)
        return None
