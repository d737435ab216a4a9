package breakmark

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLine(t *testing.T) {
	const src = `def f(x):
    return x  # BREAKPOINT
def g(x):
    return x * x  # BREAKPOINT: square
def h(x):
    return x + 1  # BREAKPOINT: square-plus
# "# BREAKPOINT: square" in a comment's middle is not a mark
`
	tests := []struct {
		name, src, mark string
		want            int
		wantErr         string
	}{
		{name: "unnamed", src: src, want: 2},
		{name: "named", src: src, mark: "square", want: 4},
		{name: "a longer name with the same start", src: src, mark: "square-plus", want: 6},
		{name: "missing", src: src, mark: "cube", wantErr: `no line ends with "# BREAKPOINT: cube"`},
		{name: "twice", src: "a  # BREAKPOINT: x\nb  # BREAKPOINT: x\n", mark: "x", wantErr: "both line 1 and line 2"},
		{name: "unnamed mark absent", src: "a  # BREAKPOINT: x\n", wantErr: `no line ends with "# BREAKPOINT"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "job.py")
			if err := os.WriteFile(path, []byte(tt.src), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := Line(path, tt.mark)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), path) {
					t.Errorf("got %d, %v; want an error naming %s with %q", got, err, path, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}
