"""Outbound HTTP that reaches only public addresses: the SSRF guard of the web tools.

A tool that fetches a URL chosen by a model runs without approval, so the URL is hostile
input: it can name the machine itself (``localhost``, ``127.1``, ``2130706433``,
``[::ffff:127.0.0.1]``), the local network, or a cloud metadata service, directly or
through a redirect or a DNS answer that changes between the check and the connection.

The guard therefore judges the address that is actually connected to, not the URL text:
:class:`GuardedBackend` sits where httpcore opens TCP connections, resolves the host once,
refuses the connection if *any* resolved address is not public (:func:`blocked_reason`),
and connects to exactly the addresses it checked. TLS still uses the host name (SNI and
certificate verification), and the ``Host`` header is the URL's. Every connection is
judged, so every redirect hop is too. Proxy environment variables are ignored (a proxy
would make the check meaningless); an explicitly configured proxy is described in
:class:`NetPolicy`.

:func:`guarded_client` is the one way the web tools make requests; any tool that fetches
model-chosen URLs should use it too.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import anyio
import httpcore
import httpx

from ..errors import TooldeckError
from .netbody import ACCEPT_ENCODING

__all__ = [
    "ALLOW_VARIABLE",
    "METADATA_ADDRESSES",
    "PROXY_VARIABLE",
    "GuardedBackend",
    "GuardedTransport",
    "NetPolicy",
    "Refused",
    "Resolver",
    "blocked_reason",
    "guarded_client",
    "system_resolver",
]

ALLOW_VARIABLE = "TOOLDECK_WEB_ALLOW"
PROXY_VARIABLE = "TOOLDECK_WEB_PROXY"

IPAddress: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork: TypeAlias = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver: TypeAlias = Callable[[str, int], Awaitable[Sequence[str]]]
"""``(host, port) -> addresses``: how a host name becomes the addresses to connect to."""

_v4 = ipaddress.IPv4Network
_v6 = ipaddress.IPv6Network

# Cloud instance metadata and host-agent endpoints: refused even where an allowed range
# covers them, unless the allow-list names the exact address.
METADATA_ADDRESSES: frozenset[IPAddress] = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean, Oracle, Hetzner...
        "169.254.170.2",  # AWS ECS task metadata and credentials
        "169.254.170.23",  # AWS EKS pod identity agent
        "169.254.0.23",  # Tencent Cloud
        "100.100.100.200",  # Alibaba Cloud
        "168.63.129.16",  # Azure WireServer (a public address, reachable only from Azure)
        "192.0.0.192",  # Oracle Cloud (legacy)
        "fd00:ec2::254",  # AWS IMDS over IPv6
        "fd00:ec2::23",  # AWS EKS pod identity agent over IPv6
    )
)

# (range, reason), first match wins; everything not listed is public. From the IANA
# special-purpose address registries, plus multicast and reserved space.
_V4_BLOCKED: tuple[tuple[ipaddress.IPv4Network, str], ...] = (
    (_v4("0.0.0.0/8"), "an unspecified ('this network') address"),
    (_v4("127.0.0.0/8"), "a loopback address"),
    (_v4("10.0.0.0/8"), "a private (RFC 1918) address"),
    (_v4("172.16.0.0/12"), "a private (RFC 1918) address"),
    (_v4("192.168.0.0/16"), "a private (RFC 1918) address"),
    (_v4("100.64.0.0/10"), "a carrier-grade NAT (shared) address"),
    (_v4("169.254.0.0/16"), "a link-local address"),
    (_v4("192.0.0.0/24"), "an IETF protocol-assignment address"),
    (_v4("192.0.2.0/24"), "a documentation address"),
    (_v4("198.51.100.0/24"), "a documentation address"),
    (_v4("203.0.113.0/24"), "a documentation address"),
    (_v4("192.88.99.0/24"), "a deprecated 6to4 relay address"),
    (_v4("198.18.0.0/15"), "a benchmarking address"),
    (_v4("224.0.0.0/4"), "a multicast address"),
    (_v4("255.255.255.255/32"), "the broadcast address"),
    (_v4("240.0.0.0/4"), "a reserved address"),
)
_V6_BLOCKED: tuple[tuple[ipaddress.IPv6Network, str], ...] = (
    (_v6("::/128"), "an unspecified address"),
    (_v6("::1/128"), "a loopback address"),
    (_v6("::/96"), "a deprecated IPv4-compatible address"),
    (_v6("64:ff9b:1::/48"), "a local-use NAT64 address"),
    (_v6("100::/64"), "a discard-only address"),
    (_v6("2001::/32"), "a Teredo tunnel address"),
    (_v6("2001:db8::/32"), "a documentation address"),
    (_v6("2001::/23"), "an IETF protocol-assignment address"),
    (_v6("3fff::/20"), "a documentation address"),
    (_v6("fc00::/7"), "a unique local (private) address"),
    (_v6("fe80::/10"), "a link-local address"),
    (_v6("fec0::/10"), "a site-local address"),
    (_v6("ff00::/8"), "a multicast address"),
)
_V6_GLOBAL_UNICAST = _v6("2000::/3")  # the only IPv6 space allocated for public use
# IPv6 forms that stand for an IPv4 destination: judged on the IPv4 address they carry.
_V4_MAPPED = _v6("::ffff:0:0/96")
_NAT64 = _v6("64:ff9b::/96")
_SIX_TO_FOUR = _v6("2002::/16")


def _embedded_v4(ip: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, str] | None:
    """The IPv4 destination an IPv6 address stands for, and the name of the form."""
    if ip in _V4_MAPPED:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF), "an IPv4-mapped form of"
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF), "a NAT64 form of"
    if ip in _SIX_TO_FOUR:
        return ipaddress.IPv4Address((int(ip) >> 80) & 0xFFFFFFFF), "a 6to4 form of"
    return None


def _is_metadata(ip: IPAddress) -> bool:
    if ip in METADATA_ADDRESSES:
        return True
    embedded = _embedded_v4(ip) if isinstance(ip, ipaddress.IPv6Address) else None
    return embedded is not None and embedded[0] in METADATA_ADDRESSES


def blocked_reason(address: str | IPAddress) -> str | None:
    """Why ``address`` is not a public address (``"a loopback address"``), or ``None``.

    This is the default verdict, before any allow-list. IPv4-mapped, NAT64 and 6to4
    IPv6 addresses are judged on the IPv4 address they carry.
    """
    ip = ipaddress.ip_address(address) if isinstance(address, str) else address
    if ip in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if isinstance(ip, ipaddress.IPv4Address):
        for net4, reason in _V4_BLOCKED:
            if ip in net4:
                return reason
        return None
    embedded = _embedded_v4(ip)
    if embedded is not None:
        inner, form = embedded
        inner_reason = blocked_reason(inner)
        return None if inner_reason is None else f"{form} {inner}, {inner_reason}"
    for net6, reason in _V6_BLOCKED:
        if ip in net6:
            return reason
    if ip not in _V6_GLOBAL_UNICAST:
        return "a reserved address"
    return None


class Refused(TooldeckError, httpx.TransportError):
    """A request the guard would not send: the one line to show is :meth:`line`."""

    def __init__(self, host: str, address: str, reason: str, *, url: str | None = None):
        self.host = host
        self.address = address
        self.reason = reason
        self.url = url
        super().__init__(self.line())

    @property
    def subject(self) -> str:
        """``"127.0.0.1 is a loopback address"`` / ``"localhost resolves to 127.0.0.1, ..."``."""
        if _same_address(self.host, self.address):
            return f"{self.host} is {self.reason}"
        return f"{self.host} resolves to {self.address}, {self.reason}"

    def line(self, tool: str | None = None) -> str:
        """``"<subject>; <tool> only reaches public addresses (how to allow it)."``"""
        if self.reason.endswith("a cloud metadata address"):
            hint = f"only its exact address in {ALLOW_VARIABLE} allows it"
        else:
            hint = f"a user can allow a host or range in {ALLOW_VARIABLE}"
        who = (
            f"{tool} only reaches public addresses" if tool else "only public addresses are reached"
        )
        return f"{self.subject}; {who} ({hint})."


def _same_address(host: str, address: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")) == ipaddress.ip_address(address)
    except ValueError:
        return False


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]") if host.startswith("[") else host)
    except ValueError:
        return None


async def system_resolver(host: str, port: int) -> Sequence[str]:
    """The addresses the operating system gives for ``host`` (``getaddrinfo``)."""
    infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


_LABEL = r"[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?"
_HOST_LABELS = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")


def _norm_host(host: str) -> str:
    host = host.lower()
    return host[:-1] if host.endswith(".") else host


def _parse_host_entry(name: str, entry: str) -> str:
    """``name`` (``entry`` without a leading ``*.``) as a host name in the URL's form."""
    problem = f"{entry!r} is not a host name, an IP address or a CIDR range"
    if not name or any(c in name for c in ":/@?#[] \t"):
        raise ValueError(problem)
    try:
        host = _norm_host(httpx.URL(f"http://{name}/").raw_host.decode("ascii"))
    except (httpx.InvalidURL, UnicodeError) as exc:
        raise ValueError(f"{problem} ({exc})") from None
    if not _HOST_LABELS.match(host):
        raise ValueError(problem)
    if host.rsplit(".", 1)[-1].isdigit():
        raise ValueError(f"{problem} (write an address in dotted or IPv6 form)")
    return host


