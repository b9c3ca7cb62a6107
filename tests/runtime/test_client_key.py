"""Per-client caps count an IPv6 client by its /64 (one host gets a whole /64), an IPv4 one by
its address, and an IPv4-mapped IPv6 address as the IPv4 address it carries."""

from __future__ import annotations

import pytest

from ember.runtime.client_key import client_key
from ember.runtime.connguard import ConnectionGate, ConnectionLimits


@pytest.mark.parametrize(
    ("address", "key"),
    [
        ("192.0.2.7", "192.0.2.7"),
        ("2001:db8:1:2::1", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff:eeee:dddd:cccc", "2001:db8:1:2::/64"),
        ("2001:db8:1:3::1", "2001:db8:1:3::/64"),
        ("::1", "::/64"),
        ("fe80::1%eth0", "fe80::/64"),
        ("::ffff:192.0.2.7", "192.0.2.7"),
        ("unknown", "unknown"),
        ("", ""),
    ],
)
def test_client_key(address: str, key: str) -> None:
    assert client_key(address) == key


class OpenTransport:
    """What the gate asks of a transport: whether it is closing (these never are)."""

    def is_closing(self) -> bool:
        return False


def test_the_per_address_cap_counts_an_ipv6_network_as_one_client() -> None:
    gate = ConnectionGate(ConnectionLimits(max_connections=100, max_connections_per_address=2))
    assert gate.admit(OpenTransport(), "2001:db8:1:2::1") is None
    assert gate.admit(OpenTransport(), "2001:db8:1:2::2") is None
    refused = gate.admit(OpenTransport(), "2001:db8:1:2::3")  # a third address of the same /64
    assert refused is not None and refused.status == 429
    assert gate.admit(OpenTransport(), "2001:db8:1:3::1") is None  # another network: its own share
