// Package discoverytest is the conformance suite of discovery.Directory: one
// set of tests, written once, that every backend runs from its own tests
// with Run. It checks the contract the discovery package documents:
// publish, lookup and list; refusal of names held by live owners; withdrawal,
// expiry and directory close; validation that changes nothing; watches
// (initial state, changes, prefixes, cancellation, leak-free ends); several
// handles onto one store; concurrent publishers of one name; and a random
// sequence of operations checked against a model, from a logged seed
// (set DISCOVERYTEST_SEED to replay one).
package discoverytest
