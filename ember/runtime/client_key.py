"""What a per-client cap counts a client by: its address, except that an IPv6 client counts by
its /64 network. One IPv6 host is routinely handed a whole /64 (SLAAC, privacy addresses), so
counting single addresses let one client take 2^64 shares of every per-client cap (connections,
temporary accounts, claims). An IPv4-mapped IPv6 address (``::ffff:192.0.2.1``, what a dual-stack
socket reports for an IPv4 peer) counts as the IPv4 address it carries."""

from __future__ import annotations

import ipaddress

IPV6_PREFIX = 64


def client_key(address: str) -> str:
    """The key a per-client cap counts ``address`` under (unparseable ones: as they are)."""
    try:
        parsed = ipaddress.ip_address(address.split("%", 1)[0])  # drop an IPv6 zone id
    except ValueError:
        return address
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:
            return str(parsed.ipv4_mapped)
        return str(ipaddress.IPv6Network((parsed, IPV6_PREFIX), strict=False))
    return str(parsed)
