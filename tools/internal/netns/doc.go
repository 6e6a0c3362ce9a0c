// Package netns builds the two-host topology scatterbench runs its owner in:
// a network namespace joined to the root namespace by a veth pair, with
// addresses from a private /30 the package picks and frees itself. The owner
// runs inside the namespace (Link.Command wraps "ip netns exec"); the
// requester stays in the root namespace and reaches it through the veth.
// An optional tbf qdisc on both veth ends shapes the link to a rate
// (netem is not available on the development machines, so no delay
// emulation).
//
// Everything is done with the ip and tc commands, through a Runner seam so
// tests can check the command sequence without privileges. Namespaces are
// named Prefix + pid, interfaces "sb<pid>h" (root side) and "sb<pid>n"
// (namespace side). Link.Close deletes them; Sweep deletes those left by
// processes that no longer run (a run killed with SIGKILL).
//
// Creating namespaces needs root and the ip command: Available reports an
// *UnavailableError (ErrUnavailable) with the reason otherwise.
package netns
