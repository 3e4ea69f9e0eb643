// Loaded first into npm's MCP servers by the tests (`node --import` this file, see
// `node_server` in tests/gateway_client.py): the server exits when its stdin ends.
// The MCP stdio shutdown starts with the client closing the server's stdin; npm's reference
// servers (the TypeScript SDK's StdioServerTransport) do not watch for that, and a timer of
// theirs keeps them running (server-everything asks `roots/list` 350 ms after `initialized`
// and waits 60 s for the answer; its simulated updates run every 5 s), so a client closing
// within that time waits out its SDK's grace period (2 s) and then kills them.
process.stdin.on("end", () => process.exit(0));
