// Package handshake holds the error shaping both ends of every verbs
// backend's handshake share: a protocol violation is attributed to the
// peer and the handshake stage, anything else is wrapped with the
// backend's name and the peer, and a failure caused by the caller's
// context reports the context's error first.
package handshake
