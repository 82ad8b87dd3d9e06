package serve

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"net/http"
	"strings"
	"time"
)

// SessionLifetime is how long a viewer session lasts after the sign-in.
const SessionLifetime = 12 * time.Hour

const sessionCookie = "safetensors_session"

// sessions signs and checks the viewer's session cookies. A cookie is a
// random id and an expiry time, signed with a key the process draws at
// start: every sign-in gets a new cookie, each expires, a restart ends
// them all, and the server stores nothing (so nothing grows with
// sign-ins). The token is never in it.
type sessions struct {
	key [32]byte
	now func() time.Time
}

func newSessions() *sessions {
	s := &sessions{now: time.Now}
	rand.Read(s.key[:]) // never fails (crypto/rand)
	return s
}

// sessionBody is the signed part: 16 random bytes and the expiry (Unix
// seconds, big-endian).
const sessionBody = 16 + 8

func (s *sessions) mac(body []byte) []byte {
	m := hmac.New(sha256.New, s.key[:])
	m.Write([]byte("safetensors serve viewer session\x00"))
	m.Write(body)
	return m.Sum(nil)
}

// issue returns a new cookie value and its expiry.
func (s *sessions) issue() (string, time.Time) {
	var body [sessionBody]byte
	rand.Read(body[:16])
	exp := s.now().Add(SessionLifetime).Truncate(time.Second)
	binary.BigEndian.PutUint64(body[16:], uint64(exp.Unix()))
	enc := base64.RawURLEncoding
	return enc.EncodeToString(body[:]) + "." + enc.EncodeToString(s.mac(body[:])), exp
}

// valid reports whether v is a cookie this process issued that has not
// expired; the signature is compared in constant time.
func (s *sessions) valid(v string) bool {
	b64, sig64, ok := strings.Cut(v, ".")
	if !ok || len(v) > 128 {
		return false
	}
	enc := base64.RawURLEncoding.Strict() // one spelling per value
	body, err1 := enc.DecodeString(b64)
	sig, err2 := enc.DecodeString(sig64)
	if err1 != nil || err2 != nil || len(body) != sessionBody {
		return false
	}
	if !hmac.Equal(sig, s.mac(body)) {
		return false
	}
	exp := int64(binary.BigEndian.Uint64(body[16:]))
	return s.now().Unix() < exp
}

// cookie is the Set-Cookie of a new session: HttpOnly, SameSite=Strict,
// Secure when the service is reached over TLS (its own, or a proxy's the
// operator declared with WithSecureCookie), with an expiry.
func (s *sessions) cookie(secure bool) *http.Cookie {
	v, exp := s.issue()
	return &http.Cookie{Name: sessionCookie, Value: v, Path: "/", Expires: exp, MaxAge: int(SessionLifetime / time.Second),
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode}
}
