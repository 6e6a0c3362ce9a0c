//go:build !linux

package lookup

// mapTable returns size bytes from the Go heap: huge pages are a Linux
// feature here.
func mapTable(size int) (table []byte, huge bool, err error) {
	return make([]byte, size), false, nil
}
