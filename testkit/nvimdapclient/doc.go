// Package nvimdapclient is a test double of nvim-dap's view of one debug
// session: the thread names and the session name its widgets show, kept
// up to date the way nvim-dap (0.6 to HEAD of 2026) keeps them. nvim-dap
// itself is Lua inside Neovim and is not installed here; this follows its
// documented and observed behaviour (lua/dap/session.lua, ui/widgets.lua):
//
//   - the session keeps a table of threads by id, each with a name and
//     whether it is stopped, and a "threads are stale" flag;
//   - a thread event with reason "exited" removes the thread; any other
//     reason about a known id only marks it running (and forgets it as
//     the stopped thread) — its name is NOT read again; about an unknown
//     id it adds the thread named "Unknown" and marks the table stale;
//   - a stopped event reads the threads (a threads request, replacing
//     every name and keeping each known thread's stopped flag) only if
//     the table is stale or the stopped thread's id is unknown; then it
//     marks the thread stopped;
//   - a continued event with allThreadsContinued absent or true marks
//     every thread running, otherwise the one it names;
//   - the threads widget, when opened or refreshed, reads the threads
//     first if the table is stale, then lists the names;
//   - the sessions widget lists each session as "<id>: <config.name>";
//     the stopped event's description and text are not shown anywhere
//     but in an exception's floating window.
//
// Session follows one dapclient.Client's events in the order they came.
package nvimdapclient
