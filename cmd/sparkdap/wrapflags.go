package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/sparkdap/sparkdap/workerwrap"
)

// wrapFlags are the worker wrapper options shared by wrap, conf and submit.
type wrapFlags struct {
	fs               *flag.FlagSet
	proxy            string
	tokenEnv         string
	embedToken       bool
	partitions       string
	stages           string
	sampleRate       float64
	connectTimeout   time.Duration
	handshakeTimeout time.Duration
	wait             bool
	postMortem       bool
	ide              string
}

func addWrapFlags(fs *flag.FlagSet) *wrapFlags {
	d := workerwrap.NewOptions()
	w := &wrapFlags{fs: fs}
	fs.StringVar(&w.proxy, "proxy", d.Proxy, "`host:port` of the sparkdap proxy as seen from the executors")
	fs.StringVar(&w.tokenEnv, "token-env", d.TokenEnv, "environment `variable` holding the access token, here and on the executors")
	fs.BoolVar(&w.embedToken, "embed-token", false, "bake the token from -token-env into the generated file (readable by anyone who can read the file)")
	fs.StringVar(&w.partitions, "partitions", "", "debug only these partition `ids` (comma separated; default all)")
	fs.StringVar(&w.stages, "stages", "", "debug only these stage `ids` (comma separated; default all)")
	fs.Float64Var(&w.sampleRate, "sample-rate", d.SampleRate, "debug this `fraction` (0..1] of the selected tasks, the same ones on every run")
	fs.DurationVar(&w.connectTimeout, "connect-timeout", d.ConnectTimeout, "give up connecting to the proxy after this `duration` (pydevd rounds up to whole seconds)")
	fs.DurationVar(&w.handshakeTimeout, "handshake-timeout", d.HandshakeTimeout, "give up if the proxy has not finished the debug handshake after this `duration`")
	fs.BoolVar(&w.wait, "wait", false, "stop each selected task at its first line of user code")
	fs.BoolVar(&w.postMortem, "post-mortem", false, "stop where an exception escapes user code")
	fs.StringVar(&w.ide, "ide", d.IDE, "`kind` of front end the workers attach to: dap (debugpy; serve's default) or pycharm (pydevd-pycharm; serve --ide-kind pycharm)")
	return w
}

// options turns the parsed flags into validated wrapper options.
func (w *wrapFlags) options() (workerwrap.Options, error) {
	o := workerwrap.NewOptions()
	o.Proxy = w.proxy
	o.TokenEnv = w.tokenEnv
	o.SampleRate = w.sampleRate
	o.ConnectTimeout = w.connectTimeout
	o.HandshakeTimeout = w.handshakeTimeout
	o.Wait = w.wait
	o.PostMortem = w.postMortem
	o.IDE = w.ide
	var err error
	if o.Partitions, err = workerwrap.ParseIDs(w.partitions); err != nil {
		return o, fmt.Errorf("-partitions: %w", err)
	}
	if o.Stages, err = workerwrap.ParseIDs(w.stages); err != nil {
		return o, fmt.Errorf("-stages: %w", err)
	}
	if w.embedToken {
		o.Token = os.Getenv(w.tokenEnv)
		if o.Token == "" {
			return o, fmt.Errorf("-embed-token: $%s is empty or unset", w.tokenEnv)
		}
	}
	if err := o.Validate(); err != nil {
		return o, err
	}
	return o, nil
}

// envOverrides maps the flags given explicitly on the command line to the
// executor environment variables that override a wrapper's baked-in values.
func (w *wrapFlags) envOverrides() [][2]string {
	var env [][2]string
	w.fs.Visit(func(f *flag.Flag) {
		var name string
		switch f.Name {
		case "proxy":
			name = "SPARKDAP_PROXY"
		case "partitions":
			name = "SPARKDAP_PARTITIONS"
		case "stages":
			name = "SPARKDAP_STAGES"
		case "sample-rate":
			name = "SPARKDAP_SAMPLE_RATE"
		case "connect-timeout":
			name = "SPARKDAP_CONNECT_TIMEOUT"
		case "handshake-timeout":
			name = "SPARKDAP_HANDSHAKE_TIMEOUT"
		case "wait":
			name = "SPARKDAP_WAIT"
		case "post-mortem":
			name = "SPARKDAP_POST_MORTEM"
		default:
			return
		}
		value := f.Value.String()
		if d, ok := f.Value.(flag.Getter).Get().(time.Duration); ok {
			value = fmt.Sprintf("%g", d.Seconds())
		}
		env = append(env, [2]string{name, value})
	})
	return env
}
