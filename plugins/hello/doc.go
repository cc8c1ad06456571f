// Command capgate-plugin-hello is the smallest capgate plugin: one read
// capability, hello.greet, that answers {greeting: "hello, <name>"} for
// {name}. It belongs to the hello pack and needs the hello.greet permission.
//
// It is the trivial tool of capgate's benchmark, where the same tool is
// served by reference MCP servers, so its handler does nothing but build the
// greeting: what is measured is the path around it.
package main
