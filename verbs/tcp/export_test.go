package tcp

// SetDirectPost switches directPost for benchmarks.
func SetDirectPost(on bool) (old bool) {
	old, directPost = directPost, on
	return old
}
