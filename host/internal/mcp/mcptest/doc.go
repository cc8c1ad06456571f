// Package mcptest is a small in-memory platform for tests of the MCP wire
// adapter and the HTTP server around it.
//
// It builds a real registry, a real dispatcher and a real dispatch.Provider
// (bookings kept in a map and, with WithRecords, a small catalogue served by
// platform.get and platform.list), so tests drive the same gate production
// does and only the plugin process is replaced by code in this package.
package mcptest
