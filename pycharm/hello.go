package pycharm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sparkdap/sparkdap/dap"
)

// The worker hello (see dap/hello.go, whose parser is not exported: this is
// a small copy of it). The wrapper opens a connection, sends
//
//	SPARKDAP/1 {"token": …, "pid": …, "host": …, "label": …, "roots": {…}}\n
//
// and reads up to "SPARKDAP/1 OK\n" or "SPARKDAP/1 REFUSED <reason>\n",
// skipping whatever the proxy sent before (it speaks first to every new
// connection, because pydevd never does).
const helloPrefix = "SPARKDAP/1 "

const maxHelloBytes = 64 << 10

// Hello is what the wrapper says about its worker: dap's type, so the two
// flavours cannot drift apart.
type Hello = dap.Hello

// isHello reports whether the buffered connection starts with a hello.
func isHello(br *bufio.Reader) bool {
	b, err := br.Peek(len(helloPrefix))
	return err == nil && string(b) == helloPrefix
}

// readHello reads and parses the hello line.
func readHello(br *bufio.Reader) (Hello, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxHelloBytes {
			return Hello{}, fmt.Errorf("hello longer than %d bytes", maxHelloBytes)
		}
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return Hello{}, fmt.Errorf("reading hello: %w", err)
		}
	}
	return parseHello(line)
}

func parseHello(line []byte) (Hello, error) {
	var h Hello
	if !bytes.HasPrefix(line, []byte(helloPrefix)) {
		return Hello{}, errors.New("not a hello")
	}
	if err := json.Unmarshal(bytes.TrimSpace(line[len(helloPrefix):]), &h); err != nil {
		return Hello{}, fmt.Errorf("malformed hello: %w", err)
	}
	if h.PID <= 0 {
		return Hello{}, errors.New("hello without a pid")
	}
	return h, nil
}
