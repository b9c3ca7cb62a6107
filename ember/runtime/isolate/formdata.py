"""``FormData`` and ``File``: what ``await request.form_data()`` gives a handler.

Python Workers' ``Request.form_data()`` parses the two form encodings browsers send, as the
Fetch standard's ``formData()`` does: ``application/x-www-form-urlencoded`` (values are text)
and ``multipart/form-data`` (a part with a filename is a ``File``, the others text). Any other
body is the runtime's TypeError, naming the content type it found.
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import parse_qsl

from ember.errors import UserError
from ember.runtime.deployments.multipart import parse_multipart

FORM_TYPES_MESSAGE = (
    "Unrecognized Content-Type header value. FormData can only parse the following MIME "
    "types: multipart/form-data, application/x-www-form-urlencoded"
)


class File:
    """An uploaded file of a multipart form: ``name`` (its filename), ``type``, ``size``."""

    def __init__(self, data: bytes, name: str, type: str = "") -> None:
        self._data = data
        self.name = name
        self.type = type

    @property
    def size(self) -> int:
        """Length in bytes."""
        return len(self._data)

    async def bytes(self) -> bytes:
        """The contents."""
        return self._data

    async def arrayBuffer(self) -> bytes:  # noqa: N802 - the JavaScript name
        """The contents (``bytes``)."""
        return self._data

    async def text(self) -> str:
        """The contents decoded as UTF-8."""
        return self._data.decode("utf-8", "replace")

    def __repr__(self) -> str:
        return f"<File {self.name!r} {self.type or 'application/octet-stream'} {self.size} bytes>"


FormValue = str | File


class FormData:
    """Ordered form fields; a name may repeat (``get`` gives the first, ``get_all`` all)."""

    def __init__(self, entries: list[tuple[str, FormValue]] | None = None) -> None:
        self._entries: list[tuple[str, FormValue]] = list(entries or [])

    @classmethod
    def new(cls) -> FormData:
        """``new FormData()`` in JavaScript style."""
        return cls()

    def get(self, name: str, default: FormValue | None = None) -> FormValue | None:
        """The first value of ``name``, or ``default`` (None)."""
        return next((v for n, v in self._entries if n == name), default)

    def get_all(self, name: str) -> list[FormValue]:
        """Every value of ``name`` (``getAll``)."""
        return [v for n, v in self._entries if n == name]

    getAll = get_all  # noqa: N815 - the JavaScript name

    def has(self, name: str) -> bool:
        """True if ``name`` is present."""
        return any(n == name for n, _ in self._entries)

    def append(self, name: str, value: FormValue) -> None:
        """Add a value (keeps existing ones)."""
        self._entries.append((name, value if isinstance(value, File) else str(value)))

    def set(self, name: str, value: FormValue) -> None:
        """Replace every value of ``name``."""
        self.delete(name)
        self.append(name, value)

    def delete(self, name: str) -> None:
        """Remove ``name``."""
        self._entries = [(n, v) for n, v in self._entries if n != name]

    def keys(self) -> list[str]:
        """Names in order, repeats included (as JavaScript's ``keys()``)."""
        return [n for n, _ in self._entries]

    def values(self) -> list[FormValue]:
        """Values in order."""
        return [v for _, v in self._entries]

    def entries(self) -> list[tuple[str, FormValue]]:
        """``(name, value)`` pairs in order."""
        return list(self._entries)

    items = entries

    def __getitem__(self, name: str) -> FormValue:
        value = self.get(name)
        if value is None:
            raise KeyError(name)
        return value

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.has(name)

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys(self.keys()))

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"FormData({self._entries!r})"


def parse_form(body: bytes, content_type: str | None) -> FormData:
    """The form in ``body``; TypeError if ``content_type`` is not a form encoding."""
    essence = (content_type or "").split(";", 1)[0].strip().lower()
    if essence == "application/x-www-form-urlencoded":
        text = body.decode("utf-8", "replace")
        return FormData(parse_qsl(text, keep_blank_values=True))
    if essence == "multipart/form-data":
        try:
            parts = parse_multipart(body, content_type)
        except UserError as exc:
            raise TypeError(f"Failed to parse the body as multipart/form-data: {exc}") from None
        form = FormData()
        for part in parts:
            if part.filename is None:
                form.append(part.name, part.data.decode("utf-8", "replace"))
            else:
                form.append(part.name, File(part.data, part.filename, part.content_type or ""))
        return form
    raise TypeError(f"{FORM_TYPES_MESSAGE} (found {content_type or 'no Content-Type'!r})")
