//go:build chaos

package chaos

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// A dependency is one process of its own, on a port of its own: the chaos
// test restarts and kills it, so it must never be the shared PostgreSQL,
// NATS or Redis other tests use.
type dependency struct {
	name  string
	port  int
	dir   string
	start func() error // (re)starts it on the same port and data
	stop  func() error // ends it at once, as a crash would
}

// waitPort waits until something accepts TCP connections on port.
func waitPort(port int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nothing listens on 127.0.0.1:%d after %v: %w", port, within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// procDep runs argv as a child process; stop kills it with SIGKILL.
func procDep(t *testing.T, name string, port int, dir string, argv func() []string) *dependency {
	t.Helper()
	var cmd *exec.Cmd
	d := &dependency{name: name, port: port, dir: dir}
	logPath := filepath.Join(dir, name+".log")
	d.start = func() error {
		log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer log.Close()
		a := argv()
		cmd = exec.Command(a[0], a[1:]...)
		cmd.Stdout, cmd.Stderr = log, log
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start %s: %w", name, err)
		}
		go cmd.Wait()
		if err := waitPort(port, 30*time.Second); err != nil {
			return fmt.Errorf("%s: %w (log %s)", name, err, logPath)
		}
		return nil
	}
	d.stop = func() error {
		if cmd == nil || cmd.Process == nil {
			return errors.New(name + " is not running")
		}
		err := cmd.Process.Kill()
		// The port is free once the process is gone.
		for i := 0; i < 100; i++ {
			if syscall.Kill(cmd.Process.Pid, 0) != nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		return err
	}
	t.Cleanup(func() { _ = d.stop() })
	return d
}

// startNATS runs a NATS server with JetStream, its store in a directory of
// its own, which a restart keeps.
func startNATS(t *testing.T) *dependency {
	t.Helper()
	bin := lookBin(t, "nats-server", "/usr/sbin/nats-server")
	dir := t.TempDir()
	port := freePort(t)
	d := procDep(t, "nats", port, dir, func() []string {
		return []string{bin, "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", filepath.Join(dir, "js")}
	})
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	return d
}

// startRedis runs a Redis that keeps nothing on disk: a rate-limit counter
// loses nothing that matters when it restarts empty.
func startRedis(t *testing.T) *dependency {
	t.Helper()
	bin := lookBin(t, "redis-server", "/usr/bin/redis-server")
	dir := t.TempDir()
	port := freePort(t)
	d := procDep(t, "redis", port, dir, func() []string {
		return []string{bin, "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--save", "", "--appendonly", "no", "--dir", dir}
	})
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	return d
}

// startPostgres makes a cluster in a temporary directory and runs it on a
// port of its own, with trust authentication and its socket in that
// directory. PostgreSQL refuses to run as root, so under root it runs as the
// postgres user.
func startPostgres(t *testing.T) *dependency {
	t.Helper()
	initdb := lookBin(t, "initdb", pgBin("initdb"))
	pgctl := lookBin(t, "pg_ctl", pgBin("pg_ctl"))
	dir, err := os.MkdirTemp("", "capgate-chaos-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	asUser := func(argv ...string) *exec.Cmd { return exec.Command(argv[0], argv[1:]...) }
	if os.Geteuid() == 0 {
		u, uerr := lookupUID("postgres")
		if uerr != nil {
			t.Fatalf("PostgreSQL will not run as root, and there is no postgres user to run it as: %v", uerr)
		}
		if err := os.Chown(dir, u.uid, u.gid); err != nil {
			t.Fatal(err)
		}
		asUser = func(argv ...string) *exec.Cmd {
			c := exec.Command(argv[0], argv[1:]...)
			c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.uid), Gid: uint32(u.gid)}}
			return c
		}
	}
	data := filepath.Join(dir, "data")
	if out, err := asUser(initdb, "-D", data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	port := freePort(t)
	logPath := filepath.Join(dir, "postgres.log")
	d := &dependency{name: "postgres", port: port, dir: dir}
	d.start = func() error {
		// fsync off: a killed server's committed work is still in the page
		// cache, and only a machine crash (not tested) would need the disk.
		opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200", port, dir)
		if out, err := asUser(pgctl, "-D", data, "-l", logPath, "-w", "-t", "60", "-o", opts, "start").CombinedOutput(); err != nil {
			return fmt.Errorf("pg_ctl start: %v\n%s", err, out)
		}
		return nil
	}
	d.stop = func() error {
		// Immediate: the server dies as in a crash and recovers from its
		// log when started again.
		if out, err := asUser(pgctl, "-D", data, "-m", "immediate", "-w", "stop").CombinedOutput(); err != nil {
			return fmt.Errorf("pg_ctl stop: %v\n%s", err, out)
		}
		return nil
	}
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.stop() })
	return d
}

// pgBin is where Debian keeps a PostgreSQL program, newest version first.
func pgBin(name string) string {
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	if len(matches) == 0 {
		return name
	}
	return matches[len(matches)-1]
}

// lookBin finds a program on PATH or at fallback; without it the test
// cannot run at all, which is a failure rather than a skip.
func lookBin(t *testing.T, name, fallback string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if _, err := os.Stat(fallback); err == nil {
		return fallback
	}
	t.Fatalf("%s not found on PATH or at %s: the chaos test runs a %s of its own", name, fallback, name)
	return ""
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

type ids struct{ uid, gid int }

func lookupUID(name string) (ids, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return ids{}, err
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return ids{}, err
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return ids{}, err
	}
	return ids{uid, gid}, nil
}
