// Command capgate-plugin-hello is the smallest capgate plugin: one read
// capability, hello.greet, that answers {greeting: "hello, <name>"} for
// {name}. It belongs to the hello pack and needs the hello.greet permission.
//
// It is a fixture, never shipped: the app tests start it as a real plugin
// process, and capgate-bench (bench/) serves it as the trivial tool it also
// serves from reference MCP servers, so its handler does nothing but build
// the greeting: what is measured is the path around it.
package main
