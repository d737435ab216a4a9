package workerwrap

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// Spark conf keys the injection reads or writes.
const (
	ConfDaemonModule = "spark.python.daemon.module"
	confUseDaemon    = "spark.python.use.daemon"
	confPyFiles      = "spark.submit.pyFiles"
	confMaster       = "spark.master"
	confExecutorEnv  = "spark.executorEnv."
)

// EnvDriverDir names the executor environment variable that tells the
// wrapper and the proxy where the driver's script lives.
const EnvDriverDir = "SPARKDAP_DRIVER_DIR"

// Setting is one Spark conf entry.
type Setting struct{ Key, Value string }

// JobSettings lists the Spark settings that run a job's Python workers under
// the wrapper at wrapperPath, for a driver script in driverDir ("": none
// known). It is the one list `sparkdap submit` injects (Apply) and
// `sparkdap conf` prints, so the two cannot drift apart:
//
//   - spark.python.daemon.module=remote_debug, so workers fork from it;
//   - the wrapper in spark.submit.pyFiles (--py-files), which puts it in
//     the working directory of cluster executors, where `python -m` finds it;
//   - its directory on spark.executorEnv.PYTHONPATH, because in local mode
//     the shipped copy lands in a userFiles-* directory that is not on
//     sys.path when the daemon starts;
//   - spark.executorEnv.SPARKDAP_DRIVER_DIR: closures pickled from the
//     driver's script name it as their file; the wrapper and the proxy
//     need its directory to bind breakpoints there before a task runs one;
//   - the shipped debugger's wheel (ship.Wheel, which must sit next to the
//     wrapper) after the wrapper in spark.submit.pyFiles: the wrapper
//     finds it in its own directory, on the executors as in local mode;
//     with ship.Always, spark.executorEnv.SPARKDAP_SHIP_DEBUGGER=always
//     (with ship.Never, =never).
func JobSettings(wrapperPath, driverDir string, ship Shipped) []Setting {
	pyFiles := wrapperPath
	if ship.Wheel != "" {
		pyFiles += "," + ship.Wheel
	}
	out := []Setting{
		{ConfDaemonModule, ModuleName},
		{confPyFiles, pyFiles},
		{confExecutorEnv + "PYTHONPATH", filepath.Dir(wrapperPath)},
	}
	if driverDir != "" {
		out = append(out, Setting{confExecutorEnv + EnvDriverDir, driverDir})
	}
	switch {
	case ship.Wheel != "" && ship.Always:
		out = append(out, Setting{confExecutorEnv + EnvShipDebugger, ShipAlways})
	case ship.Never:
		out = append(out, Setting{confExecutorEnv + EnvShipDebugger, ShipNever})
	}
	return out
}

// Injection rewrites a spark-submit command line so that its Python workers
// run under the wrapper at WrapperPath.
type Injection struct {
	// WrapperPath is the generated remote_debug.py on the submitting machine.
	WrapperPath string
	// TokenEnv and Token: when Token is set and the master is not local,
	// spark.executorEnv.<TokenEnv> carries it to the executors. Local-mode
	// workers inherit it from the environment of spark-submit instead, which
	// keeps it off the command line.
	TokenEnv string
	Token    string
	// Shipped is the debugger shipped with the job, if any.
	Shipped Shipped
}

// spark-submit options that take no value (SparkSubmitOptionParser's
// switches). Every other option is assumed to take one, so that options
// newer than this list still parse.
var submitSwitches = map[string]bool{
	"--help": true, "-h": true, "--verbose": true, "-v": true, "--version": true,
	"--supervise": true, "--usage-error": true, "--load-spark-defaults": true,
}

type submitOpt struct {
	index int    // of the option name in args
	name  string // e.g. "--conf"
	value string
	eq    bool // --name=value form: value lives in args[index]
}

func (o submitOpt) set(args []string, value string) {
	if o.eq {
		args[o.index] = o.name + "=" + value
	} else {
		args[o.index+1] = value
	}
}

// confKV splits the value of --conf.
func confKV(v string) (key, value string, ok bool) {
	key, value, ok = strings.Cut(v, "=")
	return strings.TrimSpace(key), value, ok && strings.TrimSpace(key) != ""
}

