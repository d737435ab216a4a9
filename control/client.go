package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"path/filepath"
	"syscall"
)

// ErrAnswer is a request the server answered with an error; errors.As
// gives the *Error.
var ErrAnswer = errors.New("the proxy refused")

// Error is the server's error answer to a request.
type Error struct{ Code, Message string }

func (e *Error) Error() string { return e.Message }

// Unwrap makes errors.Is(err, ErrAnswer) hold.
func (e *Error) Unwrap() error { return ErrAnswer }

// NoServer reports whether err, from Call, means no serve listens on the
// socket: there is no socket file, or one a serve that ended left behind.
func NoServer(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED)
}

// Call sends req on the control socket at path and returns the answer,
// cleaned; an error answer is an *Error. ctx bounds the whole call (a
// capture takes as long as the executor needs).
//
// The socket's directory must be the user's alone (as Listen makes it):
// in one that someone else owns or may write to, the socket may be theirs,
// and it is refused (ErrUnsafeDir) before anything is sent.
func Call(ctx context.Context, path string, req Request) (Answer, error) {
	if err := checkPath(path); err != nil {
		return Answer{}, err
	}
	if err := privateDir(filepath.Dir(path), false); err != nil {
		return Answer{}, err
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return Answer{}, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	b, err := json.Marshal(req)
	if err != nil {
		return Answer{}, err
	}
	name := filepath.Base(path)
	if _, err := c.Write(append(b, '\n')); err != nil {
		return Answer{}, fmt.Errorf("control socket %s: %w", name, err)
	}
	if uc, ok := c.(*net.UnixConn); ok {
		_ = uc.CloseWrite() // the request is whole
	}
	raw, err := io.ReadAll(io.LimitReader(c, maxAnswerBytes+1))
	if ctx.Err() != nil {
		return Answer{}, ctx.Err()
	}
	if err != nil {
		return Answer{}, fmt.Errorf("control socket %s: %w", name, err)
	}
	if len(raw) > maxAnswerBytes {
		return Answer{}, fmt.Errorf("control socket %s: answer over %d bytes", name, maxAnswerBytes)
	}
	var ans Answer
	if err := json.Unmarshal(raw, &ans); err != nil {
		if len(raw) > 200 {
			raw = append(raw[:200:200], "…"...)
		}
		return Answer{}, fmt.Errorf("control socket %s: not an answer (%w): %q", name, err, raw)
	}
	ans.clean()
	if ans.Error != "" {
		return ans, &Error{Code: ans.Code, Message: ans.Error}
	}
	return ans, nil
}
