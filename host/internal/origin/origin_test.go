package origin

import "testing"

func TestAllows(t *testing.T) {
	cases := []struct {
		name    string
		allowed []string
		host    string
		origin  string
		want    bool
	}{
		{"localhost", nil, "capgate.example.com", "http://localhost:5173", true},
		{"loopback v4", nil, "127.0.0.1:8080", "http://127.0.0.1:3000", true},
		{"loopback v6", nil, "[::1]:8080", "http://[::1]:3000", true},
		{"same host by IP literal", nil, "10.1.2.3:8080", "http://10.1.2.3:8080", true},
		{"same IP literal, default port", nil, "10.1.2.3", "http://10.1.2.3", true},
		{"same IP literal, https default port", nil, "10.1.2.3:443", "https://10.1.2.3", true},
		{"same IP, other port", nil, "10.1.2.3:8080", "http://10.1.2.3:9090", false},
		{"foreign", nil, "capgate.example.com", "https://evil.example", false},
		{"rebinding: same name", nil, "evil.example:8080", "http://evil.example:8080", false},
		{"null", nil, "capgate.example.com", "null", false},
		{"empty", nil, "capgate.example.com", "", false},
		{"not a URL", nil, "capgate.example.com", "localhost", false},
		{"no host", nil, "capgate.example.com", "http://", false},
		{"path in origin", nil, "capgate.example.com", "http://localhost/x", false},
		{"userinfo in origin", nil, "capgate.example.com", "http://evil@localhost", false},
		{"other scheme", nil, "capgate.example.com", "file://localhost", false},
		{"listed", []string{"https://app.example.com"}, "capgate.example.com", "https://app.example.com", true},
		{"listed, case and slash differ", []string{" HTTPS://App.Example.com/ "}, "capgate.example.com", "https://app.example.com", true},
		{"listed, other port", []string{"https://app.example.com"}, "capgate.example.com", "https://app.example.com:8443", false},
		{"blank list entry", []string{""}, "capgate.example.com", "", false},
		{"wildcard", []string{"*"}, "capgate.example.com", "https://anything.example", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := NewPolicy(tc.allowed).Allows(tc.origin, tc.host); got != tc.want {
				t.Fatalf("Allows(%q, %q) = %v, want %v", tc.origin, tc.host, got, tc.want)
			}
		})
	}
	if (Policy{}).Allows("https://evil.example", "capgate.example.com") || !(Policy{}).Allows("http://localhost", "x") {
		t.Fatal("the zero Policy must allow loopback origins only")
	}
}
