// Package listener is the owner-side bookkeeping every verbs backend's segment
// needs, whatever carries its bytes: checking and defaulting
// ListenOptions, the method-to-Handler table that calls are dispatched
// through, and the set of live sessions with the accept loop that fills
// it and the close that empties it. A backend keeps only its handshake
// and its own resources (pins, probe memory).
package listener
