package pycharm

// SetMaxPendingHellos lowers the cap on pending hellos for a test; the
// returned func restores it.
func SetMaxPendingHellos(n int) func() {
	old := maxPendingHellos
	maxPendingHellos = n
	return func() { maxPendingHellos = old }
}
