// Package transports builds a verbs backend by name, so a caller that
// takes the name from a flag, a configuration file or a discovery record
// (verbs.Transport.Name, discovery.Record.Transport) needs neither a
// switch over the backends nor an import of each. Names lists them:
// "tcp" (verbs/tcp, any host; the usual default) and "shm" (verbs/shm,
// processes of one Linux host; elsewhere its methods fail with
// verbs.ErrNotSupported).
//
// New's Config holds each backend's own configuration; New uses the one
// of the backend it builds, and the zero value is every backend's
// defaults. LocalAddr gives a listen address that only this host reaches,
// in the backend's form. An unknown name is an *UnknownError (wrapping
// ErrUnknown) that says which names are known.
package transports
