"""The SSRF guard: address verdicts, the allow-list, DNS rebinding, TLS, proxies.

Network tests use real servers on local addresses (tests/_local_http.py). A name like
``public.test`` stands for a public host: the guard's resolver is injected, and the
address it returns is one the test allows, since no public server can be started here.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import ssl
from collections.abc import Sequence
from pathlib import Path

import httpx
import pytest
import trustme
from hypothesis import example, given
from hypothesis import strategies as st

from _local_http import serving, two_on_one_port
from tooldeck.web.netguard import (
    METADATA_ADDRESSES,
    NetPolicy,
    Refused,
    blocked_reason,
    guarded_client,
)

IP = ipaddress.IPv4Address | ipaddress.IPv6Address

# -- the oracle ---------------------------------------------------------------------
# Built from the standard library's own classification (is_global, is_private, ...), not
# from the guard's table. POLICY_EXTRA is what the guard refuses beyond it, on purpose:
# ranges that are not globally reachable by the IANA registries but that some Python
# versions call global (their lists changed in 3.12.4/3.13), and 3fff::/20 (RFC 9637).
POLICY_EXTRA = [
    ipaddress.ip_network(n)
    for n in ("192.0.0.0/24", "192.88.99.0/24", "2001::/23", "64:ff9b:1::/48", "3fff::/20")
]
NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


def oracle_blocked(ip: IP) -> bool:
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:  # a socket to it reaches the IPv4 address
            return oracle_blocked(ip.ipv4_mapped)
        if ip in NAT64:  # a NAT64 gateway translates it to the IPv4 address
            return oracle_blocked(ipaddress.IPv4Address(ip.packed[-4:]))
        if ip.sixtofour is not None:
            return oracle_blocked(ip.sixtofour)
        if ip.teredo is not None:
            return True
    if ip in METADATA_ADDRESSES:
        return True
    by_stdlib = (
        not ip.is_global
        or ip.is_private
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_unspecified
        or (isinstance(ip, ipaddress.IPv6Address) and ip.is_site_local)
    )
    return by_stdlib or any(ip.version == n.version and ip in n for n in POLICY_EXTRA)


ipv4 = st.ip_addresses(v=4)
embedded_forms = st.one_of(
    ipv4.map(lambda a: ipaddress.IPv6Address(b"\0" * 10 + b"\xff\xff" + a.packed)),
    ipv4.map(lambda a: ipaddress.IPv6Address(NAT64.network_address.packed[:12] + a.packed)),
    st.tuples(ipv4, st.integers(0, 2**80 - 1)).map(
        lambda t: ipaddress.IPv6Address((0x2002 << 112) | (int(t[0]) << 80) | t[1])
    ),
    st.integers(0, 2**96 - 1).map(lambda low: ipaddress.IPv6Address((0x20010000 << 96) | low)),
)
special_ranges = st.sampled_from(
    [
        *(ipaddress.ip_network(n) for n in ("0.0.0.0/8", "100.64.0.0/10", "192.0.0.0/24")),
        *(ipaddress.ip_network(n) for n in ("198.18.0.0/15", "224.0.0.0/4", "240.0.0.0/4")),
        *(ipaddress.ip_network(n) for n in ("2001::/23", "2001:db8::/32", "fc00::/7")),
        *(ipaddress.ip_network(n) for n in ("fe80::/10", "fec0::/10", "ff00::/8", "::/96")),
        *(ipaddress.ip_network(n) for n in ("3fff::/20", "64:ff9b:1::/48", "2000::/3")),
    ]
).flatmap(lambda net: st.ip_addresses(network=net))
any_address = st.one_of(ipv4, st.ip_addresses(v=6), embedded_forms, special_ranges)


@given(any_address)
@example(ipaddress.ip_address("168.63.129.16"))  # a public address that is metadata
@example(ipaddress.ip_address("::ffff:169.254.169.254"))
@example(ipaddress.ip_address("64:ff9b::808:808"))  # NAT64 form of a public address
@example(ipaddress.ip_address("2002:808:808::1"))  # 6to4 form of a public address
@example(ipaddress.ip_address("192.0.0.9"))
@example(ipaddress.ip_address("2001:4860:4860::8888"))
def test_blocked_reason_agrees_with_an_ipaddress_oracle(ip: IP) -> None:
    assert (blocked_reason(ip) is not None) == oracle_blocked(ip), (ip, blocked_reason(ip))


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "a loopback address"),
        ("127.255.0.9", "a loopback address"),
        ("::1", "a loopback address"),
        ("0.0.0.0", "an unspecified ('this network') address"),
        ("::", "an unspecified address"),
        ("10.1.2.3", "a private (RFC 1918) address"),
        ("172.31.255.255", "a private (RFC 1918) address"),
        ("192.168.0.1", "a private (RFC 1918) address"),
        ("fd12::1", "a unique local (private) address"),
        ("169.254.1.1", "a link-local address"),
        ("fe80::1", "a link-local address"),
        ("fe80::1%eth0", "a link-local address"),
        ("100.64.0.1", "a carrier-grade NAT (shared) address"),
        ("224.0.0.1", "a multicast address"),
        ("ff02::1", "a multicast address"),
        ("255.255.255.255", "the broadcast address"),
        ("250.1.1.1", "a reserved address"),
        ("192.0.2.1", "a documentation address"),
        ("2001:db8::1", "a documentation address"),
        ("198.19.0.1", "a benchmarking address"),
        ("fec0::1", "a site-local address"),
        ("169.254.169.254", "a cloud metadata address"),
        ("fd00:ec2::254", "a cloud metadata address"),
        ("100.100.100.200", "a cloud metadata address"),
        ("168.63.129.16", "a cloud metadata address"),
        ("::ffff:127.0.0.1", "an IPv4-mapped form of 127.0.0.1, a loopback address"),
        ("64:ff9b::a00:1", "a NAT64 form of 10.0.0.1, a private (RFC 1918) address"),
        ("2002:7f00:1::", "a 6to4 form of 127.0.0.1, a loopback address"),
        ("::127.0.0.1", "a deprecated IPv4-compatible address"),
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "a Teredo tunnel address"),
        ("4000::1", "a reserved address"),
        ("8.8.8.8", None),
        ("1.1.1.1", None),
        ("2606:4700:4700::1111", None),
        ("::ffff:8.8.8.8", None),
    ],
)
def test_blocked_reason_names_the_kind_of_address(address: str, reason: str | None) -> None:
    assert blocked_reason(address) == reason


# -- the allow-list -----------------------------------------------------------------


@given(any_address, st.one_of(st.ip_addresses(v=4), st.ip_addresses(v=6)), st.integers(0, 128))
def test_an_allowed_range_admits_exactly_its_addresses(ip: IP, base: IP, bits: int) -> None:
    net = ipaddress.ip_network(f"{base}/{min(bits, base.max_prefixlen)}", strict=False)
    policy = NetPolicy(allow=(str(net),))
    reached = ip
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        reached = ip.ipv4_mapped  # the mapped form is the same destination
    inside = reached.version == net.version and reached in net
    if not inside and reached is not ip:
        inside = ip.version == net.version and ip in net
    exact = inside and net.num_addresses == 1
    metadata = reached in METADATA_ADDRESSES or (
        isinstance(ip, ipaddress.IPv6Address)
        and (ip in NAT64 or ip.sixtofour is not None)
        and blocked_reason(ip) is not None
        and "metadata" in str(blocked_reason(ip))
    )
    expected_refused = oracle_blocked(ip) and not (exact if metadata else inside)
    assert (policy.reason("example.org", ip) is not None) == expected_refused


def test_allow_list_entries_hosts_wildcards_addresses_ranges() -> None:
    policy = NetPolicy(allow=("Wiki.Corp.Example.", "*.lab.example", "10.0.0.0/8", "[fd00::1]"))
    assert policy.host_allowed("wiki.corp.example")
    assert policy.host_allowed("WIKI.corp.example.")
    assert not policy.host_allowed("corp.example")
    assert not policy.host_allowed("xwiki.corp.example")
    assert policy.host_allowed("a.b.lab.example") and not policy.host_allowed("lab.example")
    assert not policy.host_allowed("evil-lab.example")
    assert policy.reason("anything.example", "10.9.9.9") is None
    assert policy.reason("anything.example", "::ffff:10.9.9.9") is None  # same destination
    assert policy.reason("anything.example", "11.0.0.1") is None  # public anyway
    assert policy.reason("anything.example", "fd00::1") is None
    assert policy.reason("anything.example", "fd00::2") == "a unique local (private) address"
    assert policy.reason("wiki.corp.example", "192.168.1.1") is None  # allowed by name
    assert policy.reason("other.example", "192.168.1.1") == "a private (RFC 1918) address"


def test_idn_hosts_are_matched_in_their_punycode_form() -> None:
    policy = NetPolicy(allow=("bücher.example",))
    assert policy.host_allowed("xn--bcher-kva.example")


def test_metadata_is_refused_unless_its_exact_address_is_allowed() -> None:
    for allow in ("169.254.0.0/16", "0.0.0.0/0", "::/0"):
        policy = NetPolicy(allow=(allow,))
        assert policy.reason("x", "169.254.169.254") == "a cloud metadata address"
        assert policy.reason("x", "169.254.1.1") is None or allow == "::/0"
    by_name = NetPolicy(allow=("metadata.google.internal",))
    assert by_name.reason("metadata.google.internal", "169.254.169.254") is not None
    exact = NetPolicy(allow=("169.254.169.254",))
    assert exact.reason("metadata.google.internal", "169.254.169.254") is None
    assert exact.reason("x", "::ffff:169.254.169.254") is None
    assert exact.reason("x", "fd00:ec2::254") == "a cloud metadata address"


@pytest.mark.parametrize(
    "entry",
    [
        "10.0.0.0/33",
        "wiki.example:8080",
        "http://wiki.example",
        "user@host",
        "127.1",
        "2130706433",
        "a..b",
        "-",
        "*.",
        "exa mple",
    ],
)
def test_bad_allow_entries_are_one_line_errors(entry: str) -> None:
    with pytest.raises(ValueError) as info:
        NetPolicy(allow=(entry,))
    assert "\n" not in str(info.value) and repr(entry)[1:-1] in str(info.value)


def test_from_env_reads_the_allow_list_and_the_proxy() -> None:
    policy = NetPolicy.from_env(
        {"TOOLDECK_WEB_ALLOW": "wiki.corp, 10.0.0.0/8  fd00::/8", "HTTP_PROXY": "http://x:1"}
    )
    assert policy.allow == ("wiki.corp", "10.0.0.0/8", "fd00::/8") and policy.proxy is None
    assert NetPolicy.from_env({}).allow == ()
    with pytest.raises(ValueError, match=r"^TOOLDECK_WEB_ALLOW: '300\.1\.1\.1/8'"):
        NetPolicy.from_env({"TOOLDECK_WEB_ALLOW": "ok.example,300.1.1.1/8"})
    with pytest.raises(ValueError, match=r"^TOOLDECK_WEB_PROXY: .*http:// or https://"):
        NetPolicy.from_env({"TOOLDECK_WEB_PROXY": "socks5://127.0.0.1:1080"})
    assert NetPolicy.from_env({"TOOLDECK_WEB_PROXY": "http://p:3128"}).proxy == "http://p:3128"


def test_refusal_lines() -> None:
    literal = Refused("127.0.0.1", "127.0.0.1", "a loopback address")
    assert literal.line("web_fetch") == (
        "127.0.0.1 is a loopback address; web_fetch only reaches public addresses "
        "(a user can allow a host or range in TOOLDECK_WEB_ALLOW)."
    )
    named = Refused("localhost", "::1", "a loopback address")
    assert named.subject == "localhost resolves to ::1, a loopback address"
    meta = Refused("169.254.169.254", "169.254.169.254", "a cloud metadata address")
    assert "only its exact address in TOOLDECK_WEB_ALLOW allows it" in str(meta)
    assert isinstance(meta, httpx.TransportError)  # broad httpx handlers still catch it


# -- connections --------------------------------------------------------------------


class Resolver:
    """A scripted resolver: the answers it gives, in order, and the calls it got."""

    def __init__(self, *answers: Sequence[str]) -> None:
        self.answers = list(answers)
        self.calls: list[str] = []

    async def __call__(self, host: str, port: int) -> Sequence[str]:
        self.calls.append(host)
        if not self.answers:
            raise OSError(f"no answer for {host}")
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


async def get(policy: NetPolicy, url: str) -> httpx.Response:
    async with guarded_client(policy, timeout=10) as client:
        return await client.get(url)


def test_dns_rebinding_gets_the_checked_address_not_a_second_answer() -> None:
    # The first answer is an allowed address (standing for a public one), every later
    # answer is 127.0.0.1. A client that resolves again to connect reaches 127.0.0.1.
    with two_on_one_port("127.0.0.2", "127.0.0.1") as (public, loopback):
        resolver = Resolver(["127.0.0.2"], ["127.0.0.1"])
        policy = NetPolicy(allow=("127.0.0.2",), resolver=resolver)
        response = asyncio.run(get(policy, f"http://rebind.test:{public.port}/first"))
        assert response.text == "served by 127.0.0.2: /first"
        assert resolver.calls == ["rebind.test"]
        assert public.hits == [f"GET /first Host=rebind.test:{public.port}"]
        assert loopback.hits == []
        # The next connection resolves again, and this answer is judged too.
        with pytest.raises(Refused) as info:
            asyncio.run(get(policy, f"http://rebind.test:{public.port}/second"))
        assert info.value.subject == "rebind.test resolves to 127.0.0.1, a loopback address"
        assert loopback.hits == [] and len(public.hits) == 1


def test_one_refused_address_refuses_the_whole_answer() -> None:
    with two_on_one_port("127.0.0.2", "127.0.0.1") as (public, loopback):
        policy = NetPolicy(
            allow=("127.0.0.2",), resolver=Resolver(["127.0.0.2", "127.0.0.1", "::1"])
        )
        with pytest.raises(Refused, match=r"resolves to 127\.0\.0\.1, a loopback address"):
            asyncio.run(get(policy, f"http://mixed.test:{public.port}/"))
        assert public.hits == [] and loopback.hits == []


def test_an_unresolvable_name_is_a_connect_error() -> None:
    policy = NetPolicy(resolver=Resolver())
    with pytest.raises(httpx.ConnectError, match=r"could not resolve nowhere\.test"):
        asyncio.run(get(policy, "http://nowhere.test/"))


def test_tls_keeps_sni_and_certificate_checks_for_the_host_name() -> None:
    ca = trustme.CA()
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    for name, expect_ok in (("secure.test", True), ("other.test", False)):
        server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert(name).configure_cert(server_ctx)
        with serving("127.0.0.2", "tls", tls=server_ctx) as server:
            policy = NetPolicy(
                allow=("127.0.0.2",), verify=client_ctx, resolver=Resolver(["127.0.0.2"])
            )
            url = f"https://secure.test:{server.port}/s"
            if expect_ok:
                response = asyncio.run(get(policy, url))
                assert response.text == "served by tls: /s"
                assert server.hits == [f"GET /s Host=secure.test:{server.port}"]
            else:  # connected to the pinned address, but the certificate is for another name
                with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                    asyncio.run(get(policy, url))
                assert server.hits == []
            assert server.sni[:1] == ["secure.test"]


def test_environment_proxies_are_never_used(monkeypatch: pytest.MonkeyPatch) -> None:
    with serving("127.0.0.3", "proxy") as proxy, serving("127.0.0.2", "site") as site:
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
            monkeypatch.setenv(name, proxy.url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        policy = NetPolicy(allow=("127.0.0.2",))
        assert asyncio.run(get(policy, f"{site.url}/x")).text == "served by site: /x"
        with pytest.raises(Refused):
            asyncio.run(get(NetPolicy(), f"{site.url}/y"))
        assert proxy.hits == [] and site.hits == [f"GET /x Host=127.0.0.2:{site.port}"]


def test_an_explicit_proxy_gets_public_requests_and_never_refused_ones() -> None:
    with serving("127.0.0.3", "proxy") as proxy:
        resolver = Resolver(["93.184.215.14"])
        policy = NetPolicy(proxy=proxy.url, resolver=resolver)
        response = asyncio.run(get(policy, "http://public.test/page"))
        assert response.text == "proxied http://public.test/page"
        assert proxy.hits == ["GET http://public.test/page Host=public.test"]
        # An address in the URL, and a name that resolves here to a refused address.
        for url, resolved in (
            ("http://127.0.0.1:9/", []),
            ("http://[::1]/", []),
            ("http://inside.test/", ["10.0.0.7"]),
        ):
            policy = NetPolicy(proxy=proxy.url, resolver=Resolver(resolved) if resolved else None)
            with pytest.raises(Refused):
                asyncio.run(get(policy, url))
        # A name this machine cannot resolve is the proxy's to resolve.
        policy = NetPolicy(proxy=proxy.url, resolver=Resolver())
        assert asyncio.run(get(policy, "http://only-the-proxy.test/")).text.startswith("proxied")
        assert len(proxy.hits) == 2


def test_a_redirect_into_a_refused_address_is_refused_at_that_hop() -> None:
    with serving("127.0.0.2", "allowed") as allowed, serving("127.0.0.1", "inner") as inner:
        policy = NetPolicy(allow=("127.0.0.2",))
        with pytest.raises(Refused) as info:
            asyncio.run(get(policy, f"{allowed.url}/redirect?to={inner.url}/secret"))
        assert info.value.url == f"{inner.url}/secret"
        assert info.value.subject == "127.0.0.1 is a loopback address"
        assert len(allowed.hits) == 1 and inner.hits == []


def test_the_registry_doc_examples_run() -> None:
    text = (Path(__file__).resolve().parents[1] / "docs" / "registry.md").read_text()
    section = text[text.index("### What `web_fetch` can reach") :]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1
    exec(compile(blocks[0], "docs/registry.md", "exec"), {"__name__": "doc_example"})
    (value,) = re.findall(r'^export TOOLDECK_WEB_ALLOW="(.*)"$', section, re.M)
    policy = NetPolicy.from_env({"TOOLDECK_WEB_ALLOW": value})
    assert policy.host_allowed("wiki.corp.example") and policy.host_allowed("a.lab.corp.example")
    assert policy.reason("x.example", "10.20.1.1") is None
    assert policy.reason("x.example", "10.21.1.1") is not None
