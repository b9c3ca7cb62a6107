"""``request.cf``: the properties Cloudflare's edge attaches to every incoming request.

A local runtime has no edge to measure the client from, so an incoming request carries the
placeholder values ``wrangler dev`` (Miniflare) uses when it cannot fetch real ones: a client in
Austin, Texas over HTTP/1.1 and TLS 1.3. Handlers that read ``request.cf.country`` or
``request.cf["colo"]`` then run unchanged instead of failing on an empty object.

Built on first access (most handlers never read it) and fresh per request (handlers may change it).
"""

from __future__ import annotations

from typing import Any

from ember.bindings.jsdict import JsDict, to_jsdict

_CERT_FIELDS = (
    "certIssuerDN",
    "certSubjectDN",
    "certIssuerDNRFC2253",
    "certSubjectDNRFC2253",
    "certIssuerDNLegacy",
    "certSubjectDNLegacy",
    "certSerial",
    "certIssuerSerial",
    "certSKI",
    "certIssuerSKI",
    "certFingerprintSHA1",
    "certFingerprintSHA256",
    "certNotBefore",
    "certNotAfter",
)
PLACEHOLDER: dict[str, Any] = {
    "asOrganization": "",
    "asn": 395747,
    "colo": "DFW",
    "city": "Austin",
    "region": "Texas",
    "regionCode": "TX",
    "metroCode": "635",
    "postalCode": "78701",
    "country": "US",
    "continent": "NA",
    "timezone": "America/Chicago",
    "latitude": "30.27130",
    "longitude": "-97.74260",
    "clientTcpRtt": 0,
    "httpProtocol": "HTTP/1.1",
    "requestPriority": "weight=192;exclusive=0",
    "tlsCipher": "AEAD-AES128-GCM-SHA256",
    "tlsVersion": "TLSv1.3",
    "tlsClientAuth": {
        "certPresented": "0",
        "certVerified": "NONE",
        "certRevoked": "0",
        **dict.fromkeys(_CERT_FIELDS, ""),
    },
    "edgeRequestKeepAliveStatus": 0,
}


def incoming_cf() -> JsDict:
    """A fresh ``request.cf`` for a request that arrived over HTTP."""
    return to_jsdict(PLACEHOLDER)  # type: ignore[no-any-return]
