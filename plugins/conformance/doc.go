// Command capgate-plugin-conformance serves the fixtures of the MCP
// conformance suite's server scenarios: the tools (test_simple_text,
// test_error_handling, json_schema_2020_12_tool, test_custom_headers, ...)
// the suite calls by name, each answering what the suite's documentation of
// the scenario says it must. It exists so the suite can run in full against
// capgate; it serves no one else.
//
// Every fixture is in the pack conformance (off unless the operator turns it
// on) and needs the permission conformance.run, so it is gated like any
// other capability. It takes no config keys.
package main