@dataclass(frozen=True, slots=True)
class _Rules:
    hosts: frozenset[str]
    suffixes: tuple[str, ...]  # ".corp.example" for "*.corp.example"
    networks: tuple[IPNetwork, ...]


def _parse_allow(entries: Iterable[str]) -> _Rules:
    hosts: set[str] = set()
    suffixes: list[str] = []
    networks: list[IPNetwork] = []
    for raw in entries:
        entry = raw.strip()
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
            continue
        except ValueError:
            pass
        if entry.startswith("*."):
            suffixes.append("." + _parse_host_entry(entry[2:], entry))
        else:
            hosts.add(_parse_host_entry(entry, entry))
    return _Rules(frozenset(hosts), tuple(suffixes), tuple(networks))


@dataclass(frozen=True, slots=True)
class NetPolicy:
    """Where the web tools may connect: public addresses, plus what a user allows.

    - ``allow``: host names (``"wiki.corp.example"``), wildcard domains
      (``"*.corp.example"``: its subdomains, not the domain itself), addresses
      (``"10.0.0.5"``, ``"::1"``) and CIDR ranges (``"10.0.0.0/8"``, ``"fd00::/8"``). An
      allowed host name may resolve to any address; an allowed range may be reached under
      any name. Cloud metadata addresses (:data:`METADATA_ADDRESSES`) are reached only
      when their exact address is listed. Any port is allowed.
    - ``proxy``: an ``http://`` or ``https://`` proxy URL (credentials in it are used).
      The proxy, not tooldeck, then resolves and connects to the target, so the guard
      judges what it can before sending: an address in the URL, and a host name that
      resolves here (refused if any address is not public); a name that does not resolve
      here is left to the proxy. The proxy itself may be on a private address.
    - ``verify``: the SSL context for https (``None``: certifi's CAs, or ``SSL_CERT_FILE``
      / ``SSL_CERT_DIR`` when set). Certificates are always checked for the host name.
    - ``resolver``: how host names are resolved (default: :func:`system_resolver`).

    Proxy environment variables (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``,
    ``NO_PROXY``) are never read. :meth:`from_env` reads ``TOOLDECK_WEB_ALLOW`` (entries
    separated by commas or spaces) and ``TOOLDECK_WEB_PROXY``.
    """

    allow: tuple[str, ...] = ()
    proxy: str | None = None
    verify: ssl.SSLContext | None = None
    resolver: Resolver | None = None
    _rules: _Rules = field(init=False, repr=False, compare=False)
    _proxy: httpx.Proxy | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.allow, str):
            object.__setattr__(self, "allow", tuple(_split(self.allow)))
        else:
            object.__setattr__(self, "allow", tuple(self.allow))
        object.__setattr__(self, "_rules", _parse_allow(self.allow))
        object.__setattr__(self, "_proxy", _parse_proxy(self.proxy))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> NetPolicy:
        """The policy set by ``TOOLDECK_WEB_ALLOW`` and ``TOOLDECK_WEB_PROXY``.

        Raises ``ValueError`` with a one-line message naming the variable.
        """
        env = os.environ if environ is None else environ
        try:
            allow = tuple(_split(env.get(ALLOW_VARIABLE, "")))
            _parse_allow(allow)
        except ValueError as exc:
            raise ValueError(f"{ALLOW_VARIABLE}: {exc}") from None
        try:
            return cls(allow=allow, proxy=env.get(PROXY_VARIABLE) or None)
        except ValueError as exc:
            raise ValueError(f"{PROXY_VARIABLE}: {exc}") from None

    # -- verdicts -------------------------------------------------------------------

    def host_allowed(self, host: str) -> bool:
        """Whether the allow-list names this host (exactly or by a wildcard domain)."""
        name = _norm_host(host)
        return name in self._rules.hosts or name.endswith(self._rules.suffixes)

    def _address_allowed(self, ip: IPAddress, *, exact: bool = False) -> bool:
        candidates: list[IPAddress] = [ip]
        if isinstance(ip, ipaddress.IPv6Address) and ip in _V4_MAPPED:
            candidates.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
        for net in self._rules.networks:
            for candidate in candidates:
                if candidate.version != net.version or candidate not in net:
                    continue
                if not exact or net.num_addresses == 1:
                    return True
        return False

    def reason(self, host: str, address: str | IPAddress) -> str | None:
        """Why connecting to ``address`` (resolved from ``host``) is refused, or ``None``."""
        ip = ipaddress.ip_address(address) if isinstance(address, str) else address
        verdict = blocked_reason(ip)
        if verdict is None:
            return None
        if _is_metadata(ip):
            return None if self._address_allowed(ip, exact=True) else verdict
        if self.host_allowed(host) or self._address_allowed(ip):
            return None
        return verdict

    def judge(self, host: str, addresses: Iterable[str]) -> list[str]:
        """The addresses to connect to, each checked; :class:`Refused` if any is refused.

        One refused address refuses them all: a host that resolves to both a public and
        a private address is not something to half-trust.
        """
        checked: list[str] = []
        for address in addresses:
            try:
                ip = ipaddress.ip_address(address)
            except ValueError:
                raise Refused(host, address, "an address that cannot be judged") from None
            why = self.reason(host, ip)
            if why is not None:
                raise Refused(host, str(ip), why)
            if str(ip) not in checked:
                checked.append(str(ip))
        return checked

    async def resolve(self, host: str, port: int) -> list[str]:
        """Resolve ``host`` once and judge every address: what may be connected to.

        An address literal is judged as it is (no lookup). Raises :class:`Refused`, or
        ``OSError`` when the name does not resolve.
        """
        ip = _literal(host)
        if ip is not None:
            return self.judge(host, [str(ip)])
        resolver = self.resolver or system_resolver
        found = await resolver(host, port)
        if not found:
            raise OSError(f"{host} resolved to no address")
        return self.judge(host, found)

    async def check_via_proxy(self, host: str, port: int) -> None:
        """With a proxy: refuse what can be known here to reach a non-public address."""
        with contextlib.suppress(OSError):  # a name only the proxy resolves: it decides
            await self.resolve(host, port)


