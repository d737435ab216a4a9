// Package loans carries the loans example's Python files, so that
// `sparkdap demo` can run the example from an installed binary, with no
// checkout beside it.
package loans

import "embed"

// Files holds loans.py and loanlib.py.
//
//go:embed loans.py loanlib.py
var Files embed.FS
