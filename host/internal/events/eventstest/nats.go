package eventstest

import (
	"net"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// LocalNATS is where the tests look for a running NATS server with
// JetStream.
const LocalNATS = "127.0.0.1:4222"

// NATSURL returns the URL of a NATS server with JetStream for the test: the
// one listening on LocalNATS, or else, outside CI, an embedded server
// started for this test and shut down at its cleanup. In CI (CI set) a
// missing server fails the test: CI must provide it.
func NATSURL(t *testing.T) string {
	t.Helper()
	if conn, err := net.DialTimeout("tcp", LocalNATS, time.Second); err == nil {
		_ = conn.Close()
		return "nats://" + LocalNATS
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("no NATS server on %s: CI must start one (nats-server -js)", LocalNATS)
	}
	return EmbeddedNATS(t)
}

// EmbeddedNATS starts a NATS server with JetStream inside the test process,
// on a random port with its store in a temporary directory, shuts it down
// at cleanup and returns its URL.
func EmbeddedNATS(t *testing.T) string {
	t.Helper()
	srv, err := server.NewServer(&server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT,
		JetStream: true,
		StoreDir:  t.TempDir(),
		NoLog:     true,
		NoSigs:    true,
	})
	if err != nil {
		t.Fatalf("embedded NATS server: %v", err)
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("embedded NATS server did not become ready")
	}
	return srv.ClientURL()
}
