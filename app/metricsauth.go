package app

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"
)

// The values of --metrics-auth.
const (
	// MetricsAuthNone serves /metrics to anyone who reaches the port, over
	// plain HTTP.
	MetricsAuthNone = "none"
	// MetricsAuthDelegated serves HTTPS and asks the API server who the
	// bearer token of a request is (TokenReview) and whether that user may
	// get the path (SubjectAccessReview), as the kubelet and
	// controller-runtime's secure metrics do.
	MetricsAuthDelegated = "delegated"
)

// MetricsAuthOptions are the flags of authenticated metrics serving.
type MetricsAuthOptions struct {
	// Mode is --metrics-auth: MetricsAuthNone or MetricsAuthDelegated.
	Mode string
	// CertFile and KeyFile are --tls-cert-file and --tls-private-key-file:
	// the serving certificate. Without them a self-signed one is made at
	// start (a scraper then skips verification, as it does for
	// controller-runtime's default).
	CertFile, KeyFile string
}

// AddFlags adds --metrics-auth, --tls-cert-file and --tls-private-key-file.
func (o *MetricsAuthOptions) AddFlags(fs *pflag.FlagSet) {
	if o.Mode == "" {
		o.Mode = MetricsAuthNone
	}
	fs.StringVar(&o.Mode, "metrics-auth", o.Mode, `Who may read /metrics: "none" (anyone who reaches the port, plain HTTP) or "delegated" (HTTPS; a bearer token the API server authenticates, TokenReview, of a user it authorizes to get the path, SubjectAccessReview: a ClusterRole with nonResourceURLs ["/metrics"], verbs ["get"]). Health checks stay open.`)
	fs.StringVar(&o.CertFile, "tls-cert-file", o.CertFile, "With --metrics-auth=delegated: the serving certificate (PEM); default: a self-signed one made at start.")
	fs.StringVar(&o.KeyFile, "tls-private-key-file", o.KeyFile, "With --metrics-auth=delegated: the key of --tls-cert-file.")
}

// Validate checks the flags; each error names its flag.
func (o *MetricsAuthOptions) Validate() error {
	switch o.Mode {
	case MetricsAuthNone:
		if o.CertFile != "" || o.KeyFile != "" {
			return errors.New("--tls-cert-file and --tls-private-key-file: only with --metrics-auth=delegated")
		}
	case MetricsAuthDelegated:
		if (o.CertFile == "") != (o.KeyFile == "") {
			return errors.New("--tls-cert-file and --tls-private-key-file: give both or neither")
		}
	default:
		return fmt.Errorf("--metrics-auth %q: want %q or %q", o.Mode, MetricsAuthNone, MetricsAuthDelegated)
	}
	return nil
}

// Enabled reports whether requests are authenticated.
func (o *MetricsAuthOptions) Enabled() bool { return o.Mode == MetricsAuthDelegated }

// TLSConfig is the serving TLS config of --metrics-auth=delegated: the
// given certificate, or a self-signed one for host.
func (o *MetricsAuthOptions) TLSConfig(host string) (*tls.Config, error) {
	var cert tls.Certificate
	var err error
	if o.CertFile != "" {
		cert, err = tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert-file/--tls-private-key-file: %w", err)
		}
	} else {
		certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(host, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("make a self-signed serving certificate: %w", err)
		}
		if cert, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
			return nil, fmt.Errorf("make a self-signed serving certificate: %w", err)
		}
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// Guard puts h behind the options: unchanged with none; with delegated,
// each request but those of the open paths is authenticated and authorized
// by the API server through client, over TLS (the returned config, for the
// listener). host names the self-signed certificate.
func (o *MetricsAuthOptions) Guard(h http.Handler, client kubernetes.Interface, host string, open ...string) (http.Handler, *tls.Config, error) {
	if !o.Enabled() {
		return h, nil, nil
	}
	if client == nil {
		return nil, nil, errors.New("--metrics-auth=delegated: needs the API server (--kubeconfig) to review the scrapes' tokens")
	}
	tlsConfig, err := o.TLSConfig(host)
	if err != nil {
		return nil, nil, err
	}
	return (&DelegatedAuth{Client: client, Open: open}).Wrap(h), tlsConfig, nil
}

// The cache lifetimes of DelegatedAuth, those of controller-runtime's
// metrics filters: an authenticated token for a minute, an allowed request
// for 5 minutes, a denied one for 30 seconds. A token or a binding revoked
// takes effect within them.
const (
	authnTTL     = time.Minute
	allowTTL     = 5 * time.Minute
	denyTTL      = 30 * time.Second
	reviewTimout = 10 * time.Second
	// maxCached bounds each cache; past it, expired entries go, then all.
	maxCached = 1024
)

