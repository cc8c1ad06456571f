package config

import "testing"

func TestExpand(t *testing.T) {
	env := map[string]string{"A": "alpha", "EMPTY": "", "B_2": "beta", "DOLLAR": "$A"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct {
		in, want, err string
	}{
		{in: "plain", want: "plain"},
		{in: "${A}", want: "alpha"},
		{in: "x${A}y${B_2}z", want: "xalphaybetaz"},
		{in: "${EMPTY}", want: ""},
		{in: "${MISSING:-def}", want: "def"},
		{in: "${EMPTY:-def}", want: "def"},
		{in: "${A:-def}", want: "alpha"},
		{in: "${MISSING:-}", want: ""},
		{in: "${MISSING:-a:-b}", want: "a:-b"},
		{in: "$${A}", want: "${A}"},
		{in: "$$$${A}", want: "$${A}"},
		{in: "$$${A}", want: "$alpha"},
		{in: "cost: $5", want: "cost: $5"},
		{in: "trailing $", want: "trailing $"},
		{in: "$A", want: "$A"},
		{in: "${DOLLAR}", want: "$A"}, // values are not expanded again
		{in: "${MISSING}", err: "environment variable MISSING is not set (write ${MISSING:-default} to give a default)"},
		{in: "ok ${A} ${MISSING}", err: "environment variable MISSING is not set (write ${MISSING:-default} to give a default)"},
		{in: "${A", err: `unterminated "${A": a reference is written ${NAME} or ${NAME:-default}`},
		{in: "${}", err: "invalid reference ${}: a variable name is letters, digits and _, not starting with a digit"},
		{in: "${A-B}", err: "invalid reference ${A-B}: a variable name is letters, digits and _, not starting with a digit"},
		{in: "${9A}", err: "invalid reference ${9A}: a variable name is letters, digits and _, not starting with a digit"},
		{in: "${:-x}", err: "invalid reference ${:-x}: a variable name is letters, digits and _, not starting with a digit"},
	}
	for _, tt := range tests {
		got, err := expand(tt.in, lookup)
		switch {
		case tt.err != "" && (err == nil || err.Error() != tt.err):
			t.Errorf("expand(%q) error = %v, want %q", tt.in, err, tt.err)
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("expand(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}
