// Package etcd is the cluster backend of segment discovery: a
// discovery.Directory on an etcd v3 cluster, for owners and requesters on
// different hosts. It lives in its own module so that only programs that
// want etcd build its client.
//
// Each record is one key, Prefix()+name. Publish grants a lease (the TTL),
// creates the key only if it does not exist (a transaction comparing the
// key's create revision with 0) and keeps the lease alive for as long as the
// registration is open. Withdrawing revokes the lease, which deletes the key;
// an owner that dies or loses its connection stops renewing the lease and
// etcd deletes the key after the TTL, and the registration's Done reports
// discovery.ErrLost. A record's Revision is its key's mod revision, so it
// grows with every publication in the cluster. Lookup and List read keys;
// Watch reads the keys under a prefix, then watches them from the next
// revision.
//
// The directory New makes does not own the client: close it after the
// directory. Closing the client first is what a crash looks like to the
// cluster. Dial makes both from a URI and its Close closes both:
//
//	etcd://[USER[:PASSWORD]@]HOST:PORT[,HOST:PORT...][/PREFIX][?ttl=10s&timeout=5s]
//	etcds://...?cacert=ca.pem&cert=client.pem&key=client-key.pem
//
// (see ParseURI); it reads the prefix once before returning, so an
// unreachable cluster is an *UnreachableError at Dial, not a stall later.
// Package etcdtest embeds a real server for tests.
//
// # Format
//
// Key: the directory prefix (DefaultPrefix "/scatterkit/discovery/", set
// with WithPrefix; it ends with '/') followed by the record name, which the
// discovery naming rules keep to [A-Za-z0-9._:/-].
//
// Value: one JSON object, UTF-8, at most 256 KiB, with the fields of
// discovery.Record except the revision:
//
//	{
//	  "name":      "engram/t0",                 // equal to the key after the prefix
//	  "transport": "tcp",
//	  "addr":      "10.0.0.7:7000",
//	  "owner":     "node7/1234",                // omitted when empty
//	  "attrs":     {"rkey": "9"},               // omitted when empty
//	  "expires":   "2026-11-30T10:00:00.5Z"     // RFC 3339, omitted when none
//	}
//
// Lease: the owner's lease, one per record. Readers reject, with a
// *discovery.CorruptError naming the key: invalid JSON, unknown fields, data
// after the object, a "revision" field, a name that differs from the key, and
// a record breaking the discovery record rules. A new layout would need new
// field names or a new prefix; this code reads this one only.
package etcd
