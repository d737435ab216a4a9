package acceptretry

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"
)

// failing is a listener whose first n Accepts fail with err.
type failing struct {
	net.Listener
	n   int
	err error
}

func (f *failing) Accept() (net.Conn, error) {
	if f.n > 0 {
		f.n--
		return nil, f.err
	}
	return f.Listener.Accept()
}

func TestAccept(t *testing.T) {
	tests := []struct {
		name    string
		fails   int
		err     error
		close   bool // close the listener instead of dialling
		wantErr bool
		retries int
	}{
		{"fd exhaustion is retried", 5, &net.OpError{Op: "accept", Err: syscall.EMFILE}, false, false, 5},
		{"closed listener ends", 0, nil, true, true, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if tc.close {
				l.Close()
			} else {
				go func() {
					if c, err := net.Dial("tcp", l.Addr().String()); err == nil {
						defer c.Close()
						<-ctx.Done()
					}
				}()
			}
			retries := 0
			c, err := Accept(ctx, &failing{l, tc.fails, tc.err}, nil, func(err error, wait time.Duration) {
				retries++
				if !errors.Is(err, syscall.EMFILE) || wait <= 0 || wait > MaxWait {
					t.Errorf("retry after %v, wait %v", err, wait)
				}
			})
			if (err != nil) != tc.wantErr || retries != tc.retries {
				t.Fatalf("Accept = %v, %v after %d retries; want error %v after %d", c, err, retries, tc.wantErr, tc.retries)
			}
			if c != nil {
				c.Close()
			}
		})
	}
}
