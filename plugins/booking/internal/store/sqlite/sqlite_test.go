package sqlite_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/plugins/booking/internal/store"
	"github.com/capgate/capgate/plugins/booking/internal/store/sqlite"
	"github.com/capgate/capgate/plugins/booking/internal/store/storetest"
)

// helperEnv makes the test binary act as a second process racing for a
// slot; see TestCrossProcessCreatesOneWins.
const helperEnv = "BOOKING_SQLITE_RACE_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(raceHelper())
	}
	os.Exit(m.Run())
}

func openAt(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestContract(t *testing.T) {
	storetest.RunContract(t, func(t *testing.T) store.Store {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "booking.db"), nil)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s
	})
}

var raceDay = time.Date(2030, 1, 7, 10, 0, 0, 0, time.UTC)

func raceBooking(id string) store.Booking {
	return store.Booking{
		ID: id, ResourceID: "room-a", UserID: "user-" + id, Start: raceDay, End: raceDay.Add(time.Hour),
		Status: store.StatusActive, CreatedAt: raceDay.Add(-time.Hour),
	}
}

func seedRoom(t *testing.T, s store.Store) {
	t.Helper()
	err := s.CreateResource(context.Background(), store.Resource{
		ID: "room-a", Name: "Room A", Kind: "room", Capacity: 4, SlotMinutes: 60, OpensMinute: 480, ClosesMinute: 1200,
	})
	if err != nil {
		t.Fatalf("CreateResource: %v", err)
	}
}

// TestSeparateHandlesOneWins races creates through several independent
// connection pools on one file, as separate plugin processes would.
func TestSeparateHandlesOneWins(t *testing.T) {
	path := filepath.Join(t.TempDir(), "booking.db")
	stores := []*sqlite.Store{openAt(t, path), openAt(t, path), openAt(t, path), openAt(t, path)}
	seedRoom(t, stores[0])
	const n = 20
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = stores[i%len(stores)].CreateBooking(context.Background(), raceBooking(fmt.Sprintf("bk_handle%02d", i)))
		}()
	}
	close(start)
	wg.Wait()
	var won, taken int
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case errors.Is(err, store.ErrSlotTaken):
			taken++
		default:
			t.Errorf("create %d: %v", i, err)
		}
	}
	if won != 1 || taken != n-1 {
		t.Fatalf("%d creates over %d handles: %d won, %d taken; want 1 and %d", n, len(stores), won, taken, n-1)
	}
}

// TestCrossProcessCreatesOneWins starts several OS processes that each race
// a few goroutines for the same slot of one database file.
func TestCrossProcessCreatesOneWins(t *testing.T) {
	path := filepath.Join(t.TempDir(), "booking.db")
	s := openAt(t, path)
	seedRoom(t, s)
	const procs, perProc = 4, 5
	// A shared start instant lines the processes up despite their start-up.
	startAt := time.Now().Add(2 * time.Second).UnixNano()
	type out struct {
		stdout []byte
		err    error
	}
	outs := make([]out, procs)
	var wg sync.WaitGroup
	for p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(),
				helperEnv+"=1",
				"RACE_DB="+path,
				"RACE_PREFIX="+fmt.Sprintf("bk_proc%d_", p),
				"RACE_N="+strconv.Itoa(perProc),
				"RACE_START="+strconv.FormatInt(startAt, 10),
			)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			b, err := cmd.Output()
			if err != nil {
				err = fmt.Errorf("%w: %s", err, stderr.String())
			}
			outs[p] = out{b, err}
		}()
	}
	wg.Wait()
	var won, taken int
	for p, o := range outs {
		if o.err != nil {
			t.Fatalf("process %d: %v", p, o.err)
		}
		var w, tk int
		if _, err := fmt.Sscanf(string(o.stdout), "won=%d taken=%d", &w, &tk); err != nil {
			t.Fatalf("process %d printed %q: %v", p, o.stdout, err)
		}
		won += w
		taken += tk
	}
	if won != 1 || taken != procs*perProc-1 {
		t.Fatalf("%d processes x %d creates: %d won, %d taken; want 1 and %d", procs, perProc, won, taken, procs*perProc-1)
	}
	active, err := s.ActiveBookings(context.Background(), "room-a", raceDay, raceDay.Add(time.Hour))
	if err != nil || len(active) != 1 {
		t.Fatalf("active bookings = %d, %v; want 1", len(active), err)
	}
}

// raceHelper is the child side of TestCrossProcessCreatesOneWins. It prints
// "won=W taken=T" and returns the exit code.
func raceHelper() int {
	n, _ := strconv.Atoi(os.Getenv("RACE_N"))
	startNanos, _ := strconv.ParseInt(os.Getenv("RACE_START"), 10, 64)
	ctx := context.Background()
	s, err := sqlite.Open(ctx, os.Getenv("RACE_DB"), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer s.Close()
	time.Sleep(time.Until(time.Unix(0, startNanos)))
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.CreateBooking(ctx, raceBooking(fmt.Sprintf("%s%d", os.Getenv("RACE_PREFIX"), i)))
		}()
	}
	wg.Wait()
	var won, taken int
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case errors.Is(err, store.ErrSlotTaken):
			taken++
		default:
			fmt.Fprintln(os.Stderr, err)
			return 3
		}
	}
	fmt.Printf("won=%d taken=%d\n", won, taken)
	return 0
}
