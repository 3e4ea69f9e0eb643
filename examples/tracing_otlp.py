"""Tracing to an OTLP backend: a turn's spans (invoke_agent, chat, execute_tool) over OTLP/HTTP.

Set OTEL_EXPORTER_OTLP_ENDPOINT (e.g. http://localhost:4318 for Jaeger, Phoenix, Tempo or a
Collector) to send them there. Without it, this program starts a small OTLP/HTTP receiver
of its own on 127.0.0.1 and prints the spans it received. Needs `tooldeck[otel]`.
"""

import http.server
import os
import threading

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

import tooldeck
from tooldeck import telemetry
from tooldeck.providers import model_from_env
from tooldeck.testing import ScriptedModel, call, reply

received: list[str] = []


class Receiver(http.server.BaseHTTPRequestHandler):  # the OTLP/HTTP traces endpoint, protobuf
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.path == "/v1/traces":
            request = ExportTraceServiceRequest.FromString(body)
            for resource in request.resource_spans:
                for scope in resource.scope_spans:
                    received.extend(span.name for span in scope.spans)
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: object) -> None:
        pass


endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
server = None
if endpoint is None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
tracer_provider, meter_provider = telemetry.setup_otlp(endpoint, service_name="example-agent")


@tooldeck.tool(read_only=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


offline = ScriptedModel([reply(call("add", {"a": 1, "b": 2})), reply("1 + 2 = 3")])
result = tooldeck.run_sync(model_from_env(offline), [add], "What is 1 + 2?")
tracer_provider.force_flush()  # the batch processor sends now, not in 5 seconds
meter_provider.shutdown()
print("answer:", result.output)
if server is not None:
    print("spans received:", ", ".join(sorted(received)))
    server.shutdown()
else:
    print("spans sent to", endpoint)
