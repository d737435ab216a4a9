package pycharm

import (
	"bufio"

	"github.com/sparkdap/sparkdap/dap"
)

// The worker hello is dap's (see dap/hello.go): the same line, parsed by
// the same code, so the two front ends cannot drift apart.
const helloPrefix = dap.HelloPrefix

// Hello is what the wrapper says about its worker.
type Hello = dap.Hello

func isHello(br *bufio.Reader) bool { return dap.IsHello(br) }

func readHello(br *bufio.Reader) (Hello, error) { return dap.ReadHello(br) }