// DelegatedAuth guards an http.Handler with the API server's
// authentication and authorization: a request's bearer token is reviewed
// (TokenReview), and the user must be allowed the request's verb on its
// path (SubjectAccessReview of a non-resource URL). A request without a
// token, or with one the API server does not authenticate, gets 401; a
// user not allowed gets 403; a review that fails gets 500 (refused, and
// not cached). Paths in Open pass unchecked (a kubelet's probes carry no
// token).
type DelegatedAuth struct {
	// Client creates the reviews. Its identity needs create on
	// tokenreviews (authentication.k8s.io) and subjectaccessreviews
	// (authorization.k8s.io), as system:auth-delegator grants.
	Client kubernetes.Interface
	// Open are the paths served to anyone.
	Open []string
	// Now is the clock of the caches; default time.Now.
	Now func() time.Time

	users ttlCache[[32]byte, cachedUser]
	authz ttlCache[string, cachedDecision]
}

type cachedUser struct {
	user authenticationv1.UserInfo
	ok   bool
}

type cachedDecision struct {
	allowed bool
	reason  string
}

// Wrap returns h behind the checks.
func (a *DelegatedAuth) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if slices.Contains(a.Open, r.URL.Path) {
			h.ServeHTTP(w, r)
			return
		}
		token, ok := bearer(r)
		if !ok {
			http.Error(w, "Unauthorized: a bearer token is required", http.StatusUnauthorized)
			return
		}
		user, ok, err := a.authenticate(r.Context(), token)
		if err != nil {
			klog.FromContext(r.Context()).Error(err, "Metrics authentication failed", "path", r.URL.Path)
			http.Error(w, "Internal Server Error: authentication failed", http.StatusInternalServerError)
			return
		}
		if !ok {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		verb := verbOf(r.Method)
		allowed, reason, err := a.authorize(r.Context(), user, verb, r.URL.Path)
		if err != nil {
			klog.FromContext(r.Context()).Error(err, "Metrics authorization failed", "user", user.Username, "path", r.URL.Path)
			http.Error(w, "Internal Server Error: authorization failed", http.StatusInternalServerError)
			return
		}
		if !allowed {
			msg := fmt.Sprintf("Forbidden: user %q cannot %s path %q", user.Username, verb, r.URL.Path)
			if reason != "" {
				msg += ": " + reason
			}
			http.Error(w, msg, http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// bearer returns the request's bearer token.
func bearer(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "bearer") || token == "" {
		return "", false
	}
	return token, true
}

// verbOf is the authorization verb of an HTTP method, as the API server
// names it for a non-resource request.
func verbOf(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead:
		return "get"
	case http.MethodPost:
		return "post"
	case http.MethodPut:
		return "put"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return strings.ToLower(method)
}

func (a *DelegatedAuth) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

func (a *DelegatedAuth) authenticate(ctx context.Context, token string) (authenticationv1.UserInfo, bool, error) {
	key := sha256.Sum256([]byte(token))
	now := a.now()
	if c, hit := a.users.get(key, now); hit {
		return c.user, c.ok, nil
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimout)
	defer cancel()
	tr, err := a.Client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token},
	}, metav1.CreateOptions{})
	if err != nil {
		return authenticationv1.UserInfo{}, false, fmt.Errorf("TokenReview: %w", err)
	}
	ok := tr.Status.Authenticated && tr.Status.Error == ""
	ttl := authnTTL
	if !ok {
		ttl = denyTTL
	}
	a.users.put(key, cachedUser{user: tr.Status.User, ok: ok}, now, now.Add(ttl))
	return tr.Status.User, ok, nil
}

func (a *DelegatedAuth) authorize(ctx context.Context, u authenticationv1.UserInfo, verb, path string) (bool, string, error) {
	groups := slices.Clone(u.Groups)
	slices.Sort(groups)
	key := strings.Join([]string{u.Username, u.UID, strings.Join(groups, ","), verb, path}, "\x00")
	now := a.now()
	if c, hit := a.authz.get(key, now); hit {
		return c.allowed, c.reason, nil
	}
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimout)
	defer cancel()
	sar, err := a.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, "", fmt.Errorf("SubjectAccessReview: %w", err)
	}
	d := cachedDecision{allowed: sar.Status.Allowed && !sar.Status.Denied, reason: sar.Status.Reason}
	ttl := allowTTL
	if !d.allowed {
		ttl = denyTTL
	}
	a.authz.put(key, d, now, now.Add(ttl))
	return d.allowed, d.reason, nil
}

// ttlCache is a bounded map whose entries expire: once full, the expired
// entries go, and if none had, all of them.
type ttlCache[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]ttlEntry[V]
}

type ttlEntry[V any] struct {
	v       V
	expires time.Time
}

func (c *ttlCache[K, V]) get(k K, now time.Time) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok || !now.Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.v, true
}

func (c *ttlCache[K, V]) put(k K, v V, now, expires time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[K]ttlEntry[V]{}
	}
	if len(c.m) >= maxCached {
		for key, e := range c.m {
			if !now.Before(e.expires) {
				delete(c.m, key)
			}
		}
		if len(c.m) >= maxCached {
			clear(c.m)
		}
	}
	c.m[k] = ttlEntry[V]{v: v, expires: expires}
}