def _split(value: str) -> list[str]:
    return [part for part in re.split(r"[\s,]+", value) if part]


def _parse_proxy(url: str | None) -> httpx.Proxy | None:
    if url is None:
        return None
    try:
        proxy = httpx.Proxy(url)
    except (ValueError, httpx.InvalidURL) as exc:
        raise ValueError(f"{url!r} is not a proxy URL ({exc})") from None
    if proxy.url.scheme not in ("http", "https") or not proxy.url.host:
        raise ValueError(f"{url!r}: the proxy must be an http:// or https:// URL with a host")
    return proxy


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend, connecting only to addresses the policy accepts.

    ``connect_tcp`` resolves the host once through the policy, which judges every
    address, and then connects to those exact addresses: no second lookup can hand the
    connection a different address (DNS rebinding). ``trusted`` is the configured
    proxy's ``(host, port)``, connected to without a check.
    """

    def __init__(
        self,
        policy: NetPolicy,
        *,
        trusted: tuple[str, int] | None = None,
        inner: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        self.policy = policy
        self.trusted = trusted
        self.inner = inner or httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        if self.trusted is not None and (_norm_host(host), port) == self.trusted:
            return await self.inner.connect_tcp(host, port, timeout, local_address, socket_options)
        try:
            with anyio.fail_after(timeout):
                addresses = await self.policy.resolve(host, port)
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"resolving {host} timed out") from None
        except OSError as exc:
            raise httpcore.ConnectError(f"could not resolve {host}: {exc}") from exc
        last: Exception | None = None
        for address in addresses:
            try:
                return await self.inner.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        assert last is not None  # judge() returns at least one address or raises
        raise last

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("the web tools do not connect to Unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class GuardedTransport(httpx.AsyncHTTPTransport):
    """An httpx transport whose every connection goes through :class:`GuardedBackend`.

    httpx builds the request and response objects; the connection pool underneath is
    ours, built with the guarded backend (httpx has no public way to hand it one).
    """

    def __init__(self, policy: NetPolicy) -> None:
        context = httpx.create_ssl_context(verify=policy.verify or True, trust_env=True)
        super().__init__(verify=context, trust_env=False)
        if not hasattr(self, "_pool"):  # pragma: no cover - an httpx that changed shape
            raise RuntimeError("this httpx version cannot be guarded; refusing to fetch")
        self.policy = policy
        proxy = policy._proxy
        if proxy is None:
            self.backend = GuardedBackend(policy)
            self._pool = httpcore.AsyncConnectionPool(
                ssl_context=context, network_backend=self.backend
            )
            return
        port = proxy.url.port or (443 if proxy.url.scheme == "https" else 80)
        proxy_host = _norm_host(proxy.url.raw_host.decode("ascii"))
        self.backend = GuardedBackend(policy, trusted=(proxy_host, port))
        self._pool = httpcore.AsyncHTTPProxy(
            proxy_url=httpcore.URL(
                scheme=proxy.url.raw_scheme,
                host=proxy.url.raw_host,
                port=proxy.url.port,
                target=proxy.url.raw_path,
            ),
            proxy_auth=proxy.raw_auth,
            proxy_headers=proxy.headers.raw,
            ssl_context=context,
            network_backend=self.backend,
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(
                f"Request URL has an unsupported protocol '{request.url.scheme}://'."
            )
        try:
            if self.policy._proxy is not None:
                host = request.url.raw_host.decode("ascii")
                port = request.url.port or (443 if request.url.scheme == "https" else 80)
                await self.policy.check_via_proxy(host, port)
            return await super().handle_async_request(request)
        except Refused as exc:
            if exc.url is None:
                exc.url = str(request.url)
            raise


def guarded_client(
    policy: NetPolicy | None = None,
    *,
    timeout: httpx.Timeout | float | None = 20.0,
    headers: Mapping[str, str] | None = None,
    follow_redirects: bool = True,
    max_redirects: int = 5,
) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` that only reaches what ``policy`` allows (public addresses).

    Environment proxies and ``.netrc`` are ignored; each redirect hop is a new request
    and is judged again. Only the codings :func:`tooldeck.web.netbody.read_capped` decodes
    within bounds are asked for (``Accept-Encoding: gzip, deflate``, not ``br`` or
    ``zstd`` even when their libraries are installed); read bodies with it.
    """
    return httpx.AsyncClient(
        transport=GuardedTransport(policy or NetPolicy()),
        trust_env=False,
        timeout=timeout,
        headers={"Accept-Encoding": ACCEPT_ENCODING, **(headers or {})},
        follow_redirects=follow_redirects,
        max_redirects=max_redirects,
    )
