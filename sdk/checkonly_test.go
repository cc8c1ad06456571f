package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

type checkedConfig struct {
	Mode string `json:"mode"`
}

func (c *checkedConfig) Check() error {
	if c.Mode != "" && c.Mode != "fast" {
		return errors.New(`checked config: mode: "` + c.Mode + `" is unknown; use "fast"`)
	}
	return nil
}

type checkIn struct{}
type checkOut struct{}

// checkedPlugin is a plugin whose service records that it was built, so a
// test can tell a check-only Configure from one that builds.
func checkedPlugin(built *int) *Plugin {
	p := New("checked", "1")
	svc := Configure(p, func(context.Context, Env, checkedConfig) (*struct{}, error) {
		*built++
		return &struct{}{}, nil
	})
	Add(p, Tool[checkIn, checkOut]{Name: "checked.noop", Kind: Read,
		Handler: Method(svc, func(*struct{}, context.Context, Call, checkIn) (checkOut, error) { return checkOut{}, nil })})
	return p
}

func checkOnly(config string) *capgatev1.ConfigureRequest {
	return &capgatev1.ConfigureRequest{CheckOnly: true, ConfigJson: json.RawMessage(config), DataDir: "/nonexistent"}
}

func TestCheckOnlyConfigureChecksWithoutBuilding(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, config, want string
	}{
		{"a good block", `{"mode":"fast"}`, ""},
		{"no block", ``, ""},
		{"an unknown key", `{"mdoe":"fast"}`, `checked config: json: unknown field "mdoe"`},
		{"a wrong type", `{"mode":1}`, "cannot unmarshal number"},
		{"Check refuses", `{"mode":"slow"}`, `mode: "slow" is unknown`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			built := 0
			s := newServer(checkedPlugin(&built))
			_, err := s.Configure(ctx, checkOnly(tc.config))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("check-only configure: %v", err)
			case tc.want != "" && (status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("check-only configure = %v; want InvalidArgument with %q", err, tc.want)
			}
			if built != 0 {
				t.Fatalf("the service was built %d times by a check-only configure", built)
			}
			// Still unconfigured: no call and no Start is served.
			if _, err := s.Start(ctx, &capgatev1.StartRequest{}); status.Code(err) != codes.FailedPrecondition {
				t.Errorf("start after check-only configure = %v; want FailedPrecondition", err)
			}
			if _, err := s.lookup("checked.noop"); status.Code(err) != codes.FailedPrecondition {
				t.Errorf("a call after check-only configure = %v; want FailedPrecondition", err)
			}
		})
	}
}

// A real Configure runs the same Check before building: validate and serve
// refuse the same blocks.
func TestConfigureRunsCheckBeforeBuild(t *testing.T) {
	built := 0
	s := newServer(checkedPlugin(&built))
	_, err := s.Configure(context.Background(), &capgatev1.ConfigureRequest{ConfigJson: json.RawMessage(`{"mode":"slow"}`)})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `mode: "slow" is unknown`) || built != 0 {
		t.Fatalf("configure = %v, built %d; want Check's refusal before any build", err, built)
	}
	if _, err := s.Configure(context.Background(), &capgatev1.ConfigureRequest{ConfigJson: json.RawMessage(`{"mode":"fast"}`)}); err != nil || built != 1 {
		t.Fatalf("configure = %v, built %d; want one build", err, built)
	}
}

func TestChecksConfigDescribed(t *testing.T) {
	ctx := context.Background()
	built := 0
	ran := false
	raw := New("raw", "1")
	raw.OnConfigure(func(context.Context, Env) error { ran = true; return nil })
	// Configure's check does not survive an OnConfigure set after it.
	overridden := checkedPlugin(&built)
	overridden.OnConfigure(func(context.Context, Env) error { return nil })
	for _, tc := range []struct {
		name string
		p    *Plugin
		want bool
	}{
		{"through Configure", checkedPlugin(&built), true},
		{"reading no config", New("plain", "1"), true},
		{"with its own OnConfigure", raw, false},
		{"with an OnConfigure set after Configure", overridden, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := newServer(tc.p).Describe(ctx, &capgatev1.DescribeRequest{})
			if err != nil || d.ChecksConfig != tc.want {
				t.Fatalf("describe before configure = %v, %v; want checks_config %v", d, err, tc.want)
			}
		})
	}
	// Asked anyway, a plugin with its own OnConfigure refuses rather than
	// run a function that may open anything.
	_, err := newServer(raw).Configure(ctx, checkOnly(`{"a":1}`))
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "cannot check its config") || ran {
		t.Fatalf("check-only configure of an OnConfigure plugin = %v (ran %v); want FailedPrecondition without running it", err, ran)
	}
	// A plugin reading no config still refuses keys, as serve would.
	_, err = newServer(New("plain", "1")).Configure(ctx, checkOnly(`{"zeta":1}`))
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "reads no config") {
		t.Fatalf("check-only configure of a plugin reading no config = %v; want the unread key refused", err)
	}
	if _, err := newServer(New("plain", "1")).Configure(ctx, checkOnly(`{}`)); err != nil {
		t.Fatalf("check-only configure with an empty block: %v", err)
	}
}
