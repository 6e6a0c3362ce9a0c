// Package calls is the control-call plumbing the verbs backends share.
// On the requester, Table tracks calls (and pings) waiting for their
// answers: keyed by call id, answered by the connection's reader through
// Table.Answer, abandoned by a caller whose context ended, failed all at
// once when the connection ends. On the owner, Jobs pools the per-call
// request and response buffers, Workers runs handlers on goroutines that
// outlive one call, so a steady stream of calls starts none, and Reply
// shapes a handler's result into the REPLY frame.
package calls
