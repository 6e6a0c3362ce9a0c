package cudagather

import "fmt"

// checkTable checks a table's rows against its shape.
func checkTable(rows []byte, numRows int64, rowBytes int) error {
	switch {
	case numRows < 1 || rowBytes < 1:
		return &ArgError{Field: "table", Reason: fmt.Sprintf("%d rows of %d bytes", numRows, rowBytes)}
	case numRows > int64(len(rows))/int64(rowBytes) || int64(len(rows)) != numRows*int64(rowBytes):
		return &ArgError{Field: "table", Reason: fmt.Sprintf("%d bytes for %d rows of %d", len(rows), numRows, rowBytes)}
	}
	return nil
}
