// Command modproxy writes a module proxy into a directory, so that a
// module can be built alone (GOWORK=off) against its sibling modules
// before any of them is tagged: scripts/check-modules.sh serves the
// workspace's modules from it at the versions versions.yaml gives, with
// GOPROXY=file:///DIR,<the usual proxy>.
//
//	modproxy -o DIR MODULE@VERSION=SRCDIR [...]
//
// Each argument is one module version: its path, its version and the
// directory holding its go.mod. The output has the layout of the module
// proxy protocol (go help goproxy):
//
//	DIR/MODULE/@v/list           every version written for MODULE
//	DIR/MODULE/@v/VERSION.info   {"Version": ..., "Time": ...}
//	DIR/MODULE/@v/VERSION.mod    SRCDIR/go.mod
//	DIR/MODULE/@v/VERSION.zip    SRCDIR's files under MODULE@VERSION/
//
// The zip is made by golang.org/x/mod/zip, the code the go command and
// proxy.golang.org use, so it holds what a tag would: nested modules,
// vendor and VCS directories are left out, and a file a tagged module may
// not hold (an invalid or case-colliding name, a size over the limits) is
// an error here rather than at a user's go get.
//
// Paths holding upper-case letters are escaped as the protocol says
// (!x for X).
package main
