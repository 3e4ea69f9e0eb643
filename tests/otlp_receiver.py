"""A real OTLP/HTTP receiver for tests: protobuf over HTTP, decoded with the official
opentelemetry-proto messages, run in a thread of the test process on 127.0.0.1.

It speaks the wire format the OTLP/HTTP exporters send (``POST /v1/traces`` and
``/v1/metrics`` with ``application/x-protobuf`` bodies, gzip or not) and answers with the
protobuf ``Export*ServiceResponse`` the exporters expect. Received spans are kept as
plain dicts (hex ids, attribute values decoded) for assertions.
"""

from __future__ import annotations

import gzip
import http.server
import threading
import time
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


def _value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return tuple(_value(x) for x in v.array_value.values)
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, kind) if kind else None


def _attributes(items: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in items}


class OtlpReceiver:
    """``with OtlpReceiver() as receiver: ... receiver.spans``; ``endpoint`` is the base URL."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.metric_names: set[str] = set()
        self.requests: list[tuple[str, str]] = []  # (path, content type)
        lock = self.lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                kind = self.headers.get("Content-Type", "")
                with lock:
                    outer.requests.append((self.path, kind))
                if kind != "application/x-protobuf":
                    self.send_error(415)
                    return
                if self.path == "/v1/traces":
                    request = ExportTraceServiceRequest.FromString(body)
                    outer._take_spans(request)
                    answer = ExportTraceServiceResponse().SerializeToString()
                elif self.path == "/v1/metrics":
                    metrics = ExportMetricsServiceRequest.FromString(body)
                    with lock:
                        for rm in metrics.resource_metrics:
                            for sm in rm.scope_metrics:
                                outer.metric_names.update(m.name for m in sm.metrics)
                    answer = ExportMetricsServiceResponse().SerializeToString()
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def _take_spans(self, request: ExportTraceServiceRequest) -> None:
        found = []
        for rs in request.resource_spans:
            resource = _attributes(rs.resource.attributes)
            for ss in rs.scope_spans:
                for s in ss.spans:
                    found.append(
                        {
                            "trace_id": s.trace_id.hex(),
                            "span_id": s.span_id.hex(),
                            "parent_span_id": s.parent_span_id.hex() or None,
                            "name": s.name,
                            "kind": s.kind,
                            "start": s.start_time_unix_nano,
                            "end": s.end_time_unix_nano,
                            "attributes": _attributes(s.attributes),
                            "events": [(e.name, _attributes(e.attributes)) for e in s.events],
                            "status": s.status.code,
                            "scope": ss.scope.name,
                            "resource": resource,
                        }
                    )
        with self.lock:
            self.spans.extend(found)

    def wait_for(self, check: Any, what: str, timeout: float = 60.0) -> list[dict[str, Any]]:
        """Wait (bounded) until ``check(spans)`` is true; the spans then."""
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                spans = list(self.spans)
            if check(spans):
                return spans
            if time.monotonic() > deadline:
                names = sorted({s["name"] for s in spans})
                raise AssertionError(f"timed out waiting for {what}; received {names}")
            time.sleep(0.05)

    def __enter__(self) -> OtlpReceiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()
