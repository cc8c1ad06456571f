package sdk_test

import (
	"fmt"
	"os"
	"testing"
)

// exampleTB lets a runnable example use package sdktest, which wants a
// testing.TB: examples get no *testing.T. It runs the cleanups at the end
// and turns a failure into a panic, which fails the example.
type exampleTB struct {
	testing.TB // never called: every method sdktest uses is below
	cleanups   []func()
	dirs       []string
}

func exampleT() *exampleTB { return &exampleTB{} }

func (t *exampleTB) Helper()             {}
func (t *exampleTB) Cleanup(f func())    { t.cleanups = append(t.cleanups, f) }
func (t *exampleTB) Logf(string, ...any) {}
func (t *exampleTB) Errorf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}
func (t *exampleTB) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (t *exampleTB) Fatal(args ...any)                 { panic(fmt.Sprint(args...)) }

func (t *exampleTB) TempDir() string {
	d, err := os.MkdirTemp("", "sdk-example-")
	if err != nil {
		panic(err)
	}
	t.dirs = append(t.dirs, d)
	return d
}

func (t *exampleTB) cleanup() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
	for _, d := range t.dirs {
		_ = os.RemoveAll(d)
	}
}
