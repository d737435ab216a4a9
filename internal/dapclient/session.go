package dapclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/google/go-dap"
)

// Initialize sends initialize with the arguments VS Code sends.
// supportsStartDebugging is what makes debugpy-like adapters report each new
// process through a startDebugging reverse request instead of a custom event.
func (c *Client) Initialize(ctx context.Context, supportsStartDebugging bool) (*dap.Capabilities, error) {
	args := dap.InitializeRequestArguments{
		ClientID:                      "vscode",
		ClientName:                    "sparkdap dapclient",
		AdapterID:                     "debugpy",
		Locale:                        "en",
		LinesStartAt1:                 true,
		ColumnsStartAt1:               true,
		PathFormat:                    "path",
		SupportsVariableType:          true,
		SupportsVariablePaging:        true,
		SupportsRunInTerminalRequest:  true,
		SupportsMemoryReferences:      true,
		SupportsProgressReporting:     true,
		SupportsInvalidatedEvent:      true,
		SupportsStartDebuggingRequest: supportsStartDebugging,
	}
	var caps dap.Capabilities
	if err := c.Call(ctx, "initialize", args, &caps); err != nil {
		return nil, err
	}
	return &caps, nil
}

// Attach runs the rest of a session start the way VS Code does after
// initialize: send attach, wait for the initialized event, let configure
// send breakpoints and the like, send configurationDone, and only then wait
// for the attach response, because debugpy's adapter withholds it until
// configurationDone. configure may be nil. args is marshalled as is (a map,
// a struct or a json.RawMessage).
func (c *Client) Attach(ctx context.Context, args any, configure func(ctx context.Context) error) error {
	if args == nil {
		args = map[string]any{}
	}
	attach, err := c.Send(ctx, "attach", args)
	if err != nil {
		return err
	}
	// Whichever comes first tells us the session is not going to start;
	// waiting for initialized alone would hang until ctx ends.
	early := make(chan *Response, 1)
	waitCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		if r, err := attach.Wait(waitCtx); err == nil && !r.Success {
			early <- r
		}
	}()
	initialized := make(chan error, 1)
	go func() {
		_, err := c.WaitEvent(waitCtx, "initialized", nil)
		initialized <- err
	}()
	select {
	case r := <-early:
		return r.Err()
	case err := <-initialized:
		if err != nil {
			// An adapter that refuses attach and hangs up ends both waits;
			// the reader delivered the response before it saw the end, so
			// the refusal, which says why, is already there.
			select {
			case <-attach.done:
				if attach.resp != nil && !attach.resp.Success {
					return attach.resp.Err()
				}
			default:
			}
			return fmt.Errorf("dapclient: attach: %w", err)
		}
	}
	if configure != nil {
		if err := configure(ctx); err != nil {
			return fmt.Errorf("dapclient: configuring session: %w", err)
		}
	}
	if err := c.ConfigurationDone(ctx); err != nil {
		return err
	}
	resp, err := attach.Wait(ctx)
	if err != nil {
		return err
	}
	return resp.Err()
}

// ConfigurationDone tells the adapter the client has finished configuring.
func (c *Client) ConfigurationDone(ctx context.Context) error {
	return c.Call(ctx, "configurationDone", map[string]any{}, nil)
}

// SetBreakpoints replaces the breakpoints of the source at path with plain
// line breakpoints. No lines clears them.
func (c *Client) SetBreakpoints(ctx context.Context, path string, lines ...int) ([]dap.Breakpoint, error) {
	bps := make([]dap.SourceBreakpoint, len(lines))
	for i, l := range lines {
		bps[i] = dap.SourceBreakpoint{Line: l}
	}
	args := dap.SetBreakpointsArguments{Source: dap.Source{Path: path}, Breakpoints: bps}
	var body dap.SetBreakpointsResponseBody
	if err := c.Call(ctx, "setBreakpoints", args, &body); err != nil {
		return nil, err
	}
	return body.Breakpoints, nil
}

// Threads lists the threads.
func (c *Client) Threads(ctx context.Context) ([]dap.Thread, error) {
	var body dap.ThreadsResponseBody
	err := c.Call(ctx, "threads", map[string]any{}, &body)
	return body.Threads, err
}

// StackTrace returns the frames of a stopped thread, innermost first.
func (c *Client) StackTrace(ctx context.Context, threadID int) ([]dap.StackFrame, error) {
	var body dap.StackTraceResponseBody
	err := c.Call(ctx, "stackTrace", dap.StackTraceArguments{ThreadId: threadID}, &body)
	return body.StackFrames, err
}

// Scopes returns the scopes of a frame.
func (c *Client) Scopes(ctx context.Context, frameID int) ([]dap.Scope, error) {
	var body dap.ScopesResponseBody
	err := c.Call(ctx, "scopes", dap.ScopesArguments{FrameId: frameID}, &body)
	return body.Scopes, err
}

// Variables returns the children of a variables reference.
func (c *Client) Variables(ctx context.Context, ref int) ([]dap.Variable, error) {
	var body dap.VariablesResponseBody
	err := c.Call(ctx, "variables", dap.VariablesArguments{VariablesReference: ref}, &body)
	return body.Variables, err
}

