package main

import (
	"context"
	"os/exec"
	"testing"
	"time"
)

// TestCapgateEndToEnd builds capgate and its plugins, starts them as the
// bench does, and checks that hello.greet validates, that a booking.get
// target can be derived, and (when wrk is installed) that a short load run
// through capgate is valid.
func TestCapgateEndToEnd(t *testing.T) {
	bin := buildBinaries(t, capgateBin, helloPluginBin, bookingPluginBin)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := startCapgate(ctx, bin, t.TempDir(), true, governed, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	plugins, err := descendants(p.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if len(plugins) != 2 {
		t.Errorf("capgate runs %d child processes, want the 2 plugins", len(plugins))
	}
	defer func() {
		if err := p.stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
		for _, c := range plugins {
			if running(c) {
				t.Errorf("plugin process %d still running after stop", c.pid)
			}
		}
	}()

	if err := validateGreet(ctx, p.mcpURL()); err != nil {
		t.Fatalf("hello.greet through capgate: %v", err)
	}
	j, err := bookingJob(ctx, p.mcpURL())
	if err != nil {
		t.Fatalf("booking.get target: %v", err)
	}

	wrk, err := exec.LookPath("wrk")
	if err != nil {
		t.Log("wrk not installed; no load run")
		return
	}
	l := &load{wrk: wrk, threads: 1, connections: 4, duration: time.Second, workDir: t.TempDir()}
	body, err := toolCallBody(greetTool, greetIn{Name: greetName})
	if err != nil {
		t.Fatal(err)
	}
	for _, jj := range []job{
		{name: "hello", url: p.mcpURL(), body: body, marker: greet(greetIn{Name: greetName}).Greeting, cpu: p.cpu},
		{name: "booking", url: j.url, body: j.body, marker: j.marker, cpu: p.cpu},
	} {
		res, err := l.run(ctx, jj)
		if err != nil {
			t.Fatalf("%s: %v", jj.name, err)
		}
		if !res.valid() {
			t.Errorf("%s: invalid run: %s", jj.name, res.problem())
		}
		if res.cpu.server <= 0 {
			t.Errorf("%s: capgate's CPU not measured: %+v", jj.name, res.cpu)
		}
	}
}
