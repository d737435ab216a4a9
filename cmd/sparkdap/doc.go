// Command sparkdap debugs PySpark code that runs on executors from any DAP
// client. See the README for the commands and a walkthrough.
//
// # Flag vocabulary
//
// One flag name means one thing in every command that takes it (vocab.go
// holds the usage texts; TestFlagVocabulary checks types and meanings):
//
//	--ide HOST:PORT         the proxy's IDE port: serve listens there; doctor, paths
//	                        and vscode (the launch.json it writes) connect to it;
//	                        capture, select, workers and doctor derive the control
//	                        socket from it
//	--control PATH          the proxy's control socket (serve listens; capture,
//	                        select, workers and doctor connect; default derived
//	                        from --ide)
//	--executors HOST:PORT   the proxy's executor port (serve, doctor, pycharm)
//	--executor-ids IDS      Spark executor ids whose tasks debug (select); not
//	                        --executors, which is the port above
//	--partitions, --stages, --sample-rate
//	                        which tasks debug (wrap, conf, submit: baked in;
//	                        select: while the job runs)
//	--json                  print JSON for scripts (paths, select, workers, version)
//	--pycharm HOST:PORT     PyCharm's Python Debug Server (serve, pycharm)
//	--remote-listen H:P     serve's tunnel listener on the SSH gateway (serve, doctor)
//	--ide-kind dap|pycharm  the front end (serve, wrap, conf, submit)
//	--token TOKEN           the executors' token, its value (serve, doctor)
//	--token-env VAR         the variable holding the executors' token (wrap, conf, submit)
//	--ide-token TOKEN       the IDE token, its value (serve, doctor, paths)
//	--ide-token-env VAR     the variable holding the IDE token (vscode writes ${env:VAR})
//	--allow-weak-token      accept a token under 128 bits of entropy (serve: the
//	                        executors' and the IDE token; wrap, conf, submit: the
//	                        token baked into the wrapper)
//	--map REMOTE=LOCAL      a path rule in the proxy (serve)
//	--path-mapping R=L      a debugpy pathMappings entry in launch.json (vscode)
//	--ssh, --ssh-identity, --ssh-known-hosts, --ssh-timeout
//	                        the SSH gateway, same defaults (serve, doctor)
//	--conf KEY=VALUE, --archives LIST
//	                        the job's own spark-submit settings, spark-submit's
//	                        meaning (doctor: they choose the executors' Python)
//	--python PY             the executors' Python, overriding the job's (doctor, demo)
//	--pycharm-build BUILD   your PyCharm's build, whose pydevd-pycharm the executors
//	                        need (doctor checks it, pycharm's steps install it)
//	--image IMAGE, --namespace NS
//	                        Kubernetes: the executors' image, checked in a pod
//	                        of it, and the job's namespace (doctor)
//	--driver-dir DIR        the driver script's directory (conf; submit takes it
//	                        from the script's path)
//	--exception-hold D      how long a stop at an exception already seen in
//	                        another task waits before it runs on (serve)
//	--log-level, --log-format  (serve, agent)
//	-n                      dry run: print instead of writing or running (submit, vscode)
//
// Addresses are always one HOST:PORT flag. A token's value is --X-token,
// a file holding it --X-token-file, a variable holding it --X-token-env.
// Errors and help write flags as --name (one-letter flags -n, -o).
//
// Deprecated spellings, accepted until the next release with one notice
// line on stderr each: wrap/conf/submit --ide KIND (use --ide-kind: a
// kind is never HOST:PORT, so the old meaning is unambiguous); vscode
// --host/--port (use --ide HOST:PORT), --map (use --path-mapping) and the
// boolean --ide-token (use --ide-token-env SPARKDAP_IDE_TOKEN: launch.json
// is often committed, so it names the variable VS Code reads the token
// from, never the token); pycharm --host/--port (use --pycharm HOST:PORT)
// and --build (use --pycharm-build).
//
// # Structure
//
// Each command has a newXCmd that declares its flags into a FlagSet bound
// to an options struct, and an xRun that runs with those options (the
// shape of cli/cli's NewCmdX/runX). Completion and the vocabulary test
// walk the declared flag sets; nothing parses -h text. Library packages
// return typed errors and sentinels; this package adds the flag names
// (flagError, sshFlagError).
package main
