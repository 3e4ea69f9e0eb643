"""MCP CallToolResult -> ToolResult: one representation for the model, evidence in details."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import mcp.types as mt
import pytest

from tooldeck import ImagePart, JsonPart, TextPart, ToolContext, tool
from tooldeck.mcp.results import call_tool_result_to_tool_result, representation_of
from tooldeck.offload import OffloadStore
from tooldeck.transcript import ToolCall

PNG = (  # a 1x1 PNG
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def text(value: str) -> mt.TextContent:
    return mt.TextContent(type="text", text=value)


def image(data: str = PNG, mime: str = "image/png") -> mt.ImageContent:
    return mt.ImageContent(type="image", data=data, mimeType=mime)


def test_structured_content_wins_and_its_text_copy_is_not_sent() -> None:
    structured = {"temperature": 21.5, "unit": "C", "readings": [1, 2, 3]}
    result = mt.CallToolResult(
        content=[text(json.dumps(structured))], structuredContent=structured, isError=False
    )
    out = call_tool_result_to_tool_result(result, server="weather", tool="current")
    assert list(out.content) == [JsonPart(structured)]
    assert out.text() == json.dumps(structured, separators=(",", ":"))
    assert out.text().count("temperature") == 1  # never the same data twice
    assert not out.is_error
    assert representation_of(result) == "structured"
    assert out.details["representation"] == "structured"
    assert out.details["not_shown"] == ["text"]
    assert (out.details["server"], out.details["tool"]) == ("weather", "current")
    assert out.details["mcp"] == result.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert out.details["mcp"]["structuredContent"] == structured


def test_structured_content_drops_other_blocks_too() -> None:
    result = mt.CallToolResult(
        content=[text('{"n": 1}'), image()], structuredContent={"n": 1}, isError=False
    )
    out = call_tool_result_to_tool_result(result)
    assert list(out.content) == [JsonPart({"n": 1})]
    assert out.details["not_shown"] == ["text", "image"]


def test_text_blocks() -> None:
    one = call_tool_result_to_tool_result(mt.CallToolResult(content=[text("hello")]))
    assert one.content == "hello" and representation_of(mt.CallToolResult(content=[])) == "content"
    two = call_tool_result_to_tool_result(mt.CallToolResult(content=[text("a"), text("b")]))
    assert list(two.content) == [TextPart("a"), TextPart("b")]
    assert two.text() == "a\nb"
    empty = call_tool_result_to_tool_result(mt.CallToolResult(content=[]))
    assert empty.content == "" and not empty.is_error


def test_images_become_image_parts() -> None:
    result = mt.CallToolResult(content=[text("a chart:"), image(mime="image/jpeg")])
    out = call_tool_result_to_tool_result(result)
    assert list(out.content) == [TextPart("a chart:"), ImagePart(data=PNG, mime_type="image/jpeg")]
    assert PNG not in out.text()  # the text view names the image, never its bytes


def test_is_error_maps_to_an_error_result() -> None:
    result = mt.CallToolResult(content=[text("no such city: Atlantis")], isError=True)
    out = call_tool_result_to_tool_result(result)
    assert out.is_error and out.content == "no such city: Atlantis"
    assert out.details["mcp"]["isError"] is True


def test_resources_and_audio_are_short_text() -> None:
    blob = "A" * 4_000  # 3,000 bytes once decoded
    result = mt.CallToolResult(
        content=[
            mt.ResourceLink(
                type="resource_link",
                name="report",
                uri="file:///data/report.pdf",
                mimeType="application/pdf",
                size=12_345,
                description="Quarterly report",
            ),
            mt.EmbeddedResource(
                type="resource",
                resource=mt.TextResourceContents(
                    uri="file:///notes.md", mimeType="text/markdown", text="# Notes\nbody"
                ),
            ),
            mt.EmbeddedResource(
                type="resource",
                resource=mt.BlobResourceContents(
                    uri="file:///a.bin", mimeType="application/octet-stream", blob=blob
                ),
            ),
            mt.EmbeddedResource(
                type="resource",
                resource=mt.BlobResourceContents(
                    uri="file:///p.png", mimeType="image/png", blob=PNG
                ),
            ),
            mt.AudioContent(type="audio", data=blob, mimeType="audio/wav"),
        ]
    )
    out = call_tool_result_to_tool_result(result)
    parts = out.parts
    assert isinstance(parts[0], TextPart)
    assert parts[0].text == (
        "[resource link — name: report, uri: file:///data/report.pdf, type: application/pdf, "
        "size: 12345, description: Quarterly report]"
    )
    assert parts[1] == TextPart(
        "[embedded resource — uri: file:///notes.md, type: text/markdown, characters: 12]"
        "\n# Notes\nbody"
    )
    assert parts[2] == TextPart(
        "[embedded binary resource, not shown — uri: file:///a.bin, "
        "type: application/octet-stream, size: 3,000 bytes]"
    )
    assert parts[3] == ImagePart(data=PNG, mime_type="image/png")
    assert parts[4] == TextPart("[audio, not shown — type: audio/wav, size: 3,000 bytes]")
    assert blob not in out.text()
    assert len(out.text()) < 600


def test_wire_dict_with_camel_case_fields() -> None:
    wire: dict[str, Any] = {
        "content": [{"type": "text", "text": "fallback"}],
        "structuredContent": {"ok": True},
        "isError": True,
    }
    out = call_tool_result_to_tool_result(wire)
    assert list(out.content) == [JsonPart({"ok": True})] and out.is_error
    assert out.details["mcp"] == wire
    plain = call_tool_result_to_tool_result({"content": [{"type": "image", "data": PNG}]})
    assert list(plain.content) == [ImagePart(data=PNG, mime_type="image/png")]


def test_unknown_block_types_are_named_not_dropped() -> None:
    out = call_tool_result_to_tool_result({"content": [{"type": "hologram", "x": 1}]})
    assert out.content == "[unsupported MCP content block — type: hologram]"


def test_large_structured_result_is_offloaded_with_a_json_summary(tmp_path: Path) -> None:
    rows = [{"id": i, "name": f"row {i}", "score": i / 7} for i in range(20_000)]
    result = mt.CallToolResult(
        content=[text(json.dumps({"rows": rows}))], structuredContent={"rows": rows}
    )
    converted = call_tool_result_to_tool_result(result, server="db", tool="query")

    @tool(read_only=True)
    def mcp__db__query() -> str:
        """A stand-in for an MCP tool."""
        return ""

    store = OffloadStore(tmp_path, "s1")
    call = ToolCall("c1", "mcp__db__query", "{}")
    out = asyncio.run(store.hook(call, mcp__db__query, converted, ToolContext("c1", "x", "s1")))
    assert (
        "Shape: {rows: array(20,000) of {id: number, name: string(5), score: number}}" in out.text()
    )
    assert out.details["mcp"]["structuredContent"]["rows"][0] == rows[0]  # evidence kept
    ref = out.details["offloaded"]["ref_id"]
    assert list(store.load(ref).content) == [JsonPart({"rows": rows})]


@pytest.mark.parametrize("flag", [True, False])
def test_is_error_flag_with_structured_content(flag: bool) -> None:
    result = mt.CallToolResult(content=[], structuredContent={"error": "x"}, isError=flag)
    out = call_tool_result_to_tool_result(result)
    assert out.is_error is flag and list(out.content) == [JsonPart({"error": "x"})]