// Apply returns a copy of args (spark-submit's arguments, without the
// program name) with JobSettings applied, the driver's directory being the
// application's. Options the user gave are merged, never duplicated (the
// wrapper is appended to --py-files, its directory prepended to
// PYTHONPATH, a driver directory of the user's kept); a conflicting daemon
// module or a disabled daemon is an error.
func (in Injection) Apply(args []string) ([]string, error) {
	if in.WrapperPath == "" || filepath.Base(in.WrapperPath) != FileName {
		return nil, fmt.Errorf("wrapper path %q: must name a file called %s", in.WrapperPath, FileName)
	}
	out := append([]string(nil), args...)
	var (
		opts    []submitOpt
		primary = -1
	)
	for i := 0; i < len(out); i++ {
		a := out[i]
		if a == "--" || !strings.HasPrefix(a, "-") || a == "-" {
			primary = i
			if a == "--" {
				return nil, errors.New("a second \"--\" in the spark-submit arguments: spark-submit does not accept it")
			}
			break
		}
		if name, value, ok := strings.Cut(a, "="); ok && strings.HasPrefix(a, "--") {
			opts = append(opts, submitOpt{index: i, name: name, value: value, eq: true})
			continue
		}
		if submitSwitches[a] {
			opts = append(opts, submitOpt{index: i, name: a})
			continue
		}
		if i+1 >= len(out) {
			return nil, fmt.Errorf("spark-submit option %s needs a value", a)
		}
		opts = append(opts, submitOpt{index: i, name: a, value: out[i+1]})
		i++
	}
	if primary < 0 {
		return nil, errors.New("no application in the spark-submit arguments: give the .py file after the options")
	}

	var (
		master                  string
		pyFiles, confPyFilesOpt *submitOpt
		pythonPath              *submitOpt
		haveTokenEnv            bool
		given                   = map[string]bool{} // conf keys the user set
	)
	for i := range opts {
		o := &opts[i]
		switch o.name {
		case "--master":
			master = o.value
		case "--py-files":
			pyFiles = o
		case "--conf", "-c":
			key, value, ok := confKV(o.value)
			if !ok {
				return nil, fmt.Errorf("%s %q: want key=value", o.name, o.value)
			}
			given[key] = true
			switch {
			case key == ConfDaemonModule:
				if strings.TrimSpace(value) != ModuleName {
					return nil, fmt.Errorf("%s=%s is already set; sparkdap needs it to be %s (a custom daemon cannot be combined with sparkdap)", key, value, ModuleName)
				}
			case key == confUseDaemon && strings.EqualFold(strings.TrimSpace(value), "false"):
				return nil, fmt.Errorf("%s=false: sparkdap hooks the Python daemon, which this turns off", key)
			case key == confPyFiles:
				confPyFilesOpt = o
			case key == confMaster && master == "":
				master = value
			case key == confExecutorEnv+"PYTHONPATH":
				pythonPath = o
			case in.TokenEnv != "" && key == confExecutorEnv+in.TokenEnv:
				haveTokenEnv = true
			}
		}
	}

	driverDir := ""
	// Closures pickled from the driver's script name it as their file.
	if app := out[primary]; strings.HasSuffix(app, ".py") {
		if abs, err := filepath.Abs(app); err == nil {
			driverDir = filepath.Dir(abs)
		}
	}
	var add []string
	if in.Shipped.Wheel != "" && filepath.Dir(in.Shipped.Wheel) != filepath.Dir(in.WrapperPath) {
		return nil, fmt.Errorf("shipped debugger %s: must sit next to the wrapper %s", in.Shipped.Wheel, in.WrapperPath)
	}
	for _, st := range JobSettings(in.WrapperPath, driverDir, in.Shipped) {
		switch {
		case st.Key == confPyFiles && pyFiles != nil:
			merged, err := appendPyFiles(pyFiles.value, st.Value)
			if err != nil {
				return nil, fmt.Errorf("--py-files: %w", err)
			}
			pyFiles.set(out, merged)
		case st.Key == confPyFiles && confPyFilesOpt != nil:
			// spark-submit's --py-files would replace this conf, not add to it.
			_, value, _ := confKV(confPyFilesOpt.value)
			merged, err := appendPyFiles(value, st.Value)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", confPyFiles, err)
			}
			confPyFilesOpt.set(out, confPyFiles+"="+merged)
		case st.Key == confPyFiles:
			add = append(add, "--py-files", st.Value)
		case st.Key == confExecutorEnv+"PYTHONPATH" && pythonPath != nil:
			_, value, _ := confKV(pythonPath.value)
			if value != "" {
				value = st.Value + string(filepath.ListSeparator) + value
			} else {
				value = st.Value
			}
			pythonPath.set(out, confExecutorEnv+"PYTHONPATH="+value)
		case given[st.Key]:
			// The user's own value stands (a daemon module was checked above).
		default:
			add = append(add, "--conf", st.Key+"="+st.Value)
		}
	}

	if in.Token != "" && !haveTokenEnv && !IsLocalMaster(master) {
		add = append(add, "--conf", confExecutorEnv+in.TokenEnv+"="+in.Token)
	}

	res := make([]string, 0, len(out)+len(add))
	res = append(res, out[:primary]...)
	res = append(res, add...)
	res = append(res, out[primary:]...)
	return res, nil
}

// IsLocalMaster reports whether master runs executors inside the driver JVM
// (local, local[N], local[*], local[N,F]); they inherit its environment.
func IsLocalMaster(master string) bool {
	m := strings.TrimSpace(master)
	return m == "local" || strings.HasPrefix(m, "local[")
}

// appendPyFiles appends each of the comma-separated paths to list.
func appendPyFiles(list, paths string) (string, error) {
	for _, p := range strings.Split(paths, ",") {
		var err error
		if list, err = appendPyFile(list, p); err != nil {
			return "", err
		}
	}
	return list, nil
}

func appendPyFile(list, path string) (string, error) {
	var parts []string
	for _, p := range strings.Split(list, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if filepath.Base(p) == FileName && filepath.Base(path) == FileName && p != path {
			return "", fmt.Errorf("already ships a %s (%s); it would shadow the one sparkdap generates", FileName, p)
		}
		if p == path {
			return list, nil
		}
		parts = append(parts, p)
	}
	return strings.Join(append(parts, path), ","), nil
}
