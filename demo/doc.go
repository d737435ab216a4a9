// Package demo is sparkdap's guided tour, `sparkdap demo`: it starts
// `sparkdap serve`, attaches a scripted DAP client in place of an IDE,
// runs the loans example (embedded in the binary and written to a
// temporary directory) under `sparkdap submit` on local Spark, and shows
// each executor task that stops at a breakpoint (where, which task, its
// variables) before letting the job finish.
//
// The demo drives the same binary as a user would, as child processes:
// serve and submit are what the README tells a user to run, and the job
// uses the pyspark, Java and debugger of the user's environment. Before it
// starts anything it checks that Python has what the example imports, and
// says what to install when it does not.
package demo
