package serve

import (
	"testing"
	"time"
)

// A session expires after SessionLifetime; a changed byte breaks it.
func TestSessionExpiry(t *testing.T) {
	s := newSessions()
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	s.now = func() time.Time { return now }
	v, _ := s.issue()
	if !s.valid(v) {
		t.Fatal("a fresh session is refused")
	}
	now = now.Add(SessionLifetime - time.Minute)
	if !s.valid(v) {
		t.Fatal("a session refused before its expiry")
	}
	now = now.Add(2 * time.Minute)
	if s.valid(v) {
		t.Fatal("an expired session is accepted")
	}
	now = now.Add(-SessionLifetime)
	for i := range len(v) {
		b := []byte(v)
		b[i] ^= 1
		if s.valid(string(b)) {
			t.Fatalf("a session with byte %d changed is accepted", i)
		}
	}
	for _, bad := range []string{"", ".", "a.b", v + "x", v[:10]} {
		if s.valid(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}
