package bench

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
)

// MachineFacts describes where the numbers were taken.
func MachineFacts(python string) string {
	model := "unknown CPU"
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	kernel := ""
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = strings.TrimSpace(string(b))
	}
	load := ""
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	pyv := ""
	if python != "" {
		if out, err := exec.Command(python, "-c", "import sys, debugpy; print(sys.version.split()[0], 'debugpy', debugpy.__version__)").Output(); err == nil {
			pyv = strings.TrimSpace(string(out))
		}
	}
	return fmt.Sprintf("%d CPUs (nproc), %s, Linux %s, load average at start %s, %s, Python %s, ulimit -n %d",
		runtime.NumCPU(), model, kernel, load, runtime.Version(), pyv, openFilesLimit())
}
