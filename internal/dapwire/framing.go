package dapwire

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
)

// DefaultMaxMessageBytes bounds one message body where the reader is given
// no limit. debugpy can produce large evaluate and output payloads, so this
// is generous.
const DefaultMaxMessageBytes = 16 << 20

// maxHeaderBytes bounds the header block, which in practice is one line.
const maxHeaderBytes = 4096

// BodyChunk is the first buffer a body gets: a body larger than that
// grows, doubling, only as its bytes arrive, never to the length a peer
// declares before sending it.
const BodyChunk = 4 << 10

// ErrMessageTooLarge is returned when a peer announces a body over the limit.
var ErrMessageTooLarge = errors.New("message exceeds the size limit")

// ErrMalformedFrame is returned for a header that breaks the framing rules.
var ErrMalformedFrame = errors.New("malformed frame")

// FrameReader reads Content-Length framed messages. Unlike go-dap's reader it
// has a configurable limit, a lower one until its peer is admitted
// (LimitUntil), reports malformed headers precisely, and never allocates a
// body's declared length before the body arrives. It is used by one
// goroutine, the connection's reader (OnAlloc and Reader are set up and
// taken before it starts).
type FrameReader struct {
	r   *bufio.Reader
	max int
	// Until admitted is set (by anyone; it is read before each frame),
	// bodies are bounded by preMax instead of max.
	admitted *atomic.Bool
	preMax   int
	onAlloc  func(capacity int) // see OnAlloc
	next     io.Reader          // see ReadFromNext
}

// NewFrameReader reads frames from r, refusing bodies over max bytes
// (DefaultMaxMessageBytes if max is not positive).
func NewFrameReader(r io.Reader, max int) *FrameReader {
	if max <= 0 {
		max = DefaultMaxMessageBytes
	}
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 4096)
	}
	return &FrameReader{r: br, max: max}
}

// OnAlloc has f told the capacity of each body buffer the reader makes,
// on the reader's goroutine (tests measure what a peer can make it hold).
func (fr *FrameReader) OnAlloc(f func(capacity int)) { fr.onAlloc = f }

// Reader is the buffered reader frames are read from, for a caller that
// reads something other than a frame first (the worker's hello line).
func (fr *FrameReader) Reader() *bufio.Reader { return fr.r }

// LimitUntil bounds bodies to n bytes (or the reader's own limit, if
// lower) until admitted is set; from the next frame after that, the
// reader's own limit applies.
func (fr *FrameReader) LimitUntil(admitted *atomic.Bool, n int) {
	fr.admitted, fr.preMax = admitted, min(n, fr.max)
}

// ReadFromNext has the reader read from r instead, from the next Wait
// that finds nothing buffered (so no byte is lost or reordered): r must
// be the same stream as what the reader reads now, unwrapped (a
// connection read through a wrapper that only needed its first bytes).
// Each wrapper's Read is one more frame under an idle reader's park.
func (fr *FrameReader) ReadFromNext(r io.Reader) { fr.next = r }

// readNext switches to ReadFromNext's reader, with nothing buffered. Not
// inlined: its locals would stay in Wait's frame, under every park.
//
//go:noinline
func (fr *FrameReader) readNext() {
	fr.r.Reset(fr.next) // keeps its buffer
	fr.next = nil
}

// Wait blocks until the next frame's first byte has arrived. It parks in
// a shallow frame, not ReadFrame's: the runtime halves an idle goroutine's
// stack at GC only while it uses under a quarter of it, and an idle
// session's reader is most of what the session costs.
// Its errors are ReadFrame's for the same end: io.EOF for a clean end
// between messages.
func (fr *FrameReader) Wait() error {
	if fr.r.Buffered() > 0 {
		return nil
	}
	if fr.next != nil {
		fr.readNext()
	}
	if _, err := fr.r.Peek(1); err != nil {
		if err == io.EOF {
			return io.EOF
		}
		return fmt.Errorf("reading header: %w", err)
	}
	return nil
}

// ReadFrame returns the next message body, in a buffer of its own. io.EOF
// means a clean end between messages; any other error leaves the stream
// unusable.
func (fr *FrameReader) ReadFrame() ([]byte, error) { return fr.ReadFrameInto(nil) }

