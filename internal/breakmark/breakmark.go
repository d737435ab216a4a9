// Package breakmark finds the lines that the demo's and the tests' Python
// sources mark for a breakpoint with a trailing comment, so that a breakpoint
// follows its line when the source around it changes.
package breakmark

import (
	"fmt"
	"os"
	"strings"
)

// Mark is the comment that marks a breakpoint line in the demo's and the tests'
// Python sources: "# BREAKPOINT" alone, or "# BREAKPOINT: name" where a file has
// several.
const Mark = "# BREAKPOINT"

// Line returns the 1-based number of the one line of path that
// ends with "# BREAKPOINT: name" (name "": with "# BREAKPOINT" alone). No
// such line, or more than one, is an error.
func Line(path, name string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	mark := Mark
	if name != "" {
		mark += ": " + name
	}
	found := 0
	for i, l := range strings.Split(string(b), "\n") {
		if !strings.HasSuffix(strings.TrimSpace(l), mark) {
			continue
		}
		if found != 0 {
			return 0, fmt.Errorf("%s: %q marks both line %d and line %d", path, mark, found, i+1)
		}
		found = i + 1
	}
	if found == 0 {
		return 0, fmt.Errorf("%s: no line ends with %q", path, mark)
	}
	return found, nil
}
