package ucp

import "errors"

// ErrNotSupported: this build has no UCX (the `ucx` build tag is off).
var ErrNotSupported = errors.New("ucp: built without UCX (the ucx build tag)")

// Error is a UCX call that failed: the call and UCX's status code and
// text.
type Error struct {
	Call   string
	Status int
	Text   string
}

func (e *Error) Error() string { return "ucp: " + e.Call + ": " + e.Text }
