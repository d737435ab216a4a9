// Package vscodeclient is a DAP client for tests that behaves towards the
// proxy the way real VS Code (1.139, with the Python Debugger extension)
// does, as recorded in DAP transcripts of real sessions against sparkdap:
//
//   - initialize carries VS Code's exact arguments (clientID "vscode",
//     supportsStartDebuggingRequest, …);
//   - attach carries the launch.json configuration plus what VS Code and
//     the extension add (clientOS, debugOptions, showReturnValue,
//     workspaceFolder, __configurationTarget, __sessionId);
//   - after initialized it sends, without waiting between them, one
//     setBreakpoints per file that has breakpoints, setFunctionBreakpoints,
//     setExceptionBreakpoints with the adapter's default filters, then
//     configurationDone and threads;
//   - a startDebugging reverse request opens a NEW connection to the
//     configuration's connect address, where the child session sends
//     initialize and attach with the configuration (type forced to the
//     parent's, request from the reverse request, a __sessionId of its
//     own); startDebugging is answered once the child's attach is
//     answered; the child then configures itself as above;
//   - on each stopped event: threads, stackTrace of the top frame
//     (startFrame 0, levels 1), then the next 19 frames and the top
//     frame's scopes, then the first scope's variables;
//   - on a terminated event: disconnect, then the connection is closed;
//   - the toolbar's Disconnect sends disconnect {restart: false,
//     terminateDebuggee: false}, its Stop {restart: false,
//     terminateDebuggee: true}, but VS Code drops terminateDebuggee unless
//     the adapter advertised supportTerminateDebuggee (and suspendDebuggee
//     unless supportSuspendDebuggee too); it waits up to 2 s for the
//     answer, then closes the connection;
//   - child sessions are started without lifecycleManagedByParent, so
//     stopping one session (the root included) stops only that one.
//
// It is built on internal/dapclient; each Session's Client is available
// for anything VS Code would do on user action (continue, evaluate, …).
package vscodeclient
