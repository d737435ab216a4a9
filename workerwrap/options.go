package workerwrap

import (
	"errors"
	"fmt"
	"math"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Defaults for Options. DefaultProxy is where `sparkdap serve` listens for
// workers unless told otherwise.
const (
	DefaultProxy            = "127.0.0.1:5678"
	DefaultTokenEnv         = "SPARKDAP_TOKEN"
	DefaultConnectTimeout   = 3 * time.Second
	DefaultHandshakeTimeout = 10 * time.Second
	// DefaultLease is how long a worker stopped at a breakpoint waits
	// without a word from the proxy before it resumes and runs on
	// undebugged (Options.Lease).
	DefaultLease = 60 * time.Second
	// MinLease and MaxLease bound a lease other than 0 (none). The proxy
	// proves it is there every 2 s while a worker is stopped
	// (dap.DefaultLeasePing, pycharm.DefaultLeasePing): a shorter lease
	// would lapse on a proxy that is only slow.
	MinLease = 10 * time.Second
	MaxLease = 24 * time.Hour
	// DefaultProxyBackoff is how long an executor's workers skip a proxy
	// that one of them found silent (Options.ProxyBackoff): long next to
	// a task, so a job of short tasks pays the timeouts about once a
	// minute per executor rather than once a task, and short next to a
	// closed laptop lid, so debugging comes back within a minute of the
	// proxy, without restarting the job.
	DefaultProxyBackoff = 60 * time.Second
	// MaxProxyBackoff bounds Options.ProxyBackoff.
	MaxProxyBackoff = 24 * time.Hour

	// ModuleName is what spark.python.daemon.module must be set to.
	ModuleName = "remote_debug"
	// FileName is the file the module must be shipped as.
	FileName = ModuleName + ".py"

	maxTimeout = 10 * time.Minute
)

// EnvVars names the executor environment variables that override the options
// baked into the generated module, in the order the documentation lists them.
var EnvVars = []string{
	"SPARKDAP_DISABLE",
	"SPARKDAP_PROXY",
	"SPARKDAP_PARTITIONS",
	"SPARKDAP_STAGES",
	"SPARKDAP_SAMPLE_RATE",
	"SPARKDAP_CONNECT_TIMEOUT",
	"SPARKDAP_HANDSHAKE_TIMEOUT",
	"SPARKDAP_WAIT",
	"SPARKDAP_POST_MORTEM",
	"SPARKDAP_LEASE",
	"SPARKDAP_PROXY_BACKOFF",
	"SPARKDAP_OUTPUT_FLUSH_TIMEOUT",
	"SPARKDAP_VERBOSE",
}

// Options configure the generated wrapper. The zero value is not valid; start
// from NewOptions.
type Options struct {
	// Proxy is the host:port of the sparkdap proxy as seen from executors.
	Proxy string
	// TokenEnv names the executor environment variable holding the access
	// token. Spark sets it from spark.executorEnv.<TokenEnv>.
	TokenEnv string
	// Token, if not empty, is baked into the file and used when TokenEnv is
	// unset on the executor. Anyone who can read the file can read it.
	Token string
	// Partitions and Stages restrict debugging to these ids: nil means all,
	// an empty list none (ParseIDs("none")).
	Partitions []int
	Stages     []int
	// SampleRate in (0, 1] debugs that fraction of the tasks that pass the
	// filters, chosen by a hash of stage and partition id so that retries and
	// reruns pick the same tasks.
	SampleRate float64
	// ConnectTimeout bounds the TCP connect to the proxy; pydevd takes whole
	// seconds, so it is rounded up to a second there.
	ConnectTimeout time.Duration
	// HandshakeTimeout bounds the DAP handshake after the TCP connect.
	HandshakeTimeout time.Duration
	// Wait stops each selected task at its first line of user code.
	Wait bool
	// PostMortem asks the proxy to stop where an exception escapes user code.
	PostMortem bool
	// Lease is how long a worker stopped at a breakpoint goes on waiting
	// without hearing from the proxy (which speaks every 2 s while it is
	// stopped): then it clears its breakpoints, resumes and runs on
	// undebugged, so that a proxy gone silent (a closed laptop, a dropped
	// VPN, a firewall dropping packets) cannot hold a task forever. 0 means
	// no lease: such a worker waits as long as the connection stays open.
	Lease time.Duration
	// ProxyBackoff is how long the other workers of an executor skip the
	// proxy, running their tasks undebugged at once, after one of them
	// found it silent: it waited out ConnectTimeout or HandshakeTimeout,
	// or its Lease lapsed. Failures that cost no wait (connection
	// refused, hello refused) start none. 0 means every worker tries.
	// Only workers forked by one Spark daemon share it.
	ProxyBackoff time.Duration
	// IDE selects the debugger the wrapper loads: IDEDAP (debugpy, for
	// `sparkdap serve`'s DAP front end) or IDEPyCharm (pydevd-pycharm, for
	// `sparkdap serve --ide-kind pycharm`).
	IDE string
}

// Values of Options.IDE.
const (
	IDEDAP     = "dap"
	IDEPyCharm = "pycharm"
)

// NewOptions returns Options with the defaults filled in.
func NewOptions() Options {
	return Options{
		Proxy:            DefaultProxy,
		TokenEnv:         DefaultTokenEnv,
		SampleRate:       1,
		IDE:              IDEDAP,
		ConnectTimeout:   DefaultConnectTimeout,
		HandshakeTimeout: DefaultHandshakeTimeout,
		Lease:            DefaultLease,
		ProxyBackoff:     DefaultProxyBackoff,
	}
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// SettingError is one invalid setting of Options. Setting names the Options
// field ("Proxy", "IDE", "TokenEnv", "Token", "Partitions", "Stages",
// "SampleRate", "ConnectTimeout", "HandshakeTimeout", "Lease", "ProxyBackoff"), so a caller that took
// the value from a flag or a variable can say which; the text names the
// setting in words.
type SettingError struct {
	Setting string
	// Value is the offending value as text ("" where showing it would
	// leak a secret).
	Value   string
	Problem string
	words   string
}

func (e *SettingError) Error() string {
	if e.Value == "" {
		return e.words + ": " + e.Problem
	}
	return e.words + " " + e.Value + ": " + e.Problem
}

func settingError(setting, words, value, problem string) *SettingError {
	return &SettingError{Setting: setting, Value: value, Problem: problem, words: words}
}

// Validate reports every problem with o as *SettingError values, joined,
// so that a user fixes a command line in one go.
func (o Options) Validate() error {
	var errs []error
	if err := validateProxy(o.Proxy); err != nil {
		errs = append(errs, err)
	}
	if o.IDE != IDEDAP && o.IDE != IDEPyCharm {
		errs = append(errs, settingError("IDE", "ide", strconv.Quote(o.IDE), fmt.Sprintf("want %s or %s", IDEDAP, IDEPyCharm)))
	}
	if !envNameRE.MatchString(o.TokenEnv) {
		errs = append(errs, settingError("TokenEnv", "token env", strconv.Quote(o.TokenEnv), "not a valid environment variable name"))
	}
	if strings.ContainsAny(o.Token, "\x00\r\n") {
		errs = append(errs, settingError("Token", "token", "", "must not contain NUL or line breaks"))
	}
	for _, ids := range []struct {
		setting, name string
		ids           []int
	}{{"Partitions", "partitions", o.Partitions}, {"Stages", "stages", o.Stages}} {
		for _, id := range ids.ids {
			if id < 0 {
				errs = append(errs, settingError(ids.setting, ids.name, "", fmt.Sprintf("%d is negative", id)))
			}
		}
	}
	if math.IsNaN(o.SampleRate) || o.SampleRate <= 0 || o.SampleRate > 1 {
		errs = append(errs, settingError("SampleRate", "sample rate", fmt.Sprint(o.SampleRate), "want a number in (0, 1]; 0 would debug nothing"))
	}
	for _, t := range []struct {
		setting, name string
		d             time.Duration
	}{{"ConnectTimeout", "connect timeout", o.ConnectTimeout}, {"HandshakeTimeout", "handshake timeout", o.HandshakeTimeout}} {
		if t.d <= 0 || t.d > maxTimeout {
			errs = append(errs, settingError(t.setting, t.name, t.d.String(), fmt.Sprintf("want more than 0 and at most %v", maxTimeout)))
		}
	}
	if o.Lease != 0 && (o.Lease < MinLease || o.Lease > MaxLease) {
		errs = append(errs, settingError("Lease", "lease", o.Lease.String(), fmt.Sprintf("want 0 (no lease) or from %v to %v", MinLease, MaxLease)))
	}
	if o.ProxyBackoff < 0 || o.ProxyBackoff > MaxProxyBackoff {
		errs = append(errs, settingError("ProxyBackoff", "proxy backoff", o.ProxyBackoff.String(), fmt.Sprintf("want 0 (none) to %v", MaxProxyBackoff)))
	}
	return errors.Join(errs...)
}

func validateProxy(proxy string) error {
	q := strconv.Quote(proxy)
	host, port, err := net.SplitHostPort(proxy)
	if err != nil {
		return settingError("Proxy", "proxy", q, "want host:port: "+err.Error())
	}
	if host == "" {
		// Executors are other machines: an empty host would mean "this
		// executor", which is never where the proxy runs in a cluster.
		return settingError("Proxy", "proxy", q, "host is empty")
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return settingError("Proxy", "proxy", q, "port must be a number in 1..65535")
	}
	return nil
}

// ParseIDs parses a comma separated list of non-negative ids such as "0,7".
// An empty string, "all" or "*" means no restriction (nil); "none" selects
// no id (an empty, non-nil list).
func ParseIDs(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "all" || s == "*" {
		return nil, nil
	}
	if s == "none" {
		return []int{}, nil
	}
	var ids []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		id, err := strconv.Atoi(part)
		if err != nil {
			return nil, fmt.Errorf("%q is not an id: %w", part, err)
		}
		if id < 0 {
			return nil, fmt.Errorf("%d is negative", id)
		}
		ids = append(ids, id)
	}
	return ids, nil
}
