// Package frame encodes and decodes the frames that verbs backends
// exchange: a fixed 32-byte little-endian header, optionally followed by a
// payload, plus the bodies of the handshake (HELLO/WELCOME) and PARAMS
// frames. The byte layout is specified in the verbs/tcp package doc under
// "Format"; shm uses the same frames for its control socket.
//
// Decoders reject anything malformed with a [*verbs.ProtocolError] and
// never allocate on the per-frame path.
package frame
