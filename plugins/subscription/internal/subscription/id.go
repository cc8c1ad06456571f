package subscription

import (
	"crypto/rand"
	"regexp"
	"strconv"
	"strings"
)

// newSubscriptionID returns "sub_" and 12 random base32 characters (60
// bits): unguessable, so an id leaks nothing about other subscriptions,
// and short enough to read out.
func newSubscriptionID() string {
	return "sub_" + strings.ToLower(rand.Text()[:12])
}

var subscriptionIDPattern = regexp.MustCompile(`^sub_[a-z2-7]{12}$`)

// shortQuote quotes s for a message, cut to a readable length so a huge
// argument is not echoed back whole.
func shortQuote(s string) string {
	const max = 64
	if r := []rune(s); len(r) > max {
		s = string(r[:max]) + "…"
	}
	return strconv.Quote(s)
}
