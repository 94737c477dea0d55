package ui

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"

	"github.com/taskloom/taskloom/llm"
)

// ErrRemote is returned for a non-loopback address without AllowRemote.
var ErrRemote = errors.New("not a loopback address")

// Names of what carries the access token and the CSRF token.
const (
	tokenParam  = "token"
	tokenCookie = "taskloom_ui_token"
	csrfHeader  = "X-Taskloom-CSRF"
)

// CheckAddr checks that addr (host:port) may be listened on: a loopback
// host (127.0.0.0/8, ::1 or localhost), or any host when allowRemote.
func CheckAddr(addr string, allowRemote bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--addr %q: want HOST:PORT, such as 127.0.0.1:7070", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("--addr %q: the port must be a number from 0 to 65535, such as 127.0.0.1:7070", addr)
	}
	if llm.IsLoopback(host) || allowRemote {
		return nil
	}
	return fmt.Errorf("--addr %s: %w; pass --allow-remote to serve the run to the network (every request then needs the token printed at start)", addr, ErrRemote)
}

// newToken returns 32 random bytes in hex.
func newToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails on supported platforms
	return hex.EncodeToString(b[:])
}

func sameToken(got, want string) bool {
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// guard wraps the handler with the access rules: security headers, the
// Host check on loopback, the access token off loopback, and the CSRF
// checks on POSTs.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		// Everything the page needs comes from this server: no CDN, no
		// inline script, no framing, and no Referer that could carry the
		// token elsewhere.
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		if !s.remote {
			// A page of another site whose name resolves to 127.0.0.1 (DNS
			// rebinding) sends its own name as Host.
			host, _, err := net.SplitHostPort(r.Host)
			if err != nil {
				host = r.Host
			}
			if !llm.IsLoopback(host) {
				http.Error(w, "taskloom ui answers only to a loopback host name", http.StatusForbidden)
				return
			}
		}
		if s.token != "" && !s.authorized(w, r) {
			http.Error(w, "taskloom ui: missing or wrong access token; open the URL printed by taskloom ui", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodPost {
			// Nothing here takes another method: say so as HTTP does.
			w.Header().Set("Allow", "GET, HEAD, POST")
			http.Error(w, "taskloom ui: method "+r.Method+" not allowed", http.StatusMethodNotAllowed)
			return
		}
		if r.Method == http.MethodPost {
			if err := s.checkCSRF(r); err != nil {
				http.Error(w, "taskloom ui: "+err.Error(), http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// authorized checks the access token of a request, from the URL (the
// printed link), a header or the cookie that the first request sets, so
// that the page's own requests carry it without putting it in every URL.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	if got := r.URL.Query().Get(tokenParam); got != "" {
		if !sameToken(got, s.token) {
			return false
		}
		http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: s.token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		return true
	}
	if sameToken(r.Header.Get("X-Taskloom-Token"), s.token) {
		return true
	}
	c, err := r.Cookie(tokenCookie)
	return err == nil && sameToken(c.Value, s.token)
}

// checkCSRF accepts a state-changing request only from the page itself:
// POST, the server's CSRF token in a header (which a cross-site form
// cannot set), an Origin that is this server's, and, when the browser
// says where the request comes from, same-origin.
func (s *Server) checkCSRF(r *http.Request) error {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return fmt.Errorf("cross-site request refused (Sec-Fetch-Site %s)", site)
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return errors.New("request without Origin refused")
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host != r.Host || (u.Scheme != "http" && u.Scheme != "https") {
		return fmt.Errorf("request from origin %s refused: it is not this page's", origin)
	}
	if !sameToken(r.Header.Get(csrfHeader), s.csrf) {
		return errors.New("missing or wrong CSRF token; reload the page")
	}
	return nil
}
