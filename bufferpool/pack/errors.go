package pack

import (
	"errors"
	"fmt"
)

var (
	// ErrBounds reports an id whose table row lies outside the table, or an
	// ids slice, packed buffer or output too short for the layout.
	ErrBounds = errors.New("pack: out of bounds")
	// ErrLayout reports a layout that is malformed or whose destination rows
	// could overlap each other or the source.
	ErrLayout = errors.New("pack: bad layout")
	// ErrClosed reports a parallel call on closed [Workers].
	ErrClosed = errors.New("pack: workers closed")
)

// IDError reports the first rejected id of a request.
type IDError struct {
	// Index is the position of the id in the ids slice.
	Index int
	// ID is the id as given, before the bias is subtracted.
	ID int64
	// Err is ErrBounds for an id outside the table and ErrLayout for a
	// scatter id naming a table row that an earlier id names too.
	Err error
}

func (e *IDError) Error() string {
	what := "row outside the table"
	if errors.Is(e.Err, ErrLayout) {
		what = "table row written twice"
	}
	return fmt.Sprintf("id %d at index %d: %s: %v", e.ID, e.Index, what, e.Err)
}

// Unwrap returns e.Err.
func (e *IDError) Unwrap() error { return e.Err }