// ReadFrameInto is ReadFrame reading a body that fits in buf's capacity
// into buf's storage, for a reader that is done with each body before it
// reads the next and would rather not allocate one a frame. A larger body
// (or any, if buf is nil) gets a buffer of its own, as with ReadFrame, so
// a reader that passes each body back in keeps the largest it needed.
func (fr *FrameReader) ReadFrameInto(buf []byte) ([]byte, error) {
	length := -1
	headerBytes := 0
	for first := true; ; first = false {
		line, err := fr.r.ReadSlice('\n')
		if err != nil {
			if err == io.EOF && first && len(line) == 0 {
				return nil, io.EOF
			}
			if err == bufio.ErrBufferFull {
				return nil, fmt.Errorf("%w: header line too long", ErrMalformedFrame)
			}
			return nil, fmt.Errorf("reading header: %w", noEOF(err))
		}
		headerBytes += len(line)
		if headerBytes > maxHeaderBytes {
			return nil, fmt.Errorf("%w: header block too long", ErrMalformedFrame)
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, ok := strings.Cut(string(line), ":")
		if !ok {
			return nil, fmt.Errorf("%w: malformed header %q", ErrMalformedFrame, clip(string(line), 64))
		}
		if strings.EqualFold(strings.TrimSpace(name), "Content-Length") {
			n, err := strconv.Atoi(strings.TrimSpace(value))
			if err != nil || n < 0 {
				return nil, fmt.Errorf("%w: bad Content-Length %q", ErrMalformedFrame, clip(value, 32))
			}
			length = n
		}
	}
	if length < 0 {
		return nil, fmt.Errorf("%w: missing Content-Length header", ErrMalformedFrame)
	}
	max, before := fr.max, ""
	if fr.admitted != nil && !fr.admitted.Load() {
		max, before = fr.preMax, " before admission"
	}
	if length > max {
		return nil, fmt.Errorf("%w: %d bytes announced, limit %d%s", ErrMessageTooLarge, length, max, before)
	}
	if buf != nil && length <= cap(buf) {
		if _, err := io.ReadFull(fr.r, buf[:length]); err != nil {
			return nil, fmt.Errorf("reading %d-byte body: %w", length, noEOF(err))
		}
		return buf[:length], nil
	}
	return fr.readBody(length)
}

// readBody reads a body of length bytes into a buffer that grows as they
// arrive: BodyChunk first, then doubling up to length. What a peer can
// make the reader hold is about twice what it sent, whatever it declared;
// a complete body costs at most one copy of itself on the way.
func (fr *FrameReader) readBody(length int) ([]byte, error) {
	body := make([]byte, min(length, BodyChunk))
	fr.alloc(len(body))
	for got := 0; ; {
		n, err := io.ReadFull(fr.r, body[got:])
		got += n
		if err != nil {
			return nil, fmt.Errorf("reading %d-byte body: %w", length, noEOF(err))
		}
		if got == length {
			return body, nil
		}
		grown := make([]byte, min(2*len(body), length))
		copy(grown, body)
		body = grown
		fr.alloc(len(body))
	}
}

func (fr *FrameReader) alloc(capacity int) {
	if fr.onAlloc != nil {
		fr.onAlloc(capacity)
	}
}

// AppendFrame appends to dst one frame whose body is parts, one after
// the other: a sender that builds its body from pieces copies each once,
// straight into the frame. Header and body are meant to go out in one
// write: split writes interact badly with Nagle and delayed ACKs (about
// 40 ms per message on Linux).
func AppendFrame(dst []byte, parts ...[]byte) []byte {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	dst = slices.Grow(dst, len("Content-Length: \r\n\r\n")+20+n)
	dst = append(dst, "Content-Length: "...)
	dst = strconv.AppendInt(dst, int64(n), 10)
	dst = append(dst, "\r\n\r\n"...)
	for _, p := range parts {
		dst = append(dst, p...)
	}
	return dst
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// clip cuts s to n bytes for an error message, marking the cut.
func clip(s string, n int) string {
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}
