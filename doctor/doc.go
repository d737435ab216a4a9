// Package doctor checks that a machine, and the path from the executors to
// the IDE, are ready for sparkdap, and prints a verdict for each check (OK,
// WARN, FAIL with the reason and a fix, SKIP). It is the body of the
// sparkdap doctor command: the command parses its flags into a Config and
// calls Run.
//
// The checks run in order on one goroutine and may leave what they found
// for the ones after them: the ports first (free, or a sparkdap already
// serving, told apart by asking with sparkdap's own requests), the Python
// the executors will run as Spark chooses it (inside the job's archives,
// unpacked to a temp dir with a size cap and no entry escaping it; a later
// entry of one path replaces the earlier, as the tar YARN runs does), Spark
// (for a packed Python without pyspark, this machine's python3's: Spark
// ships its own pyspark to the executors),
// Java, the SSH gateway, then a test connection along the whole path: the
// worker wrapper's own probe says the hello, calls debugpy.connect, and the
// proxy must list it on its IDE port. Without a running proxy the test goes
// to a temporary one on loopback, so a healthy machine is told from a
// broken one before anything is started. Last, the running serve, if any,
// is asked on its control socket which sparkdap release wrote each of the
// running job's wrappers (wrapperversion.go): a job keeps its wrapper
// across an upgrade of serve. Each check that runs something is bounded
// by Config.Timeout.
//
// The report is advice to a user of the sparkdap CLI, so its fixes name the
// CLI's flags and commands; errors that come from the caller's own settings
// (parsing and dialing the gateway) are explained by the caller
// (Gateway.Explain), which names the flag behind them.
package doctor
