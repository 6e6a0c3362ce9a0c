package ucx

import "time"

// Config tunes a Transport. The zero value is the documented default.
type Config struct {
	// HandshakeTimeout bounds a handshake when the context has no
	// deadline (and always on the owner side); 0 means 10 s.
	HandshakeTimeout time.Duration
	// CloseGrace bounds how long closing a connection waits for the other
	// side to let go of this side's memory (its endpoint flushed and its
	// control socket shut); past it the socket is closed regardless,
	// unfenced. 0 means 2 s.
	CloseGrace time.Duration
}

func (c Config) withDefaults() Config {
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = 10 * time.Second
	}
	if c.CloseGrace <= 0 {
		c.CloseGrace = 2 * time.Second
	}
	return c
}
