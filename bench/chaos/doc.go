// Package chaos holds `make chaos`: two capgate replicas under steady load
// while their dependencies (PostgreSQL, NATS JetStream, Redis) restart, slow
// down or drop off the network, each behind a fault-injecting proxy. The
// test is built only with -tags chaos; see chaos_test.go.
package chaos
