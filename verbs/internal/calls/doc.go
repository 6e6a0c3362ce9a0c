// Package calls is the control-call plumbing the verbs backends share.
// On the requester, Table tracks calls (and pings) waiting for their
// answers: keyed by call id, answered by the connection's reader,
// abandoned by a caller whose context ended, failed all at once when the
// connection ends. On the owner, Workers runs handlers on goroutines that
// outlive one call, so a steady stream of calls starts none.
package calls
