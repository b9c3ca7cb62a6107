"""JSON Schema ``format`` values ember enforces while generating, as anchored patterns.

Each pattern accepts a subset of what the format allows, chosen so that every generated value
also passes the strict checkers (``datetime.date.fromisoformat``, ``ipaddress``, ``uuid.UUID``):
calendar-correct days (29 February only in leap years), no leap second, no IPv4 leading zeros,
IPv6 without an embedded IPv4 tail or a zone. Other formats stay annotations (JSON Schema
2020-12's default), as before.
"""

from __future__ import annotations

_YEAR = r"\d{4}"
_LEAP_YEAR = r"(\d\d(0[48]|[2468][048]|[13579][26])|([02468][048]|[13579][26])00)"
_MONTH_DAY = (
    r"((0[13578]|1[02])-(0[1-9]|[12]\d|3[01])"
    r"|(0[469]|11)-(0[1-9]|[12]\d|30)"
    r"|02-(0[1-9]|1\d|2[0-8]))"
)
_DATE = rf"({_YEAR}-{_MONTH_DAY}|{_LEAP_YEAR}-02-29)"
_TIME = r"([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,6})?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)"
_OCTET = r"(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_H16 = r"[0-9a-fA-F]{1,4}"


def _ipv6() -> str:
    # Eight groups, or "::" standing for at least one group between n left and m right groups.
    forms = [rf"({_H16}:){{7}}{_H16}"]
    for left in range(8):
        head = "" if left == 0 else rf"{_H16}(:{_H16}){{{left - 1}}}"
        room = 7 - left
        tail = "" if room == 0 else rf"({_H16}(:{_H16}){{0,{room - 1}}})?"
        forms.append(f"{head}::{tail}")
    return "(" + "|".join(forms) + ")"


_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"

FORMAT_PATTERNS: dict[str, str] = {
    "date": f"^{_DATE}$",
    "time": f"^{_TIME}$",
    "date-time": f"^{_DATE}T{_TIME}$",
    "email": rf"^{_ATOM}(\.{_ATOM})*@{_LABEL}(\.{_LABEL})+$",
    "uuid": r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$",
    "ipv4": rf"^({_OCTET}\.){{3}}{_OCTET}$",
    "ipv6": f"^{_ipv6()}$",
}