// Evaluate evaluates expression in a frame as the debug console (repl) does.
func (c *Client) Evaluate(ctx context.Context, frameID int, expression string) (*dap.EvaluateResponseBody, error) {
	var body dap.EvaluateResponseBody
	args := dap.EvaluateArguments{Expression: expression, FrameId: frameID, Context: "repl"}
	if err := c.Call(ctx, "evaluate", args, &body); err != nil {
		return nil, err
	}
	return &body, nil
}

// Continue resumes a thread (with debugpy, the whole process).
func (c *Client) Continue(ctx context.Context, threadID int) error {
	return c.Call(ctx, "continue", dap.ContinueArguments{ThreadId: threadID}, nil)
}

// StoppedEvent waits for the next stopped event and decodes it.
func (c *Client) StoppedEvent(ctx context.Context) (*dap.StoppedEventBody, error) {
	ev, err := c.WaitEvent(ctx, "stopped", nil)
	if err != nil {
		return nil, err
	}
	var body dap.StoppedEventBody
	if err := ev.Decode(&body); err != nil {
		return nil, err
	}
	return &body, nil
}

// StartDebugging holds the arguments of a startDebugging reverse request.
// Configuration is kept raw so that keys unknown to us survive into the
// child's attach unchanged.
type StartDebugging struct {
	Request       string          `json:"request"`
	Configuration json.RawMessage `json:"configuration"`
}

// ConnectAddr returns the host:port of configuration.connect, where the
// child session must be opened.
func (s *StartDebugging) ConnectAddr() (string, error) {
	var cfg struct {
		Connect *struct {
			Host string `json:"host"`
			Port int    `json:"port"`
		} `json:"connect"`
	}
	if err := json.Unmarshal(s.Configuration, &cfg); err != nil {
		return "", fmt.Errorf("dapclient: startDebugging configuration %s: %w", s.Configuration, err)
	}
	if cfg.Connect == nil || cfg.Connect.Port == 0 {
		return "", fmt.Errorf("dapclient: startDebugging configuration has no connect.port: %s", s.Configuration)
	}
	host := cfg.Connect.Host
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, strconv.Itoa(cfg.Connect.Port)), nil
}

// StartChild opens the child session a startDebugging request asks for, as
// VS Code does: dial configuration.connect on a new connection, initialize,
// attach with the configuration verbatim, configure, configurationDone.
// The child is returned running; the caller closes it.
func StartChild(ctx context.Context, req *StartDebugging, configure func(ctx context.Context, child *Client) error) (*Client, error) {
	if req.Request != "" && req.Request != "attach" {
		return nil, fmt.Errorf("dapclient: startDebugging wants %q, only attach is supported", req.Request)
	}
	addr, err := req.ConnectAddr()
	if err != nil {
		return nil, err
	}
	child, err := Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	if _, err := child.Initialize(ctx, true); err != nil {
		child.Close()
		return nil, fmt.Errorf("dapclient: child session at %s: %w", addr, err)
	}
	var conf func(context.Context) error
	if configure != nil {
		conf = func(ctx context.Context) error { return configure(ctx, child) }
	}
	if err := child.Attach(ctx, req.Configuration, conf); err != nil {
		child.Close()
		return nil, fmt.Errorf("dapclient: child session at %s: %w", addr, err)
	}
	return child, nil
}

// Child is a child session opened by FollowChildren, or why it failed.
type Child struct {
	Client *Client
	Config *StartDebugging
	Err    error
}

// FollowChildren makes c answer startDebugging reverse requests the way VS
// Code does: open the child with StartChild, then answer success (or
// failure) once the child's attach has completed. Each outcome is delivered
// on the returned channel; the receiver owns (and closes) each Client. Any
// other reverse request is refused. Child setup stops when ctx ends or c is
// closed. Call it before Initialize; it replaces any OnReverseRequest hook.
func (c *Client) FollowChildren(ctx context.Context, configure func(ctx context.Context, child *Client) error) <-chan Child {
	out := make(chan Child, 16)
	c.OnReverseRequest(func(command string, args json.RawMessage) (bool, any) {
		if command != "startDebugging" {
			return false, nil
		}
		setupCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(c.life, cancel)
		defer stop()

		var req StartDebugging
		res := Child{Config: &req}
		if err := json.Unmarshal(args, &req); err != nil {
			res.Err = fmt.Errorf("dapclient: startDebugging arguments %s: %w", args, err)
		} else {
			res.Client, res.Err = StartChild(setupCtx, &req, configure)
		}
		select {
		case out <- res:
		case <-setupCtx.Done():
			if res.Client != nil {
				res.Client.Close()
			}
			return false, nil
		}
		return res.Err == nil, nil
	})
	return out
}

// Disconnect ends the session as VS Code does after terminated; with
// terminate the adapter is asked to kill the debuggee. An adapter that
// hangs up instead of answering is not an error.
func (c *Client) Disconnect(ctx context.Context, terminate bool) error {
	resp, err := c.Request(ctx, "disconnect", dap.DisconnectArguments{TerminateDebuggee: terminate})
	if errors.Is(err, ErrClosed) {
		return nil
	}
	if err != nil {
		return err
	}
	return resp.Err()
}
