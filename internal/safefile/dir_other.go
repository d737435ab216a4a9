//go:build !unix

package safefile

// platform: elsewhere (Windows) a file has no uid and its mode bits do not
// show its ACL (windowsDirs).
var platform = windowsDirs
