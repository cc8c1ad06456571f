// Package stdio bridges MCP over stdio to capgate's Streamable HTTP
// endpoint.
package stdio
