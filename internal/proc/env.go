package proc

import (
	"bytes"
	"slices"
	"strings"
)

// DefaultEnvAllow is what a sandboxed command keeps of the environment
// by default (the sandbox.env_allow default).
var DefaultEnvAllow = []string{"PATH", "HOME", "LANG", "TERM", "TMPDIR", "GOPATH", "GOCACHE", "GOMODCACHE", "GOFLAGS"}

// ReduceEnv returns the variables of environ whose names are in allow,
// followed by extra ("NAME=value" pairs, which win over environ's). On
// Windows names compare without case, as the OS does.
func ReduceEnv(environ, allow []string, extra ...string) []string {
	out := make([]string, 0, len(allow)+len(extra))
	overridden := make(map[string]bool, len(extra))
	for _, kv := range extra {
		name, _, _ := strings.Cut(kv, "=")
		overridden[envKey(name)] = true
	}
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || overridden[envKey(name)] || !allowed(name, allow) {
			continue
		}
		out = append(out, kv)
	}
	return append(out, extra...)
}

func allowed(name string, allow []string) bool {
	return slices.ContainsFunc(allow, func(a string) bool { return envKey(a) == envKey(name) })
}

// minSecretLength is the shortest value Redactor hides: shorter values
// ("1", "true", "C") are too common in ordinary output to be secrets worth
// mangling it for.
const minSecretLength = 6

// Redactor replaces secret values in text with "[REDACTED]".
type Redactor struct {
	r       *strings.Replacer
	secrets []secret // longest value first
}

type secret struct{ name, value string }

// NewRedactor returns a Redactor for the values of every variable of
// environ whose name is not in allow (a variable the sandbox removed is
// presumed secret), plus the extra values (provider keys). Values shorter
// than six bytes, and values that are only a path or a list of paths
// (HOME, PWD, PATH-like variables), are left alone: redacting those would
// mangle every file name in the output and protect nothing.
func NewRedactor(environ, allow []string, extra ...string) *Redactor {
	r := &Redactor{}
	add := func(name, v string) {
		v = strings.TrimSpace(v)
		if len(v) >= minSecretLength && !slices.ContainsFunc(r.secrets, func(s secret) bool { return s.value == v }) {
			r.secrets = append(r.secrets, secret{name, v})
		}
	}
	for _, kv := range environ {
		name, v, ok := strings.Cut(kv, "=")
		if !ok || allowed(name, allow) || onlyPaths(v) {
			continue
		}
		add(name, v)
	}
	for _, v := range extra {
		add(providerKey, v)
	}
	// Longer values first, so that a secret that contains another is
	// replaced whole.
	slices.SortStableFunc(r.secrets, func(a, b secret) int { return len(b.value) - len(a.value) })
	r.build()
	return r
}

const providerKey = "a provider key"

func (r *Redactor) build() {
	pairs := make([]string, 0, 2*len(r.secrets))
	for _, s := range r.secrets {
		pairs = append(pairs, s.value, "[REDACTED]")
	}
	if len(pairs) > 0 {
		r.r = strings.NewReplacer(pairs...)
	}
}

// Credentials returns a Redactor for the secrets of r that are credentials
// by their name (…KEY, …TOKEN, …SECRET, …PASSWORD and the like) or their
// value (a URL with a password, a private key), and the provider keys. It
// is for the files a worker reads and then edits: hiding every value the
// sandbox removes (DEBIAN_FRONTEND=noninteractive, NODE_ENV=production)
// would show it files that are not what is on disk.
func (r *Redactor) Credentials() *Redactor {
	out := &Redactor{}
	if r == nil {
		return out
	}
	for _, s := range r.secrets {
		if s.name == providerKey || credentialName(s.name) || credentialValue(s.value) {
			out.secrets = append(out.secrets, s)
		}
	}
	out.build()
	return out
}

var credentialWords = []string{"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASS", "PWD", "CREDENTIAL", "AUTH",
	"PRIVATE", "COOKIE", "SESSION", "DSN", "SIGNATURE", "SALT", "CERT"}

func credentialName(name string) bool {
	name = strings.ToUpper(name)
	if name == "PWD" || name == "OLDPWD" {
		return false // the shell's working folders
	}
	return slices.ContainsFunc(credentialWords, func(w string) bool { return strings.Contains(name, w) })
}

func credentialValue(v string) bool {
	if strings.Contains(v, "-----BEGIN ") {
		return true
	}
	// scheme://user:password@host
	if _, rest, ok := strings.Cut(v, "://"); ok {
		if userinfo, _, ok := strings.Cut(rest, "@"); ok && strings.Contains(userinfo, ":") && !strings.ContainsAny(userinfo, "/") {
			return true
		}
	}
	return false
}

// Values returns the secret values, for a redactor of another kind (the
// provider's errors) to hide them too.
func (r *Redactor) Values() []string {
	if r == nil {
		return nil
	}
	out := make([]string, len(r.secrets))
	for i, s := range r.secrets {
		out[i] = s.value
	}
	return out
}

// Redact returns s with every secret value replaced.
func (r *Redactor) Redact(s string) string {
	if r == nil || r.r == nil {
		return s
	}
	return r.r.Replace(s)
}

// Find returns the names of the variables whose values appear in data,
// never the values.
func (r *Redactor) Find(data []byte) []string {
	if r == nil {
		return nil
	}
	var names []string
	for _, s := range r.secrets {
		if bytes.Contains(data, []byte(s.value)) && !slices.Contains(names, s.name) {
			names = append(names, s.name)
		}
	}
	return names
}

// onlyPaths reports whether v is an absolute path or a list of them,
// which no one keeps secrets in.
func onlyPaths(v string) bool {
	if v == "" {
		return true
	}
	for _, p := range strings.FieldsFunc(v, func(r rune) bool { return r == ':' || r == ';' }) {
		if !strings.HasPrefix(p, "/") && !(len(p) > 2 && p[1] == ':' && (p[2] == '\\' || p[2] == '/')) {
			return false
		}
		if strings.ContainsAny(p, "@?=") {
			return false
		}
	}
	return true
}
