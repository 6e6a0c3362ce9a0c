// Package gatherwire is what both sides of a gather command share, written
// once: the gather methods' messages (the owner's info and reply records,
// their encoders and strict decoders), the gather error codes and their
// text form, the chunk-shape rule (ChunkShape) that the requester applies
// when it shapes a command and the owner when it validates one, and the
// errors both report. verbs/engine and verbs/gather re-export the public
// names; the format is described in verbs/gather's package doc (# Format).
package gatherwire
