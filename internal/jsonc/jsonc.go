// Package jsonc turns JSON with comments and trailing commas (the "JSONC"
// VS Code writes in .vscode/*.json) into plain JSON that encoding/json reads.
//
// Standardize blanks out `// line` and `/* block */` comments and trailing
// commas outside strings, keeping every other byte where it was (newlines
// included), so a json.SyntaxError offset into the result points at the
// same line and column of the input. It does not validate the JSON: that is
// left to the decoder that reads the result.
package jsonc

import (
	"bytes"
	"errors"
	"fmt"
)

// Info says what Standardize removed.
type Info struct {
	Comments       int // number of comments blanked
	TrailingCommas int // number of trailing commas blanked
	BOM            bool
}

// bom is the UTF-8 byte order mark some editors put first.
var bom = []byte{0xEF, 0xBB, 0xBF}

// Standardize returns src as plain JSON. The input is not modified. A
// leading UTF-8 byte order mark is replaced by spaces, like comments.
func Standardize(src []byte) ([]byte, Info, error) {
	var info Info
	out := append([]byte(nil), src...)
	i := 0
	if bytes.HasPrefix(out, bom) {
		info.BOM = true
		copy(out, "   ")
		i = len(bom)
	}
	// lastSig is the index of the last byte that is neither whitespace nor
	// part of a comment, or -1: a ']' or '}' right after a ',' makes that
	// comma a trailing one.
	lastSig := -1
	// beforeComma is lastSig as it was when the comma at lastSig was seen:
	// only a comma after a value can be a trailing one ("[,]" stays bad).
	beforeComma := -1
	for i < len(out) {
		c := out[i]
		switch {
		case c == '"':
			end, err := skipString(out, i)
			if err != nil {
				return nil, info, err
			}
			lastSig = end - 1
			i = end
			continue
		case c == '/' && i+1 < len(out) && out[i+1] == '/':
			j := i
			for j < len(out) && out[j] != '\n' && out[j] != '\r' {
				out[j] = ' '
				j++
			}
			info.Comments++
			i = j
			continue
		case c == '/' && i+1 < len(out) && out[i+1] == '*':
			end := bytes.Index(out[i+2:], []byte("*/"))
			if end < 0 {
				line, col := Position(src, i)
				return nil, info, fmt.Errorf("line %d, column %d: unterminated /* comment", line, col)
			}
			end += i + 2 + 2
			blank(out[i:end])
			info.Comments++
			i = end
			continue
		case c == ']' || c == '}':
			if lastSig >= 0 && out[lastSig] == ',' && beforeComma >= 0 && !bytes.ContainsRune([]byte("[{,:"), rune(out[beforeComma])) {
				out[lastSig] = ' '
				info.TrailingCommas++
			}
			lastSig = i
		case c == ',':
			beforeComma = lastSig
			lastSig = i
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		default:
			lastSig = i
		}
		i++
	}
	return out, info, nil
}

// skipString returns the index just past the string starting at out[i].
func skipString(out []byte, i int) (int, error) {
	for j := i + 1; j < len(out); j++ {
		switch out[j] {
		case '\\':
			j++ // the escaped byte cannot end the string
		case '"':
			return j + 1, nil
		case '\n':
			line, col := Position(out, i)
			return 0, fmt.Errorf("line %d, column %d: string not closed before the end of the line", line, col)
		}
	}
	line, col := Position(out, i)
	return 0, fmt.Errorf("line %d, column %d: %w", line, col, errUnterminated)
}

var errUnterminated = errors.New("unterminated string")

// blank replaces everything but line breaks with spaces.
func blank(b []byte) {
	for k, c := range b {
		if c != '\n' && c != '\r' {
			b[k] = ' '
		}
	}
}

// Position turns a byte offset into a 1-based line and column.
func Position(src []byte, offset int) (line, col int) {
	if offset > len(src) {
		offset = len(src)
	}
	line = 1 + bytes.Count(src[:offset], []byte("\n"))
	col = offset - bytes.LastIndexByte(src[:offset], '\n')
	return line, col
}
